//! The user guide (`docs/src/`, an mdBook), README.md and ARCHITECTURE.md
//! stay honest: every long option `--help` prints and every `--json` event
//! is documented in the guide, every relative link resolves (its anchor
//! included), the guide's table of contents lists exactly its chapters, and
//! README.md stays short.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn guide_dir() -> PathBuf {
    repo().join("docs/src")
}

/// Every Markdown file under `dir`, sorted (none when `dir` is missing).
fn markdown_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(markdown_files(&path));
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// The whole guide as one text.
fn guide_text() -> String {
    markdown_files(&guide_dir())
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The long options `spectr <args> --help` lists (the option lines only, not
/// options named in prose).
fn long_options(args: &[&str]) -> BTreeSet<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_spectr"))
        .args(args)
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success(), "spectr {args:?} --help: {out:?}");
    let help = String::from_utf8(out.stdout).unwrap();
    let mut found = BTreeSet::new();
    for line in help.lines() {
        let line = line.trim_start();
        if !line.starts_with('-') {
            continue;
        }
        // `-j, --jobs <N>` or `--agent <NAME>`: the option is among the
        // first two words.
        for word in line.split_whitespace().take(2) {
            let word = word.trim_end_matches(',');
            if let Some(name) = word.strip_prefix("--") {
                let name: String = name
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                    .collect();
                if !name.is_empty() {
                    found.insert(format!("--{name}"));
                }
            }
        }
    }
    found
}

#[test]
fn every_long_option_of_every_command_is_in_the_guide() {
    let guide = guide_text();
    let commands: &[&[&str]] = &[
        &["list"],
        &["accept"],
        &["ralph"],
        &["completions"],
        &["task"],
        &["task", "done"],
        &["task", "sync"],
        &["learn"],
        &["status"],
        &["context"],
        &["report"],
        &["watch"],
        &["serve"],
        &["man"],
    ];
    let mut missing = Vec::new();
    let mut seen = 0;
    for args in commands {
        for option in long_options(args) {
            seen += 1;
            if !guide.contains(&option) {
                missing.push(format!("spectr {} {option}", args.join(" ")));
            }
        }
    }
    assert!(seen > 40, "the help texts were read: {seen} options");
    assert!(
        missing.is_empty(),
        "options --help prints that docs/src/ never names:\n{}",
        missing.join("\n")
    );
}

/// `TaskCommitted` -> `task_committed`, as serde's `snake_case` names it.
fn snake_case(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The `event` names of `LoopEvent`, read from its definition (variants are
/// the lines at one indent inside `pub enum LoopEvent`; a
/// `#[serde(rename = "...")]` above one wins).
fn event_names() -> Vec<String> {
    let source = std::fs::read_to_string(repo().join("src/ralph/event.rs")).unwrap();
    let start = source
        .find("pub enum LoopEvent {")
        .expect("LoopEvent is defined in src/ralph/event.rs");
    let before = &source[..start];
    assert!(
        before
            .lines()
            .rev()
            .take(4)
            .any(|l| l.contains("tag = \"event\"") && l.contains("rename_all = \"snake_case\"")),
        "LoopEvent is still tagged `event` in snake_case (update this test otherwise)"
    );
    let mut names = Vec::new();
    let mut rename: Option<String> = None;
    let mut skip = false;
    for line in source[start..].lines().skip(1) {
        if line.starts_with('}') {
            break;
        }
        let Some(rest) = line.strip_prefix("    ") else {
            continue;
        };
        if rest.starts_with(' ') || rest.starts_with("//") {
            continue;
        }
        if rest.starts_with("#[") {
            if rest.contains("serde(skip") {
                skip = true;
            }
            if let Some(i) = rest.find("rename = \"") {
                let name = &rest[i + "rename = \"".len()..];
                rename = name.split('"').next().map(str::to_string);
            }
            continue;
        }
        let ident: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if ident.is_empty() || !ident.starts_with(|c: char| c.is_ascii_uppercase()) {
            continue;
        }
        if !skip {
            names.push(rename.take().unwrap_or_else(|| snake_case(&ident)));
        }
        rename = None;
        skip = false;
    }
    names
}

#[test]
fn every_json_event_is_in_the_guide() {
    let names = event_names();
    assert!(
        names.len() > 20 && names.iter().any(|n| n == "task_committed"),
        "the event names were read: {names:?}"
    );
    let guide = guide_text();
    let missing: Vec<&String> = names
        .iter()
        .filter(|n| !guide.contains(&format!("`{n}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "--json events docs/src/ never names (as `name`): {missing:?}"
    );
}

/// The anchors a Markdown file's headings make, as mdBook and GitHub make
/// them: lower case, spaces to `-`, only letters, digits, `-` and `_` kept;
/// a repeated heading gets `-1`, `-2`, ...
fn anchors(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut in_code = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code || !line.starts_with('#') {
            continue;
        }
        let title = line.trim_start_matches('#').trim();
        let slug: String = title
            .chars()
            .filter_map(|c| {
                if c == ' ' {
                    Some('-')
                } else if c.is_alphanumeric() || c == '-' || c == '_' {
                    Some(c.to_lowercase().next().unwrap())
                } else {
                    None
                }
            })
            .collect();
        let mut unique = slug.clone();
        let mut n = 1;
        while found.contains(&unique) {
            unique = format!("{slug}-{n}");
            n += 1;
        }
        found.insert(unique);
    }
    found
}

/// The link targets of a Markdown text (`[text](target)`, images included),
/// outside fenced code blocks and code spans.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut in_code = false;
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        // Drop code spans, so that `[x](y)` written as code is no link.
        let mut plain = String::new();
        for (i, part) in line.split('`').enumerate() {
            if i % 2 == 0 {
                plain.push_str(part);
            }
        }
        let mut rest = plain.as_str();
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(end) = after.find(')') else { break };
            let target = after[..end].split_whitespace().next().unwrap_or("");
            found.push((n + 1, target.to_string()));
            rest = &after[end..];
        }
    }
    found
}

