//! `spectr ralph --help` in groups (issue 33): `-h` fits one screen, every
//! option sits under the group a person would look in, and the text of each
//! group is kept as a golden file (refresh it with
//! `SPECTR_UPDATE_GOLDEN=1 cargo test --test cli_help` and review the diff).

mod common;

use common::*;
use std::path::Path;
use std::process::Command;

const GROUPS: [&str; 8] = [
    "Agent:",
    "Task limits:",
    "Lanes:",
    "Remote lanes:",
    "Safety:",
    "Run control:",
    "Output:",
    "Session:",
];

fn help(flag: &str) -> String {
    let out = Command::new(spectr_bin())
        .args(["ralph", flag])
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    stdout_text(&out)
}

/// The groups' blocks: heading -> its lines.
fn groups(text: &str) -> Vec<(String, Vec<String>)> {
    let mut found: Vec<(String, Vec<String>)> = Vec::new();
    for line in text.lines() {
        if !line.starts_with(' ') && line.ends_with(':') {
            found.push((line.to_string(), Vec::new()));
        } else if !line.starts_with(' ') && !line.is_empty() {
            // Text after the options ends the last group.
            found.push((String::new(), Vec::new()));
        } else if let Some((_, lines)) = found.last_mut()
            && !line.is_empty()
        {
            lines.push(line.to_string());
        }
    }
    found
}

fn check_golden(name: &str, got: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("SPECTR_UPDATE_GOLDEN").is_some_and(|v| v == "1") {
        std::fs::write(&path, got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        want == got,
        "{} differs:\n--- want\n{want}\n--- got\n{got}\nIf meant: SPECTR_UPDATE_GOLDEN=1 cargo test --test cli_help",
        path.display()
    );
}

#[test]
fn short_help_fits_one_screen_in_groups() {
    let text = help("-h");
    assert!(
        text.lines().count() <= 60,
        "{} lines:\n{text}",
        text.lines().count()
    );
    let headings: Vec<String> = groups(&text)
        .into_iter()
        .map(|(h, _)| h)
        .filter(|h| GROUPS.contains(&h.as_str()))
        .collect();
    assert_eq!(headings, GROUPS, "{text}");
    // One line per option: nothing wraps at the default width.
    for (heading, lines) in groups(&text) {
        if GROUPS.contains(&heading.as_str()) {
            assert!(
                lines.iter().all(|l| l.trim_start().starts_with('-')),
                "{heading} wraps:\n{}",
                lines.join("\n")
            );
        }
    }
    check_golden("ralph-help-short.txt", &text);
}

#[test]
fn every_option_is_in_a_group_and_long_help_has_them_all() {
    let text = help("--help");
    let mut seen = 0;
    for (heading, lines) in groups(&text) {
        let options: Vec<&String> = lines
            .iter()
            .filter(|l| l.starts_with("  -") || l.starts_with("      --"))
            .collect();
        if heading == "Options:" {
            let names: Vec<&str> = options.iter().map(|l| l.trim()).collect();
            assert!(
                names
                    .iter()
                    .all(|n| n.starts_with("-h,") || n.starts_with("-V,")),
                "options outside every group: {names:?}"
            );
            continue;
        }
        if GROUPS.contains(&heading.as_str()) {
            assert!(!options.is_empty(), "{heading} is empty");
            seen += options.len();
            let block: String = lines.join("\n") + "\n";
            let file = format!(
                "ralph-help-{}.txt",
                heading
                    .trim_end_matches(':')
                    .to_lowercase()
                    .replace(' ', "-")
            );
            check_golden(&file, &block);
        }
    }
    // Every option of `spectr ralph`, the hidden-from-`-h` ones included.
    assert_eq!(seen, 38, "{text}");
    for rare in [
        "--command-timeout",
        "--completion-grace",
        "--kill-grace",
        "--rewind",
    ] {
        assert!(text.contains(rare), "{rare}");
        assert!(!help("-h").contains(rare), "{rare} in -h");
    }
    assert!(text.contains("Exit codes:"), "{text}");
}

/// `spectr man ralph`: a manual page from the same definitions, holding
/// every option `--help` has; `spectr man` is spectr's own page.
#[test]
fn the_manual_pages_come_from_the_same_definitions() {
    let page = |args: &[&str]| Command::new(spectr_bin()).args(args).output().unwrap();
    let out = page(&["man", "ralph"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let roff = stdout_text(&out);
    assert!(roff.contains(".TH spectr-ralph 1"), "{roff}");
    let long = help("--help");
    for option in long
        .split_whitespace()
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(|w| w.trim_end_matches([',', '.', ')', '`']))
        .filter(|w| {
            w.chars()
                .skip(2)
                .all(|c| c.is_ascii_lowercase() || c == '-')
        })
    {
        let escaped = option.replace('-', "\\-");
        assert!(roff.contains(&escaped), "{option} is not in the page");
    }
    let top = page(&["man"]);
    assert_eq!(top.status.code(), Some(0), "{top:?}");
    assert!(stdout_text(&top).contains(".TH spectr 1"));
    let wrong = page(&["man", "ralf"]);
    assert_ne!(wrong.status.code(), Some(0));
    let said = stderr_text(&wrong);
    assert!(said.contains("ralf") && said.contains("ralph"), "{said}");
    // Rendered by man(1) where it is installed.
    if let Ok(mut man) = Command::new("man")
        .args(["-l", "-"])
        .env("MANPAGER", "cat")
        .env("PAGER", "cat")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
    {
        use std::io::Write;
        man.stdin
            .take()
            .unwrap()
            .write_all(roff.as_bytes())
            .unwrap();
        let shown = man.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&shown.stdout);
        assert!(text.contains("spectr-ralph"), "{text}");
    } else {
        eprintln!("SKIPPED: man(1) is not installed; the page was not rendered");
    }
}
