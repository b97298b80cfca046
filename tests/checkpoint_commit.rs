//! A task's commit (`Checkpointer::commit_task`): the branch's tree plus
//! exactly the task's change, never the user's own uncommitted work, the
//! index kept in step, and a branch moved under the run refused.

mod common;

use common::checkpoint::*;
use spectr::checkpoint::{Checkpointer, Known, NotCommitted, TaskChange};
use std::path::PathBuf;

fn with_identity(fx: &Fixture) {
    fx.git(&["config", "user.name", "Ada Lovelace"]);
    fx.git(&["config", "user.email", "ada@example.com"]);
}

fn no_edit(_: &[(PathBuf, Vec<u8>)]) -> Vec<(PathBuf, Vec<u8>)> {
    Vec::new()
}

/// The tree now, as a checkpoint reads it (spectr's folder left out).
fn snapshot(cp: &Checkpointer) -> String {
    cp.snapshot_tree().unwrap()
}

fn show(fx: &Fixture, rev: &str) -> String {
    fx.git(&["show", "--format=", "--name-status", rev])
}

fn change<'a>(base: &'a str, after: &'a str, since: Option<&'a str>) -> TaskChange<'a> {
    TaskChange {
        branch: "refs/heads/main",
        since,
        base,
        after,
        skip: &[],
        message: "1.1 Add the parser\n\nSpectr-Task: 1.1\n",
        known: Known::default(),
    }
}

#[test]
fn the_commit_holds_the_tasks_change_and_none_of_the_users_work() {
    let fx = populated();
    with_identity(&fx);
    // The user's own uncommitted work, before the task: an edit of a
    // tracked file the task also edits (another line), and a new file.
    fx.write("a.txt", "alpha\nmine\n");
    fx.write("notes.txt", "my notes\n");
    let cp = fx.checkpointer().with_excludes(loop_excludes(&fx));
    let before = snapshot(&cp);
    let head = fx.git(&["rev-parse", "HEAD"]).trim().to_owned();
    // The task.
    fx.write("a.txt", "task line\nalpha\nmine\n");
    fx.write("src/parser.rs", "fn parse() {}\n");
    std::fs::remove_file(fx.root.join("b.txt")).unwrap();
    let after = snapshot(&cp);
    let done = cp
        .commit_task(&change(&before, &after, Some(&head)), &no_edit)
        .unwrap()
        .unwrap();
    let commit = done.commit.clone().expect("a commit");
    assert_eq!(done.parent.as_deref(), Some(head.as_str()));
    assert_eq!(done.files, ["a.txt", "b.txt", "src/parser.rs"]);
    assert!(done.left_out.is_empty(), "{done:?}");
    assert_eq!(fx.git(&["rev-parse", "main"]).trim(), commit);
    // The task's line is committed, the user's is not; notes.txt is not.
    assert_eq!(fx.git(&["show", "main:a.txt"]), "task line\nalpha\n");
    assert!(!fx.git_ok(&["cat-file", "-e", "main:notes.txt"]));
    assert!(!fx.git_ok(&["cat-file", "-e", "main:untracked.txt"]));
    assert_eq!(show(&fx, "main"), "M\ta.txt\nD\tb.txt\nA\tsrc/parser.rs\n");
    // The work tree is untouched; git status shows only the user's work.
    assert_eq!(fx.read("a.txt").unwrap(), "task line\nalpha\nmine\n");
    assert_eq!(
        fx.status(),
        " M a.txt\n?? .ralph/session.json\n?? notes.txt\n?? untracked.txt\n",
    );
    assert_eq!(
        fx.git(&["diff", "a.txt"])
            .lines()
            .filter(|l| l.starts_with('+') && !l.starts_with("+++"))
            .collect::<Vec<_>>(),
        ["+mine"]
    );
    // The user's identity, and the message as given.
    assert_eq!(
        fx.git(&["log", "-1", "--format=%an <%ae>|%cn|%s", "main"])
            .trim(),
        "Ada Lovelace <ada@example.com>|Ada Lovelace|1.1 Add the parser"
    );
    // Found again by its trailer (a resume after a kill), and only after
    // the commit the run last saw.
    let trailer = vec!["Spectr-Task: 1.1".to_string()];
    assert_eq!(
        cp.find_commit_with("refs/heads/main", Some(&head), &trailer)
            .unwrap(),
        Some(commit.clone())
    );
    assert_eq!(
        cp.find_commit_with("refs/heads/main", Some(&commit), &trailer)
            .unwrap(),
        None
    );
}

