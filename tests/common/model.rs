//! Shared by the model tests: the upstream fixtures and scratch change folders.

use spectr::model::{TaskId, TaskSet, TaskStatus};
use std::fs;
use std::path::{Path, PathBuf};

pub const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/spectr-upstream/changes"
);

/// An upstream change folder (read only: copy it before editing).
pub fn fixture(name: &str) -> PathBuf {
    Path::new(FIXTURES).join(name)
}

/// A change folder at `<tmp>/spectr/changes/add-thing` holding `files`.
pub fn change(files: &[(&str, &str)]) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("spectr/changes/add-thing");
    fs::create_dir_all(&dir).unwrap();
    for (name, text) in files {
        let p = dir.join(name);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }
    (tmp, dir)
}

/// The status of task `id` in `set`.
pub fn status(set: &TaskSet, id: &str) -> TaskStatus {
    set.task(&TaskId::from(id)).expect("task").status
}
