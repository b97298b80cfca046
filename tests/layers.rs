//! Layers flow one way: the lower layers (agent, checkpoint, model, and the
//! plain-text helpers) never reach up into the loop, the UI or the CLI.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `path:line: text` for each line of code (comments aside) naming a module
/// of `above` through `crate::`.
fn upward_uses(files: &[PathBuf], above: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if above.iter().any(|m| code.contains(&format!("crate::{m}"))) {
                found.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    found
}

#[test]
fn lower_layers_import_nothing_above_them() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    for layer in ["agent", "checkpoint", "model"] {
        rust_files(&src.join(layer), &mut files);
    }
    files.push(src.join("text.rs"));
    assert!(files.len() > 20, "the source folders were found: {files:?}");
    let found = upward_uses(&files, &["ui", "ralph", "cli"]);
    assert!(
        found.is_empty(),
        "imports up the layers:\n{}",
        found.join("\n")
    );
}

#[test]
fn text_helpers_depend_on_nothing_of_ours() {
    let text = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/text.rs");
    let found = upward_uses(
        &[text],
        &["agent", "checkpoint", "model", "ui", "ralph", "cli"],
    );
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// The module path (`ralph::lanes::remote`) of a file under `src/`.
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts.join("::")
}

/// No circle of imports among the modules under `src/ralph` (a module
/// importing a child it declares is not one): each file can be read after
/// the ones it uses. Uses through `crate::ralph::…` and `super::…` count;
/// comments and test modules do not.
#[test]
fn the_loop_layer_has_no_import_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src.join("ralph"), &mut files);
    files.sort();
    let modules: std::collections::BTreeSet<String> =
        files.iter().map(|f| module_of(&src, f)).collect();
    let mut uses: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> =
        Default::default();
    for file in &files {
        let me = module_of(&src, file);
        let text = std::fs::read_to_string(file).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        let parent = me.rsplit_once("::").map_or("", |(p, _)| p).to_string();
        let mut deps = std::collections::BTreeSet::new();
        for line in code.lines() {
            let line = line.split("//").next().unwrap_or("");
            for (prefix, base) in [
                ("crate::", String::new()),
                ("super::", format!("{parent}::")),
            ] {
                for (at, _) in line.match_indices(prefix) {
                    let rest = &line[at + prefix.len()..];
                    let path: Vec<&str> = rest
                        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                        .next()
                        .unwrap_or("")
                        .split("::")
                        .collect();
                    for k in (1..=path.len()).rev() {
                        let candidate = format!("{base}{}", path[..k].join("::"));
                        if modules.contains(&candidate) {
                            // A parent using a child it declares is not a circle.
                            if !candidate.starts_with(&format!("{me}::")) && candidate != me {
                                deps.insert(candidate);
                            }
                            break;
                        }
                    }
                }
            }
        }
        uses.insert(me, deps);
    }
    // Depth-first search for a back edge; the circle is named when found.
    fn visit(
        m: &str,
        uses: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
        state: &mut std::collections::BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(m.to_string(), 1);
        path.push(m.to_string());
        for d in uses.get(m).into_iter().flatten() {
            match state.get(d.as_str()) {
                Some(1) => {
                    let from = path.iter().position(|p| p == d).unwrap_or(0);
                    let mut circle = path[from..].to_vec();
                    circle.push(d.clone());
                    return Some(circle);
                }
                Some(_) => {}
                None => {
                    if let Some(c) = visit(d, uses, state, path) {
                        return Some(c);
                    }
                }
            }
        }
        path.pop();
        state.insert(m.to_string(), 2);
        None
    }
    assert!(modules.len() > 30, "{modules:?}");
    let mut state = std::collections::BTreeMap::new();
    for m in uses.keys() {
        if !state.contains_key(m.as_str()) {
            let circle = visit(m, &uses, &mut state, &mut Vec::new());
            assert!(
                circle.is_none(),
                "an import circle: {}",
                circle.unwrap().join(" -> ")
            );
        }
    }
}