/// The attempt's checkpoint refs, dropped "soon", are deleted in the
/// branch's move (one transaction); a branch moved under the run refuses the
/// commit and still deletes them.
#[test]
fn the_attempts_checkpoint_refs_go_with_the_branchs_move() {
    let fx = populated();
    with_identity(&fx);
    let cp = fx.checkpointer().with_excludes(loop_excludes(&fx));
    let head = fx.git(&["rev-parse", "HEAD"]).trim().to_owned();
    let checkpoint = cp.create(&cp.ref_name("chg", "1.1", 1)).unwrap();
    let before = checkpoint.tree.clone().unwrap();
    fx.write("src/parser.rs", "fn parse() {}\n");
    let after = snapshot(&cp);
    cp.drop_soon(&checkpoint).unwrap();
    assert_eq!(cp.list_refs("chg").unwrap().len(), 2);
    let done = cp
        .commit_task(&change(&before, &after, Some(&head)), &no_edit)
        .unwrap()
        .unwrap();
    assert_eq!(fx.git(&["rev-parse", "main"]).trim(), done.commit.unwrap());
    assert!(cp.list_refs("chg").unwrap().is_empty());

    // The branch reset under the run: no commit, the refs dropped all the same.
    let checkpoint = cp.create(&cp.ref_name("chg", "1.2", 1)).unwrap();
    let before = checkpoint.tree.clone().unwrap();
    fx.write("src/lexer.rs", "fn lex() {}\n");
    let after = snapshot(&cp);
    let since = fx.git(&["rev-parse", "main"]).trim().to_owned();
    fx.git(&["update-ref", "refs/heads/main", &head]);
    fx.git(&["commit", "-q", "--allow-empty", "-m", "the user's"]);
    cp.drop_soon(&checkpoint).unwrap();
    let refused = cp
        .commit_task(&change(&before, &after, Some(&since)), &no_edit)
        .unwrap();
    assert!(
        matches!(refused, Err(NotCommitted::Rewritten { .. })),
        "{refused:?}"
    );
    cp.settle();
    assert!(cp.list_refs("chg").unwrap().is_empty());
}

#[test]
fn a_change_overlapping_the_users_uncommitted_edit_is_left_out() {
    let fx = populated();
    with_identity(&fx);
    fx.write("a.txt", "alpha, mine\n");
    let cp = fx.checkpointer().with_excludes(loop_excludes(&fx));
    let head = fx.git(&["rev-parse", "HEAD"]).trim().to_owned();
    let before = snapshot(&cp);
    fx.write("a.txt", "alpha, mine, and the task's\n");
    fx.write("new.txt", "task\n");
    let after = snapshot(&cp);
    let done = cp
        .commit_task(&change(&before, &after, Some(&head)), &no_edit)
        .unwrap()
        .unwrap();
    assert_eq!(done.left_out, ["a.txt"]);
    assert_eq!(done.files, ["new.txt"]);
    assert_eq!(fx.git(&["show", "main:a.txt"]), "alpha\n");
    assert_eq!(fx.read("a.txt").unwrap(), "alpha, mine, and the task's\n");
    assert_eq!(
        fx.status(),
        " M a.txt\n?? .ralph/session.json\n?? untracked.txt\n"
    );
}

#[test]
fn a_task_that_changed_nothing_makes_no_commit() {
    let fx = populated();
    with_identity(&fx);
    let cp = fx.checkpointer().with_excludes(loop_excludes(&fx));
    let head = fx.git(&["rev-parse", "HEAD"]).trim().to_owned();
    let before = snapshot(&cp);
    let done = cp
        .commit_task(&change(&before, &before, Some(&head)), &no_edit)
        .unwrap()
        .unwrap();
    assert_eq!(done.commit, None);
    assert_eq!(fx.git(&["rev-parse", "main"]).trim(), head);
}

