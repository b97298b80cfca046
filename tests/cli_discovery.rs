//! Project discovery (walk up, git boundary, SPECTR_ROOT, openspec/) and
//! change-id resolution, through the `spectr` binary.

mod common;

use common::cli::{Proj, spectr_in, stderr, stdout};

const ONE_TASK: &str = "## 1. Work\n- [ ] Do it\n";

#[test]
fn walks_up_from_a_subfolder() {
    let p = Proj::new();
    p.add_change("add-thing", "Add thing", Some(ONE_TASK));
    let deep = p.root().join("src/a/b");
    std::fs::create_dir_all(&deep).unwrap();
    let out = spectr_in(&deep).arg("list").output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "add-thing  0/1 tasks\n");
}

#[test]
fn stops_at_the_git_boundary() {
    // outer/spectr exists, but outer/inner is its own repository.
    let p = Proj::new();
    p.add_change("outer-change", "Outer", None);
    let inner = p.root().join("inner");
    std::fs::create_dir_all(inner.join(".git")).unwrap();
    let cwd = inner.join("sub");
    std::fs::create_dir_all(&cwd).unwrap();
    let out = spectr_in(&cwd).arg("list").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("no spectr/ or openspec/ folder found"),
        "{err}"
    );
    assert!(
        err.contains("SPECTR_ROOT"),
        "the help names the override: {err}"
    );
    assert!(!stdout(&out).contains("outer-change"));

    // A `.git` file (worktrees, submodules) is a boundary too.
    std::fs::remove_dir(inner.join(".git")).unwrap();
    std::fs::write(inner.join(".git"), "gitdir: /elsewhere\n").unwrap();
    let out = spectr_in(&cwd).arg("list").output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));

    // The folder holding .git is still looked at.
    std::fs::create_dir_all(inner.join("spectr/changes")).unwrap();
    let out = spectr_in(&cwd).arg("list").output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "No items found\n");
}

#[test]
fn spectr_root_overrides_discovery() {
    let p = Proj::new();
    p.add_change("add-thing", "Add thing", Some(ONE_TASK));
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::create_dir(elsewhere.path().join(".git")).unwrap();

    for root in [p.root().to_path_buf(), p.root().join("spectr")] {
        let out = spectr_in(elsewhere.path())
            .env("SPECTR_ROOT", &root)
            .arg("list")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}: {}", root.display(), stderr(&out));
        assert_eq!(stdout(&out), "add-thing  0/1 tasks\n");
    }

    let missing = p.root().join("nope");
    let out = spectr_in(p.root())
        .env("SPECTR_ROOT", &missing)
        .arg("list")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("SPECTR_ROOT is set to"), "{err}");
    assert!(err.contains("does not exist"), "{err}");

    // An existing folder without spectr/ is refused too, even though the cwd
    // is inside a project: the override is never silently ignored.
    let out = spectr_in(p.root())
        .env("SPECTR_ROOT", elsewhere.path())
        .arg("list")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("holds no spectr/ or openspec/ folder"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn openspec_folder_is_found_and_spectr_wins() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join(".git")).unwrap();
    let os_change = tmp.path().join("openspec/changes/add-os");
    std::fs::create_dir_all(&os_change).unwrap();
    std::fs::write(os_change.join("proposal.md"), "# Add os\n").unwrap();
    std::fs::write(os_change.join("tasks.md"), "## 1. A\n- [x] a\n- [ ] b\n").unwrap();
    let out = spectr_in(tmp.path()).arg("list").output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    // Stories (what a run counts) and boxes (what the file ticks), named.
    assert_eq!(stdout(&out), "add-os  0/1 stories (1/2 boxes ticked)\n");

    let sp_change = tmp.path().join("spectr/changes/add-sp");
    std::fs::create_dir_all(&sp_change).unwrap();
    std::fs::write(sp_change.join("proposal.md"), "# Add sp\n").unwrap();
    let out = spectr_in(tmp.path()).arg("list").output().unwrap();
    assert_eq!(stdout(&out), "add-sp  0/0 tasks\n");
}

