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