#[test]
fn the_skipped_files_get_the_edit_on_the_branchs_version() {
    let fx = populated();
    with_identity(&fx);
    fx.write("tasks.jsonc", "1.1 pending\n1.2 pending\n");
    let head = fx.commit_all("tasks");
    // The user's tree has another task in progress: not the commit's.
    fx.write("tasks.jsonc", "1.1 pending\n1.2 in_progress\n");
    let cp = fx.checkpointer().with_excludes(loop_excludes(&fx));
    let before = snapshot(&cp);
    fx.write("tasks.jsonc", "1.1 completed\n1.2 in_progress\n");
    fx.write("out.txt", "work\n");
    let after = snapshot(&cp);
    let skip = vec![fx.root.join("tasks.jsonc")];
    let edit = |files: &[(PathBuf, Vec<u8>)]| -> Vec<(PathBuf, Vec<u8>)> {
        files
            .iter()
            .map(|(p, b)| {
                let text = String::from_utf8_lossy(b).replace("1.1 pending", "1.1 completed");
                (p.clone(), text.into_bytes())
            })
            .collect()
    };
    let task = TaskChange {
        skip: &skip,
        ..change(&before, &after, Some(&head))
    };
    let done = cp.commit_task(&task, &edit).unwrap().unwrap();
    assert_eq!(done.files, ["out.txt", "tasks.jsonc"]);
    assert_eq!(
        fx.git(&["show", "main:tasks.jsonc"]),
        "1.1 completed\n1.2 pending\n"
    );
    // The user's in_progress stays theirs, unstaged.
    assert_eq!(fx.status(), " M tasks.jsonc\n");
}

#[test]
fn a_branch_switched_or_reset_under_the_run_is_refused() {
    let fx = populated();
    with_identity(&fx);
    let cp = fx.checkpointer().with_excludes(loop_excludes(&fx));
    let first = fx.git(&["rev-parse", "HEAD"]).trim().to_owned();
    fx.write("a.txt", "second\n");
    let second = fx.commit_all("second");
    let before = snapshot(&cp);
    fx.write("out.txt", "work\n");
    let after = snapshot(&cp);
    // A person's commit since the run last saw the branch: fine, on top.
    let done = cp
        .commit_task(&change(&before, &after, Some(&first)), &no_edit)
        .unwrap()
        .unwrap();
    assert_eq!(done.parent.as_deref(), Some(second.as_str()));
    // Reset back past what the run last saw: refused, nothing written.
    let made = done.commit.unwrap();
    fx.git(&["reset", "-q", "--hard", &first]);
    let refused = cp
        .commit_task(&change(&before, &after, Some(&made)), &no_edit)
        .unwrap()
        .unwrap_err();
    assert!(
        matches!(refused, NotCommitted::Rewritten { .. }),
        "{refused}"
    );
    assert!(refused.to_string().contains("no longer holds"), "{refused}");
    assert_eq!(fx.git(&["rev-parse", "main"]).trim(), first);
    // Another branch checked out: refused.
    fx.git(&["checkout", "-q", "-b", "other"]);
    let refused = cp
        .commit_task(&change(&before, &after, Some(&first)), &no_edit)
        .unwrap()
        .unwrap_err();
    assert_eq!(
        refused.to_string(),
        "the run commits on main but HEAD is now on other"
    );
}