#[test]
fn only_folders_with_a_proposal_are_changes() {
    let p = Proj::new();
    p.add_change("add-b", "B", None);
    p.add_change("add-a", "A", None);
    p.write("spectr/changes/no-proposal/tasks.md", ONE_TASK);
    p.write(
        "spectr/changes/archive/2025-01-01-add-old/proposal.md",
        "# Old\n",
    );
    p.write("spectr/changes/stray-file.md", "x");
    let out = p.cmd().arg("list").output().unwrap();
    assert_eq!(stdout(&out), "add-a  0/0 tasks\nadd-b  0/0 tasks\n");

    let out = p.cmd().args(["accept", "no-proposal"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("has no proposal.md"),
        "{}",
        stderr(&out)
    );
}

fn resolution_project() -> Proj {
    let p = Proj::new();
    for id in [
        "add-greeting",
        "add-greeting-cli",
        "remove-legacy",
        "update-docs",
    ] {
        p.add_change(id, id, Some(ONE_TASK));
    }
    p
}

/// Runs `accept --dry-run <typed>`; returns (exit code, stdout, stderr).
fn accept_dry(p: &Proj, typed: &str) -> (Option<i32>, String, String) {
    let out = p
        .cmd()
        .args(["accept", "--dry-run", typed])
        .output()
        .unwrap();
    (out.status.code(), stdout(&out), stderr(&out))
}

#[test]
fn exact_match_wins_and_says_nothing() {
    let p = resolution_project();
    let (code, out, err) = accept_dry(&p, "add-greeting");
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains("Resolved"), "{err}");
    assert!(
        out.contains("spectr/changes/add-greeting/tasks.jsonc"),
        "{out}"
    );
}

#[test]
fn prefix_then_substring_resolution() {
    let p = resolution_project();
    for (typed, id) in [
        ("remove", "remove-legacy"),
        ("REMOVE-L", "remove-legacy"),
        ("add-greeting-c", "add-greeting-cli"),
        ("docs", "update-docs"),
        ("LEGACY", "remove-legacy"),
    ] {
        let (code, out, err) = accept_dry(&p, typed);
        assert_eq!(code, Some(0), "{typed}: {err}");
        assert!(
            err.contains(&format!("Resolved '{typed}' -> '{id}'")),
            "{typed}: {err}"
        );
        assert!(
            out.contains(&format!("spectr/changes/{id}/tasks.jsonc")),
            "{out}"
        );
    }
}

#[test]
fn ambiguous_id_names_the_candidates() {
    let p = resolution_project();
    let (code, _, err) = accept_dry(&p, "add");
    assert_eq!(code, Some(2));
    assert!(err.contains("ambiguous"), "{err}");
    assert!(err.contains("add-greeting, add-greeting-cli"), "{err}");
    // Substring ambiguity too ("e" is in every id, prefix of none).
    let (code, _, err) = accept_dry(&p, "greet");
    assert_eq!(code, Some(2));
    assert!(err.contains("add-greeting, add-greeting-cli"), "{err}");
}

#[test]
fn unknown_id_suggests_list() {
    let p = resolution_project();
    let (code, out, err) = accept_dry(&p, "zzz");
    assert_eq!(code, Some(2));
    assert!(out.is_empty());
    assert!(err.contains("change 'zzz' not found"), "{err}");
    assert!(err.contains("spectr list"), "{err}");
}

#[test]
fn ids_that_leave_the_changes_folder_are_refused() {
    let p = resolution_project();
    // A would-be target outside changes/, with everything accept needs.
    p.write("spectr/evil/proposal.md", "# Evil\n");
    p.write("spectr/evil/tasks.md", ONE_TASK);
    for typed in [
        "../evil",
        "..",
        "../../spectr/evil",
        "a/b",
        "add-greeting/",
        "/tmp",
        "..\\evil",
    ] {
        let out = p.cmd().args(["accept", typed]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{typed}");
        let err = stderr(&out);
        assert!(err.contains("invalid change id"), "{typed}: {err}");
    }
    assert!(!p.root().join("spectr/evil/tasks.jsonc").exists());
    let out = p
        .cmd()
        .args(["accept", "spectr/changes/add-greeting"])
        .output()
        .unwrap();
    assert!(
        stderr(&out).contains("'add-greeting'"),
        "the hint names the folder"
    );
}