#[test]
fn every_relative_link_resolves() {
    let mut files = vec![repo().join("README.md"), repo().join("ARCHITECTURE.md")];
    files.extend(markdown_files(&guide_dir()));
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in &files {
        let Ok(text) = std::fs::read_to_string(file) else {
            broken.push(format!("{}: missing", file.display()));
            continue;
        };
        for (line, target) in links(&text) {
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let resolved = if path.is_empty() {
                file.clone()
            } else {
                file.parent().unwrap().join(path)
            };
            let place = format!("{}:{line}: {target}", file.display());
            if !resolved.exists() {
                broken.push(format!("{place}: no such file"));
                continue;
            }
            if let Some(anchor) = anchor
                && resolved.extension().is_some_and(|e| e == "md")
            {
                let text = std::fs::read_to_string(&resolved).unwrap();
                if !anchors(&text).contains(anchor) {
                    broken.push(format!("{place}: no heading makes #{anchor}"));
                }
            }
        }
    }
    assert!(checked > 10, "links were found: {checked}");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_summary_lists_exactly_the_chapters() {
    let dir = guide_dir();
    let summary = std::fs::read_to_string(dir.join("SUMMARY.md"))
        .expect("docs/src/SUMMARY.md, the guide's table of contents");
    assert!(repo().join("docs/book.toml").is_file(), "docs/book.toml");
    let listed: BTreeSet<PathBuf> = links(&summary)
        .into_iter()
        .filter(|(_, t)| !t.is_empty())
        .map(|(_, t)| dir.join(t.split('#').next().unwrap()))
        .collect();
    let missing: Vec<_> = listed.iter().filter(|p| !p.is_file()).collect();
    assert!(
        missing.is_empty(),
        "SUMMARY.md lists missing files: {missing:?}"
    );
    let chapters: BTreeSet<PathBuf> = markdown_files(&dir)
        .into_iter()
        .filter(|p| !p.ends_with("SUMMARY.md"))
        .collect();
    let unlisted: Vec<_> = chapters.difference(&listed).collect();
    assert!(
        unlisted.is_empty(),
        "chapters SUMMARY.md does not list: {unlisted:?}"
    );
    assert!(chapters.len() >= 10, "the guide's chapters: {chapters:?}");
}

#[test]
fn the_readme_stays_short() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines < 250,
        "README.md has {lines} lines; the details belong in the guide (docs/src/)"
    );
}