/// A git before 2.40 (Debian 12 has 2.39) cannot merge onto a given base:
/// the commit takes the task's change path by path, and a path the user's
/// own work also changed is left out whole (uncommitted, as it is).
#[test]
fn with_a_git_before_2_40_the_commit_is_made_path_by_path() {
    let fx = populated();
    with_identity(&fx);
    // Says it is 2.39 and refuses `--merge-base` as 2.39 does.
    let old = fx.root.parent().unwrap().join("git-2.39");
    write_script(&old, &common::git_2_39_script(&fx.wrapper));
    fx.write("a.txt", "alpha\nmine\n");
    let cp = Checkpointer::discover_with_program(&fx.root, TIMEOUT, old)
        .unwrap()
        .unwrap()
        .with_excludes(loop_excludes(&fx));
    assert!(cp.merges_onto_a_base().unwrap_err().contains("git 2.39"));
    let before = snapshot(&cp);
    let head = fx.git(&["rev-parse", "HEAD"]).trim().to_owned();
    fx.write("a.txt", "task line\nalpha\nmine\n");
    fx.write("src/parser.rs", "fn parse() {}\n");
    std::fs::remove_file(fx.root.join("b.txt")).unwrap();
    let after = snapshot(&cp);
    let done = cp
        .commit_task(&change(&before, &after, Some(&head)), &no_edit)
        .unwrap()
        .unwrap();
    assert_eq!(done.left_out, ["a.txt"]);
    assert_eq!(done.files, ["b.txt", "src/parser.rs"]);
    assert_eq!(fx.git(&["show", "main:a.txt"]), "alpha\n");
    assert_eq!(fx.read("a.txt").unwrap(), "task line\nalpha\nmine\n");
    assert_eq!(
        fx.status(),
        " M a.txt\n?? .ralph/session.json\n?? untracked.txt\n",
    );
}

/// The tasks file's status edit, as the run makes it: `pending` becomes
/// `completed` in the branch's version.
fn complete_status(files: &[(PathBuf, Vec<u8>)]) -> Vec<(PathBuf, Vec<u8>)> {
    files
        .iter()
        .map(|(p, b)| {
            let text = String::from_utf8_lossy(b).replace("pending", "completed");
            (p.clone(), text.into_bytes())
        })
        .collect()
}

#[test]
fn in_a_clean_tree_the_attempts_snapshot_is_the_commits_tree_and_the_index_follows() {
    let fx = populated();
    with_identity(&fx);
    std::fs::remove_file(fx.root.join("untracked.txt")).unwrap();
    std::fs::remove_dir_all(fx.root.join(".ralph")).unwrap();
    fx.write("tasks.jsonc", "{ \"status\": \"pending\" }\n");
    fx.commit_all("tasks");
    fx.write(".ralph/session.json", "{\"v\":1}\n");
    let cp = fx.checkpointer().with_excludes(loop_excludes(&fx));
    let head = fx.git(&["rev-parse", "HEAD"]).trim().to_owned();
    let head_tree = fx.git(&["rev-parse", "HEAD^{tree}"]).trim().to_owned();
    let before = snapshot(&cp);
    assert_eq!(before, head_tree, "a clean tree");
    // The task's work, and its status written as the run writes it.
    fx.write("src/parser.rs", "fn parse() {}\n");
    fx.write("tasks.jsonc", "{ \"status\": \"completed\" }\n");
    let after = snapshot(&cp);
    let skip = [fx.root.join("tasks.jsonc")];
    for known in [
        Known::default(),
        Known {
            since_tree: Some(&head_tree),
            base_tree: Some(&before),
            after_is_tree: true,
        },
    ] {
        let task = TaskChange {
            skip: &skip,
            known,
            ..change(&before, &after, Some(&head))
        };
        let done = cp.commit_task(&task, &complete_status).unwrap().unwrap();
        let commit = done.commit.clone().expect("a commit");
        assert_eq!(done.tree.as_deref(), Some(after.as_str()));
        assert_eq!(
            fx.git(&["rev-parse", &format!("{commit}^{{tree}}")]).trim(),
            after
        );
        assert_eq!(done.files, ["src/parser.rs", "tasks.jsonc"]);
        assert_eq!(fx.status(), "?? .ralph/session.json\n");
        // Once more from the same start, with the trees given.
        fx.git(&["reset", "-q", "--soft", &head]);
        fx.git(&["reset", "-q", "--", "src/parser.rs", "tasks.jsonc"]);
    }
}

#[test]
fn a_branch_that_cannot_move_leaves_the_users_index_as_it_was() {
    let fx = populated();
    with_identity(&fx);
    let cp = fx.checkpointer().with_excludes(loop_excludes(&fx));
    let head = fx.git(&["rev-parse", "HEAD"]).trim().to_owned();
    let before = snapshot(&cp);
    fx.write("src/parser.rs", "fn parse() {}\n");
    std::fs::remove_file(fx.root.join("b.txt")).unwrap();
    let after = snapshot(&cp);
    let index = fx.git(&["ls-files", "-s"]);
    // Another git holds the branch's lock as the commit moves it.
    let lock = fx.root.join(".git/refs/heads/main.lock");
    std::fs::write(&lock, "").unwrap();
    let failed = cp.commit_task(&change(&before, &after, Some(&head)), &no_edit);
    assert!(failed.is_err(), "{failed:?}");
    std::fs::remove_file(&lock).unwrap();
    assert_eq!(fx.git(&["rev-parse", "main"]).trim(), head);
    assert_eq!(fx.git(&["ls-files", "-s"]), index);
}

/// The skipped files with their bytes.
type Files = [(PathBuf, Vec<u8>)];

/// `find` becomes `with` in every skipped file: one task's status edit.
fn status_edit(
    find: &'static str,
    with: &'static str,
) -> impl Fn(&Files) -> Vec<(PathBuf, Vec<u8>)> {
    move |files| {
        files
            .iter()
            .map(|(p, b)| {
                (
                    p.clone(),
                    String::from_utf8_lossy(b).replace(find, with).into_bytes(),
                )
            })
            .collect()
    }
}

#[test]
fn a_second_commit_in_a_row_knows_the_tasks_file_and_still_refuses_a_stray_edit_there() {
    for stray in [false, true] {
        let fx = populated();
        with_identity(&fx);
        std::fs::remove_file(fx.root.join("untracked.txt")).unwrap();
        std::fs::remove_dir_all(fx.root.join(".ralph")).unwrap();
        fx.write(
            "tasks.jsonc",
            "{ \"1.1\": \"pending\", \"1.2\": \"pending\" }\n",
        );
        fx.commit_all("tasks");
        let cp = fx.checkpointer().with_excludes(loop_excludes(&fx));
        let skip = [fx.root.join("tasks.jsonc")];
        let head = fx.git(&["rev-parse", "HEAD"]).trim().to_owned();
        // Task 1.1, as the run commits it: the snapshot is the commit's tree.
        let before = snapshot(&cp);
        fx.write("one.rs", "1\n");
        fx.write(
            "tasks.jsonc",
            "{ \"1.1\": \"completed\", \"1.2\": \"pending\" }\n",
        );
        let after = snapshot(&cp);
        let first = cp
            .commit_task(
                &TaskChange {
                    skip: &skip,
                    ..change(&before, &after, Some(&head))
                },
                &status_edit("\"1.1\": \"pending\"", "\"1.1\": \"completed\""),
            )
            .unwrap()
            .unwrap();
        assert_eq!(first.tree.as_deref(), Some(after.as_str()));
        let first = first.commit.expect("a commit");
        // Task 1.2 from that tree; the agent also touched another task's
        // status (the stray edit is not the task's to commit).
        fx.write("two.rs", "2\n");
        let tasks = match stray {
            false => "{ \"1.1\": \"completed\", \"1.2\": \"completed\" }\n",
            true => "{ \"1.1\": \"pending\", \"1.2\": \"completed\" }\n",
        };
        fx.write("tasks.jsonc", tasks);
        let next = snapshot(&cp);
        let second = cp
            .commit_task(
                &TaskChange {
                    skip: &skip,
                    ..change(&after, &next, Some(&first))
                },
                &status_edit("\"1.2\": \"pending\"", "\"1.2\": \"completed\""),
            )
            .unwrap()
            .unwrap();
        let commit = second.commit.expect("a commit");
        assert_eq!(
            fx.git(&["show", &format!("{commit}:tasks.jsonc")]),
            "{ \"1.1\": \"completed\", \"1.2\": \"completed\" }\n",
            "stray: {stray}"
        );
        assert_eq!(
            second.tree.as_deref() == Some(next.as_str()),
            !stray,
            "stray: {stray}"
        );
        assert_eq!(fx.git(&["show", &format!("{commit}:two.rs")]), "2\n");
    }
}

/// `populated()` with nothing of the user's uncommitted: a clean tree.
fn clean() -> Fixture {
    let fx = populated();
    with_identity(&fx);
    std::fs::remove_file(fx.root.join("untracked.txt")).unwrap();
    std::fs::remove_dir_all(fx.root.join(".ralph")).unwrap();
    fx
}

#[test]
fn in_a_clean_tree_the_snapshots_own_index_becomes_the_users_cached_tree_and_all() {
    let fx = clean();
    let cp = fx.checkpointer().with_excludes(loop_excludes(&fx));
    let head = fx.git(&["rev-parse", "HEAD"]).trim().to_owned();
    let before = snapshot(&cp);
    fx.write("src/parser.rs", "fn parse() {}\n");
    std::fs::remove_file(fx.root.join("b.txt")).unwrap();
    let after = cp.snapshot_tree_for_next(&[]).unwrap();
    let done = cp
        .commit_task(&change(&before, &after, Some(&head)), &no_edit)
        .unwrap()
        .unwrap();
    assert_eq!(done.tree.as_deref(), Some(after.as_str()));
    assert_eq!(done.index_not_updated, None);
    // Its cached tree: the branch's tree, known to the next `git commit` or
    // `git status` without hashing a folder (git's `update-index` would
    // have dropped it for the folders the task changed).
    let index = std::fs::read(fx.root.join(".git/index")).unwrap();
    assert_eq!(cached_root_tree(&index).as_deref(), Some(after.as_str()));
    assert_eq!(fx.status(), "");
    assert_eq!(fx.git(&["diff-files", "--name-only"]), "");
    assert_eq!(
        fx.git(&["ls-files"]),
        ".gitignore\na.txt\ndir/c.txt\nscript.sh\nsrc/parser.rs\n"
    );
}

#[test]
fn an_index_the_user_changed_after_the_snapshot_is_followed_entry_by_entry_and_theirs_kept() {
    let fx = clean();
    let cp = fx.checkpointer().with_excludes(loop_excludes(&fx));
    let head = fx.git(&["rev-parse", "HEAD"]).trim().to_owned();
    let before = snapshot(&cp);
    fx.write("src/parser.rs", "fn parse() {}\n");
    let after = cp.snapshot_tree_for_next(&[]).unwrap();
    // The user stages a file of theirs as the task ends.
    fx.write("mine.txt", "mine\n");
    fx.git(&["add", "mine.txt"]);
    let done = cp
        .commit_task(&change(&before, &after, Some(&head)), &no_edit)
        .unwrap()
        .unwrap();
    assert_eq!(done.files, ["src/parser.rs"]);
    assert_eq!(fx.status(), "A  mine.txt\n");
    let commit = done.commit.expect("a commit");
    assert_eq!(show(&fx, &commit), "A\tsrc/parser.rs\n");
}

#[test]
fn a_branch_that_cannot_move_puts_back_the_index_the_snapshot_replaced() {
    let fx = clean();
    let cp = fx.checkpointer().with_excludes(loop_excludes(&fx));
    let head = fx.git(&["rev-parse", "HEAD"]).trim().to_owned();
    let before = snapshot(&cp);
    fx.write("src/parser.rs", "fn parse() {}\n");
    let after = cp.snapshot_tree_for_next(&[]).unwrap();
    let index = std::fs::read(fx.root.join(".git/index")).unwrap();
    let lock = fx.root.join(".git/refs/heads/main.lock");
    std::fs::write(&lock, "").unwrap();
    let failed = cp.commit_task(&change(&before, &after, Some(&head)), &no_edit);
    assert!(failed.is_err(), "{failed:?}");
    std::fs::remove_file(&lock).unwrap();
    assert_eq!(fx.git(&["rev-parse", "main"]).trim(), head);
    assert!(
        std::fs::read(fx.root.join(".git/index")).unwrap() == index,
        "the same bytes"
    );
    assert!(!fx.root.join(".git/index.lock").exists());
}

#[test]
fn a_version_staged_that_the_work_tree_no_longer_holds_stays_staged() {
    let fx = clean();
    // Staged, then the file put back as the branch has it: the tree is
    // clean, the index is not.
    fx.write("a.txt", "staged\n");
    fx.git(&["add", "a.txt"]);
    fx.write("a.txt", "alpha\n");
    let cp = fx.checkpointer().with_excludes(loop_excludes(&fx));
    let head = fx.git(&["rev-parse", "HEAD"]).trim().to_owned();
    let before = snapshot(&cp);
    assert_eq!(before, fx.git(&["rev-parse", "HEAD^{tree}"]).trim());
    fx.write("src/parser.rs", "fn parse() {}\n");
    let after = cp.snapshot_tree_for_next(&[]).unwrap();
    let done = cp
        .commit_task(&change(&before, &after, Some(&head)), &no_edit)
        .unwrap()
        .unwrap();
    assert_eq!(done.files, ["src/parser.rs"]);
    assert_eq!(fx.git(&["diff", "--cached", "--name-only"]), "a.txt\n");
    assert_eq!(fx.git(&["show", ":a.txt"]), "staged\n");
}

/// The root tree an index's cache-tree extension (`TREE`) holds, if valid:
/// after `\0` (the root's empty path), `<entries> <subtrees>\n`, then the id.
fn cached_root_tree(index: &[u8]) -> Option<String> {
    let at = index.windows(4).position(|w| w == b"TREE")? + 8;
    let rest = index.get(at..)?.strip_prefix(b"\0")?;
    let nl = rest.iter().position(|&b| b == b'\n')?;
    let counts = std::str::from_utf8(&rest[..nl]).ok()?;
    if counts.starts_with('-') {
        return None;
    }
    let id = rest.get(nl + 1..nl + 21)?;
    Some(id.iter().map(|b| format!("{b:02x}")).collect())
}

#[test]
fn commits_in_a_row_name_every_kind_of_change_and_leave_the_tree_clean() {
    use std::os::unix::fs::PermissionsExt;
    let fx = clean();
    let cp = fx.checkpointer().with_excludes(loop_excludes(&fx));
    let mut since = fx.git(&["rev-parse", "HEAD"]).trim().to_owned();
    let mut base = snapshot(&cp);
    // Each task's work, and the files its commit must name.
    let tasks: [(&dyn Fn(), &[&str]); 3] = [
        (
            &|| {
                fx.write("src/deep/new.rs", "new\n");
                fx.write("a.txt", "alpha, changed\n");
            },
            &["a.txt", "src/deep/new.rs"],
        ),
        (
            &|| {
                std::fs::remove_file(fx.root.join("b.txt")).unwrap();
                let script = fx.root.join("script.sh");
                std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
                std::os::unix::fs::symlink("a.txt", fx.root.join("link")).unwrap();
            },
            &["b.txt", "link", "script.sh"],
        ),
        (
            &|| std::fs::remove_dir_all(fx.root.join("src")).unwrap(),
            &["src/deep/new.rs"],
        ),
    ];
    for (work, files) in tasks {
        work();
        let after = cp.snapshot_tree_for_next(&[]).unwrap();
        let done = cp
            .commit_task(&change(&base, &after, Some(&since)), &no_edit)
            .unwrap()
            .unwrap();
        assert_eq!(done.files, files);
        let commit = done.commit.expect("a commit");
        let named = fx.git(&["show", "--format=", "--name-only", &commit]);
        assert_eq!(named.lines().collect::<Vec<_>>(), files);
        assert_eq!(fx.status(), "", "after {files:?}");
        (since, base) = (commit, after);
    }
}

/// The task of the tests below: `src/parser.rs` written, the snapshot
/// kept for the next checkpoint, then committed (`meanwhile` runs between
/// the two). HEAD before it, and what the commit did.
fn commit_the_parser(
    fx: &Fixture,
    cp: &Checkpointer,
    meanwhile: impl FnOnce(),
) -> (String, spectr::checkpoint::Committed) {
    let head = fx.git(&["rev-parse", "HEAD"]).trim().to_owned();
    let before = snapshot(cp);
    fx.write("src/parser.rs", "fn parse() {}\n");
    let after = cp.snapshot_tree_for_next(&[]).unwrap();
    meanwhile();
    let done = cp
        .commit_task(&change(&before, &after, Some(&head)), &no_edit)
        .unwrap()
        .unwrap();
    (head, done)
}

/// The checkpoint after a task's commit (its snapshot kept from the
/// commit) records HEAD, branches and tags as the commit left them:
/// reverting the next attempt puts the branch back on the task's commit,
/// removes the agent's tag and brings back the branch it deleted.
#[test]
fn the_next_checkpoint_takes_the_refs_the_commit_left() {
    let fx = clean();
    let cp = fx.checkpointer().with_excludes(loop_excludes(&fx));
    fx.git(&["branch", "topic"]);
    let (head, done) = commit_the_parser(&fx, &cp, || {});
    let commit = done.commit.unwrap();
    let next = cp.create(&cp.ref_name("c", "1.2", 1)).unwrap();
    assert_eq!(next.head.as_deref(), Some(commit.as_str()));
    assert_eq!(next.branch.as_deref(), Some("refs/heads/main"));

    // The next attempt commits, tags, and drops the user's branch.
    fx.write("src/parser.rs", "fn parse() { todo!() }\n");
    fx.git(&["commit", "-qam", "agent"]);
    fx.git(&["tag", "agents-tag"]);
    fx.git(&["branch", "-q", "-D", "topic"]);
    cp.revert(&next, &cp.failed_ref_name("c", "1.2", 1))
        .unwrap();
    assert_eq!(fx.git(&["rev-parse", "main"]).trim(), commit);
    assert_eq!(fx.git(&["tag", "--list"]), "");
    assert_eq!(fx.git(&["rev-parse", "topic"]).trim(), head);
    assert_eq!(fx.status(), "");
}

/// A stash pushed between a task's commit and the next checkpoint is in
/// that checkpoint: a revert keeps the user's stash.
#[test]
fn a_stash_pushed_after_the_commit_is_in_the_next_checkpoint() {
    let fx = clean();
    let cp = fx.checkpointer().with_excludes(loop_excludes(&fx));
    commit_the_parser(&fx, &cp, || {});
    fx.write("a.txt", "mine, stashed\n");
    fx.git(&["stash", "push", "-q"]);
    let stash = fx.git(&["rev-parse", "refs/stash"]);
    let next = cp.create(&cp.ref_name("c", "1.2", 1)).unwrap();
    fx.git(&["stash", "drop", "-q"]);
    cp.revert(&next, &cp.failed_ref_name("c", "1.2", 1))
        .unwrap();
    assert_eq!(fx.git(&["rev-parse", "refs/stash"]), stash);
}

/// A spectr killed -9 while it wrote the user's index for a task's commit
/// leaves git's `index.lock`, named by its marker: the next commit (the
/// resume's) recognises the lock as a dead spectr's, removes it and goes
/// on, instead of failing on it at every resume.
#[test]
fn an_index_lock_left_by_a_killed_spectr_does_not_stop_the_next_commit() {
    let fx = clean();
    let cp = fx.checkpointer().with_excludes(loop_excludes(&fx));
    let lock = fx.root.join(".git/index.lock");
    let (_, done) = commit_the_parser(&fx, &cp, || {
        // As a killed spectr leaves it: the lock, and our marker naming a
        // process that is gone.
        std::fs::write(&lock, "half written").unwrap();
        fx.name_index_lock_a_killed_spectrs();
    });
    assert!(done.commit.is_some());
    assert_eq!(done.index_not_updated, None, "{done:?}");
    assert!(!lock.exists());
    assert_eq!(fx.status(), "");

    // A lock of a live git's (no marker of ours) is left alone.
    let since = done.commit.clone().unwrap();
    let before = done.tree.clone().unwrap();
    fx.write("src/parser.rs", "fn parse() { 2 }\n");
    let after = cp.snapshot_tree_for_next(&[]).unwrap();
    std::fs::write(&lock, "a live git's").unwrap();
    let second = cp
        .commit_task(&change(&before, &after, Some(&since)), &no_edit)
        .unwrap()
        .unwrap();
    assert!(second.index_not_updated.is_some(), "{second:?}");
    assert_eq!(std::fs::read_to_string(&lock).unwrap(), "a live git's");
}
