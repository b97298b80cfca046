//! Checkpoint / revert against real git repositories in temp dirs.
//!
//! Every git here (the tests' own and the Checkpointer's, through a wrapper
//! script) runs without the developer's global or system config, and with no
//! identity configured for the Checkpointer: it must bring its own.

use spectr::checkpoint::{CheckpointError, Checkpointer, CleanScope, escape_component};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod common;
use common::checkpoint::*;

#[test]
fn revert_restores_the_exact_tree() {
    let fx = populated();
    let cpr = fx.checkpointer().with_excludes(loop_excludes(&fx));
    let status_before = fx.status();
    let cp = cpr.create(&cpr.ref_name("chg", "1.1", 1)).unwrap();

    // The agent's attempt.
    fx.write("a.txt", "alpha, broken\n");
    std::fs::remove_file(fx.root.join("b.txt")).unwrap();
    std::fs::remove_file(fx.root.join("dir/c.txt")).unwrap();
    std::fs::set_permissions(
        fx.root.join("script.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    fx.write("untracked.txt", "changed by the agent\n");
    fx.write("new.txt", "new\n");
    fx.write("newdir/deep/y.txt", "deep new\n");
    fx.write("keep.log", "ignored, changed by the agent\n");
    fx.write("new.log", "ignored, new\n");
    fx.write(".ralph/session.json", "{\"v\":2}\n");

    // The session file round-trip the loop relies on after a crash.
    let json = serde_json::to_string(&cp).unwrap();
    let cp: spectr::checkpoint::Checkpoint = serde_json::from_str(&json).unwrap();
    let failed = cpr.failed_ref_name("chg", "1.1", 1);
    let rev = cpr.revert(&cp, &failed).unwrap();

    assert_eq!(fx.read("a.txt").as_deref(), Some("alpha\n"));
    assert_eq!(fx.read("b.txt").as_deref(), Some("beta\n"));
    assert_eq!(fx.read("dir/c.txt").as_deref(), Some("gamma\n"));
    assert!(!is_executable(&fx.root.join("script.sh")));
    assert_eq!(
        fx.read("untracked.txt").as_deref(),
        Some("mine, not yet added\n")
    );
    assert!(!fx.exists("new.txt"));
    assert!(
        !fx.exists("newdir"),
        "empty directories left behind are removed"
    );
    // Ignored files are neither snapshotted nor touched.
    assert_eq!(
        fx.read("keep.log").as_deref(),
        Some("ignored, changed by the agent\n")
    );
    assert_eq!(fx.read("new.log").as_deref(), Some("ignored, new\n"));
    // The loop's own files are never reverted.
    assert_eq!(
        fx.read(".ralph/session.json").as_deref(),
        Some("{\"v\":2}\n")
    );

    assert_eq!(fx.status(), status_before);
    assert_eq!(rev.failed_ref, failed);
    assert_eq!(rev.files_restored, 5, "{rev:?}");
    assert_eq!(rev.files_removed, 2, "{rev:?}");
    assert!(!rev.head_restored);
}

#[test]
fn failed_attempt_is_recoverable_from_its_ref() {
    let fx = populated();
    let cpr = fx.checkpointer().with_excludes(loop_excludes(&fx));
    let cp = cpr.create(&cpr.ref_name("chg", "2", 1)).unwrap();
    fx.write("a.txt", "the agent's work\n");
    fx.write("newdir/n.txt", "new work\n");
    std::fs::remove_file(fx.root.join("b.txt")).unwrap();
    let failed = cpr.failed_ref_name("chg", "2", 1);
    let rev = cpr.revert(&cp, &failed).unwrap();

    assert_eq!(
        fx.git(&["show", &format!("{failed}:a.txt")]),
        "the agent's work\n"
    );
    assert_eq!(
        fx.git(&["show", &format!("{failed}:newdir/n.txt")]),
        "new work\n"
    );
    assert!(!fx.git_ok(&["cat-file", "-e", &format!("{failed}:b.txt")]));
    assert_eq!(fx.git(&["rev-parse", &failed]).trim(), rev.failed_commit);
    // The checkpoint holds the pre-attempt tree, untracked files included,
    // and neither ignored files nor the loop's files.
    assert_eq!(
        fx.git(&["show", &format!("{}:a.txt", cp.refname)]),
        "alpha\n"
    );
    assert_eq!(
        fx.git(&["show", &format!("{}:untracked.txt", cp.refname)]),
        "mine, not yet added\n"
    );
    let files = fx.git(&["ls-tree", "-r", "--name-only", &cp.refname]);
    assert!(!files.contains("keep.log"), "{files}");
    assert!(!files.contains(".ralph"), "{files}");
    let files = fx.git(&["ls-tree", "-r", "--name-only", &failed]);
    assert!(!files.contains(".ralph"), "{files}");
}

#[test]
fn user_head_branch_index_and_stash_are_untouched() {
    let fx = populated();
    fx.write("a.txt", "stashed change\n");
    fx.git(&["stash", "push", "-q"]);
    let stash = fx.git(&["rev-parse", "refs/stash"]);
    fx.write("b.txt", "staged change\n");
    fx.git(&["add", "b.txt"]);
    fx.write("b.txt", "staged change, then more unstaged\n");
    fx.write("staged-new.txt", "new and staged\n");
    fx.git(&["add", "staged-new.txt"]);

    let head = fx.git(&["rev-parse", "HEAD"]);
    let index = fx.index_bytes();
    let cached = fx.git(&["diff", "--cached"]);
    let status = fx.status();

    let cpr = fx.checkpointer().with_excludes(loop_excludes(&fx));
    let cp = cpr.create(&cpr.ref_name("chg", "3", 1)).unwrap();
    assert_eq!(fx.index_bytes(), index, "create must not touch the index");
    assert_eq!(fx.git(&["rev-parse", "HEAD"]), head);
    assert_eq!(cp.branch.as_deref(), Some("refs/heads/main"));
    assert_eq!(cp.head.as_deref(), Some(head.trim()));
    assert!(cp.index.is_some());

    // The agent stages everything and drops the user's staged file.
    fx.write("a.txt", "agent\n");
    fx.git(&["rm", "-q", "--cached", "staged-new.txt"]);
    fx.git(&["add", "-A"]);
    cpr.revert(&cp, &cpr.failed_ref_name("chg", "3", 1))
        .unwrap();

    assert_eq!(fx.git(&["rev-parse", "HEAD"]), head);
    assert_eq!(fx.git(&["symbolic-ref", "HEAD"]).trim(), "refs/heads/main");
    assert_eq!(fx.index_bytes(), index, "the user's index is put back");
    assert_eq!(fx.git(&["diff", "--cached"]), cached);
    assert_eq!(fx.status(), status);
    assert_eq!(fx.git(&["rev-parse", "refs/stash"]), stash);
    assert_eq!(fx.git(&["stash", "list"]).lines().count(), 1);
    assert_eq!(
        fx.read("b.txt").as_deref(),
        Some("staged change, then more unstaged\n")
    );
}

/// The copy of the user's index is kept reachable by a ref naming a
/// one-entry tree that holds it, not the blob itself: git checks a blob's
/// whole hash on every ref update naming it (a megabyte at 10,000 files, a
/// few milliseconds each checkpoint), a tree's it only parses. A prune of
/// everything unreachable keeps it, and a later run (nothing cached)
/// reverts to it.
#[test]
fn the_index_copy_is_kept_by_a_tree_and_survives_a_prune() {
    let fx = populated();
    fx.write("b.txt", "staged change\n");
    fx.git(&["add", "b.txt"]);
    let index = fx.index_bytes();
    let cpr = fx.checkpointer().with_excludes(loop_excludes(&fx));
    let cp = cpr.create(&cpr.ref_name("chg", "1", 1)).unwrap();
    let blob = cp.index.clone().unwrap();
    let keeper = Checkpointer::index_ref_name(&cp.refname);
    assert_eq!(fx.git(&["cat-file", "-t", &keeper]).trim(), "tree");
    assert_eq!(
        fx.git(&["rev-parse", &format!("{keeper}:index")]).trim(),
        blob
    );
    // The same index at the next checkpoint: the same tree.
    let cp2 = cpr.create(&cpr.ref_name("chg", "2", 1)).unwrap();
    assert_eq!(cp2.index.as_deref(), Some(blob.as_str()));
    assert_eq!(
        fx.git(&["rev-parse", &Checkpointer::index_ref_name(&cp2.refname)]),
        fx.git(&["rev-parse", &keeper])
    );

    fx.git(&["add", "-A"]);
    fx.git(&["reflog", "expire", "--expire=now", "--all"]);
    fx.git(&["prune", "--expire=now"]);
    let fresh = fx.checkpointer().with_excludes(loop_excludes(&fx));
    fresh
        .revert(&cp, &fresh.failed_ref_name("chg", "1", 1))
        .unwrap();
    assert_eq!(fx.index_bytes(), index, "the user's index is put back");
}

#[test]
fn agent_commits_are_undone_and_stay_reachable() {
    let fx = populated();
    let cpr = fx.checkpointer().with_excludes(loop_excludes(&fx));
    let cp = cpr.create(&cpr.ref_name("chg", "4", 1)).unwrap();
    let head = cp.head.clone().unwrap();

    fx.write("a.txt", "committed by the agent\n");
    fx.write("feature.txt", "feature\n");
    let agent_commit = fx.commit_all("agent work");
    fx.write("a.txt", "and more, uncommitted\n");

    let failed = cpr.failed_ref_name("chg", "4", 1);
    let rev = cpr.revert(&cp, &failed).unwrap();

    assert!(rev.head_restored);
    assert_eq!(fx.git(&["rev-parse", "refs/heads/main"]).trim(), head);
    assert_eq!(fx.git(&["symbolic-ref", "HEAD"]).trim(), "refs/heads/main");
    assert!(fx.git_ok(&["merge-base", "--is-ancestor", &agent_commit, &failed]));
    assert_eq!(
        fx.git(&["show", &format!("{failed}:a.txt")]),
        "and more, uncommitted\n"
    );
    assert_eq!(fx.read("a.txt").as_deref(), Some("alpha\n"));
    assert!(!fx.exists("feature.txt"));
    assert_eq!(fx.git(&["diff", "HEAD", "--stat"]), "");
}

#[test]
fn a_branch_moved_then_left_stays_reachable() {
    let fx = populated();
    let cpr = fx.checkpointer().with_excludes(loop_excludes(&fx));
    let cp = cpr.create(&cpr.ref_name("chg", "5", 1)).unwrap();
    let head = cp.head.clone().unwrap();

    fx.write("a.txt", "on main\n");
    let on_main = fx.commit_all("agent on main");
    fx.git(&["checkout", "-q", "--detach", &head]);
    fx.git(&["checkout", "-q", "-b", "agent-branch"]);
    fx.write("z.txt", "z\n");
    let on_branch = fx.commit_all("agent on its branch");

    let failed = cpr.failed_ref_name("chg", "5", 1);
    let rev = cpr.revert(&cp, &failed).unwrap();

    assert!(rev.head_restored);
    assert_eq!(fx.git(&["symbolic-ref", "HEAD"]).trim(), "refs/heads/main");
    assert_eq!(fx.git(&["rev-parse", "main"]).trim(), head);
    for c in [&on_main, &on_branch] {
        assert!(fx.git_ok(&["merge-base", "--is-ancestor", c, &failed]));
    }
    assert!(!fx.exists("z.txt"));
    assert_eq!(fx.read("a.txt").as_deref(), Some("alpha\n"));
}

#[test]
fn detached_head_is_restored_detached() {
    let fx = populated();
    let first = fx.git(&["rev-parse", "HEAD"]).trim().to_owned();
    fx.git(&["checkout", "-q", "--detach"]);
    let cpr = fx.checkpointer().with_excludes(loop_excludes(&fx));
    let cp = cpr.create(&cpr.ref_name("chg", "6", 1)).unwrap();
    assert_eq!(cp.branch, None);

    fx.write("a.txt", "detached work\n");
    let agent_commit = fx.commit_all("agent, detached");
    let failed = cpr.failed_ref_name("chg", "6", 1);
    cpr.revert(&cp, &failed).unwrap();

    assert!(
        !fx.git_ok(&["symbolic-ref", "-q", "HEAD"]),
        "still detached"
    );
    assert_eq!(fx.git(&["rev-parse", "HEAD"]).trim(), first);
    assert_eq!(fx.git(&["rev-parse", "main"]).trim(), first);
    assert!(fx.git_ok(&["merge-base", "--is-ancestor", &agent_commit, &failed]));
}

#[test]
fn repo_with_no_commits() {
    let fx = fixture();
    fx.write("a.txt", "first file\n");
    fx.write("sub/b.txt", "second\n");
    let cpr = fx.checkpointer();
    let cp = cpr.create(&cpr.ref_name("chg", "7", 1)).unwrap();
    assert_eq!(cp.head, None);
    assert_eq!(cp.branch.as_deref(), Some("refs/heads/main"));
    assert_eq!(cp.index, None, "no index file yet");

    fx.write("a.txt", "changed\n");
    fx.write("c.txt", "added\n");
    let agent_commit = fx.commit_all("the agent's first commit");
    std::fs::remove_file(fx.root.join("sub/b.txt")).unwrap();

    let failed = cpr.failed_ref_name("chg", "7", 1);
    let rev = cpr.revert(&cp, &failed).unwrap();

    assert!(rev.head_restored);
    assert!(
        !fx.git_ok(&["rev-parse", "-q", "--verify", "HEAD"]),
        "unborn again"
    );
    assert_eq!(fx.git(&["symbolic-ref", "HEAD"]).trim(), "refs/heads/main");
    assert!(fx.git_ok(&["merge-base", "--is-ancestor", &agent_commit, &failed]));
    assert_eq!(fx.read("a.txt").as_deref(), Some("first file\n"));
    assert_eq!(fx.read("sub/b.txt").as_deref(), Some("second\n"));
    assert!(!fx.exists("c.txt"));
    assert_eq!(fx.index_bytes(), None);
    assert_eq!(fx.status(), "?? a.txt\n?? sub/b.txt\n");
}

#[test]
fn an_empty_repo_can_be_checkpointed() {
    let fx = fixture();
    let cpr = fx.checkpointer();
    let cp = cpr.create(&cpr.ref_name("chg", "8", 1)).unwrap();
    fx.write("x/y.txt", "new\n");
    let rev = cpr
        .revert(&cp, &cpr.failed_ref_name("chg", "8", 1))
        .unwrap();
    assert_eq!(rev.files_removed, 1);
    assert!(!fx.exists("x"));
    assert_eq!(fx.status(), "");
}

#[test]
fn outside_a_git_repository_there_is_no_checkpointer() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let plain = base.join("plain");
    std::fs::create_dir(&plain).unwrap();
    // Stop git's search at our temp dir, whatever encloses it.
    let wrapper = base.join("git-ceiling");
    write_script(
        &wrapper,
        &format!(
            "GIT_CEILING_DIRECTORIES='{}' GIT_CONFIG_GLOBAL=/dev/null exec git \"$@\"",
            base.display()
        ),
    );
    let found = Checkpointer::discover_with_program(&plain, TIMEOUT, wrapper).unwrap();
    assert!(found.is_none());
}

#[test]
fn inside_the_git_dir_there_is_no_checkpointer() {
    let fx = fixture();
    let found =
        Checkpointer::discover_with_program(&fx.root.join(".git"), TIMEOUT, fx.wrapper.clone())
            .unwrap();
    assert!(found.is_none());
}

#[test]
fn discover_from_a_subdirectory_finds_the_root() {
    let fx = populated();
    let cpr =
        Checkpointer::discover_with_program(&fx.root.join("dir"), TIMEOUT, fx.wrapper.clone())
            .unwrap()
            .unwrap();
    assert_eq!(cpr.repo_root(), fx.root);
    assert_eq!(cpr.git_dir(), fx.root.join(".git"));
}

/// The fake git's background `sleep` must be gone (dead or a zombie) once the
/// timeout has been reported: the whole process group is killed.
fn wait_until_dead(pid: i32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => return true,
            Ok(stat) => {
                let state = stat.rsplit(')').next().unwrap_or("").trim_start();
                if state.starts_with('Z') || state.starts_with('X') {
                    return true;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn slow_git(dir: &Path) -> (PathBuf, PathBuf) {
    let pidfile = dir.join("sleep.pid");
    let script = dir.join("slow-git");
    write_script(
        &script,
        &format!("sleep 60 &\necho $! > '{}'\nwait", pidfile.display()),
    );
    (script, pidfile)
}

#[test]
fn a_git_command_that_hangs_times_out_and_is_killed() {
    let fx = populated();
    let (slow, pidfile) = slow_git(fx.root.parent().unwrap());
    let cpr = fx
        .checkpointer()
        .with_git_program(slow)
        .with_timeout(Duration::from_secs(1));
    let err = cpr.create(&cpr.ref_name("chg", "9", 1)).unwrap_err();
    match &err {
        CheckpointError::Timeout { command, after } => {
            assert!(command.starts_with("git "), "{command}");
            assert_eq!(*after, Duration::from_secs(1));
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert!(err.is_timeout());
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(wait_until_dead(pid), "the slow git's child {pid} survived");
}

#[test]
fn discover_times_out_too() {
    let tmp = tempfile::tempdir().unwrap();
    let (slow, _) = slow_git(tmp.path());
    let err =
        Checkpointer::discover_with_program(tmp.path(), Duration::from_secs(1), slow).unwrap_err();
    assert!(err.is_timeout(), "{err:?}");
}

#[test]
fn a_missing_git_is_an_error_not_a_panic() {
    let fx = fixture();
    let err = Checkpointer::discover_with_program(&fx.root, TIMEOUT, fx.root.join("no-such-git"))
        .unwrap_err();
    assert!(matches!(err, CheckpointError::Spawn { .. }), "{err:?}");
}

#[test]
fn paths_with_spaces_unicode_and_glob_characters() {
    let fx = fixture();
    let names = [
        "dir with space/file name.txt",
        "ünïcödé/日本語.txt",
        "glob*[x]?.txt",
        "-leading-dash.txt",
        "tab\tand \"quotes\".txt",
    ];
    for n in names {
        fx.write(n, &format!("original {n}\n"));
    }
    fx.commit_all("init");
    fx.write("loop files [x]/transcript.log", "loop\n");
    let cpr = fx
        .checkpointer()
        .with_excludes(vec![PathBuf::from("loop files [x]")]);
    let cp = cpr.create(&cpr.ref_name("chg", "10", 1)).unwrap();

    fx.write(names[0], "changed\n");
    std::fs::remove_file(fx.root.join(names[1])).unwrap();
    fx.write(names[2], "changed\n");
    fx.write("new dir é/new file ñ.txt", "added\n");
    fx.write("loop files [x]/transcript.log", "loop, later\n");

    let rev = cpr
        .revert(&cp, &cpr.failed_ref_name("chg", "10", 1))
        .unwrap();
    for n in names {
        assert_eq!(fx.read(n), Some(format!("original {n}\n")), "{n}");
    }
    assert!(!fx.exists("new dir é"));
    assert_eq!(
        fx.read("loop files [x]/transcript.log").as_deref(),
        Some("loop, later\n")
    );
    assert_eq!((rev.files_restored, rev.files_removed), (3, 1));
}

#[test]
fn type_changes_and_symlinks_are_restored() {
    let fx = fixture();
    fx.write("was-file", "a file\n");
    fx.write("was-dir/inner.txt", "inner\n");
    std::os::unix::fs::symlink("was-file", fx.root.join("link")).unwrap();
    fx.commit_all("init");
    let cpr = fx.checkpointer();
    let cp = cpr.create(&cpr.ref_name("chg", "11", 1)).unwrap();

    std::fs::remove_file(fx.root.join("was-file")).unwrap();
    fx.write("was-file/now-inside.txt", "dir now\n");
    std::fs::remove_dir_all(fx.root.join("was-dir")).unwrap();
    fx.write("was-dir", "file now\n");
    std::fs::remove_file(fx.root.join("link")).unwrap();
    fx.write("link", "a plain file now\n");

    cpr.revert(&cp, &cpr.failed_ref_name("chg", "11", 1))
        .unwrap();
    assert_eq!(fx.read("was-file").as_deref(), Some("a file\n"));
    assert_eq!(fx.read("was-dir/inner.txt").as_deref(), Some("inner\n"));
    let link = fx.root.join("link");
    assert!(link.symlink_metadata().unwrap().file_type().is_symlink());
    assert_eq!(std::fs::read_link(link).unwrap(), PathBuf::from("was-file"));
    assert_eq!(fx.status(), "");
}

#[test]
fn a_file_the_agent_got_ignored_is_still_restored_and_kept() {
    let fx = populated();
    let cpr = fx.checkpointer().with_excludes(loop_excludes(&fx));
    let cp = cpr.create(&cpr.ref_name("chg", "12", 1)).unwrap();
    fx.write("untracked.txt", "agent edit\n");
    fx.write(".gitignore", "*.log\nuntracked.txt\n");
    let failed = cpr.failed_ref_name("chg", "12", 1);
    cpr.revert(&cp, &failed).unwrap();
    assert_eq!(
        fx.git(&["show", &format!("{failed}:untracked.txt")]),
        "agent edit\n"
    );
    assert_eq!(
        fx.read("untracked.txt").as_deref(),
        Some("mine, not yet added\n")
    );
    assert_eq!(fx.read(".gitignore").as_deref(), Some("*.log\n"));
}

#[test]
fn excluded_paths_given_absolute_through_a_symlink_and_tracked() {
    let fx = populated();
    // The user committed a loop file before; the loop still owns it.
    fx.write(".ralph/session.json", "{\"v\":1}\n");
    fx.git(&["add", "-f", ".ralph/session.json"]);
    fx.git(&["commit", "-q", "-m", "oops"]);
    let alias = fx.root.parent().unwrap().join("alias");
    std::os::unix::fs::symlink(&fx.root, &alias).unwrap();
    let cpr = fx.checkpointer().with_excludes(vec![
        alias.join(".ralph/session.json"),
        alias.join(".ralph/not-yet"),
    ]);
    assert_eq!(
        cpr.excludes(),
        [
            PathBuf::from(".ralph/not-yet"),
            PathBuf::from(".ralph/session.json")
        ]
    );
    let cp = cpr.create(&cpr.ref_name("chg", "13", 1)).unwrap();
    let files = fx.git(&["ls-tree", "-r", "--name-only", &cp.refname]);
    assert!(!files.contains("session.json"), "{files}");

    fx.write(".ralph/session.json", "{\"v\":2}\n");
    fx.write(".ralph/not-yet/t.log", "transcript\n");
    fx.write("a.txt", "agent\n");
    cpr.revert(&cp, &cpr.failed_ref_name("chg", "13", 1))
        .unwrap();
    assert_eq!(
        fx.read(".ralph/session.json").as_deref(),
        Some("{\"v\":2}\n")
    );
    assert_eq!(
        fx.read(".ralph/not-yet/t.log").as_deref(),
        Some("transcript\n")
    );
    assert_eq!(fx.read("a.txt").as_deref(), Some("alpha\n"));
}

#[test]
fn reverting_twice_into_one_failed_ref_keeps_both_attempts() {
    let fx = populated();
    let cpr = fx.checkpointer().with_excludes(loop_excludes(&fx));
    let cp = cpr.create(&cpr.ref_name("chg", "14", 1)).unwrap();
    let failed = cpr.failed_ref_name("chg", "14", 1);
    fx.write("a.txt", "first try\n");
    let first = cpr.revert(&cp, &failed).unwrap();
    fx.write("a.txt", "second try\n");
    let second = cpr.revert(&cp, &failed).unwrap();
    assert!(fx.git_ok(&[
        "merge-base",
        "--is-ancestor",
        &first.failed_commit,
        &second.failed_commit
    ]));
    assert_eq!(
        fx.git(&["show", &format!("{}:a.txt", first.failed_commit)]),
        "first try\n"
    );
    assert_eq!(
        fx.git(&["show", &format!("{failed}:a.txt")]),
        "second try\n"
    );
    assert!(matches!(
        cpr.revert(&cp, &cp.refname),
        Err(CheckpointError::InvalidRef { .. })
    ));
}

#[test]
fn drop_list_and_clean_refs() {
    let fx = populated();
    let cpr = fx.checkpointer().with_excludes(loop_excludes(&fx));
    let cp1 = cpr.create(&cpr.ref_name("chg", "1", 1)).unwrap();
    let cp2 = cpr.create(&cpr.ref_name("chg", "2", 1)).unwrap();
    let other = cpr.create(&cpr.ref_name("other", "1", 1)).unwrap();
    fx.write("a.txt", "x\n");
    cpr.revert(&cp2, &cpr.failed_ref_name("chg", "2", 1))
        .unwrap();

    cpr.drop(&cp1).unwrap();
    assert_eq!(
        cpr.list_refs("chg").unwrap(),
        [
            "refs/spectr/ralph/@main/chg/2/1/checkpoint",
            "refs/spectr/ralph/@main/chg/2/1/checkpoint-index",
            "refs/spectr/ralph/@main/chg/2/1/failed",
        ]
    );
    assert_eq!(cpr.clean("chg", CleanScope::Checkpoints).unwrap(), 2);
    assert_eq!(
        cpr.list_refs("chg").unwrap(),
        ["refs/spectr/ralph/@main/chg/2/1/failed"]
    );
    assert_eq!(cpr.clean("chg", CleanScope::All).unwrap(), 1);
    assert!(cpr.list_refs("chg").unwrap().is_empty());
    assert_eq!(cpr.list_refs("other").unwrap().len(), 2, "{other:?}");
    // Dropping twice is fine.
    cpr.drop(&cp1).unwrap();
}

/// A completed attempt's refs dropped "soon" go with the next checkpoint's
/// transaction (no git command of their own), or at `settle`; one that
/// someone else re-made meanwhile is theirs and stays, and the checkpoint
/// is made all the same.
#[test]
fn a_drop_soon_goes_with_the_next_checkpoint_or_at_settle() {
    let fx = populated();
    let cpr = fx.checkpointer().with_excludes(loop_excludes(&fx));
    let cp1 = cpr.create(&cpr.ref_name("chg", "1", 1)).unwrap();
    cpr.drop_soon(&cp1).unwrap();
    assert_eq!(cpr.list_refs("chg").unwrap().len(), 2, "not yet");
    let cp2 = cpr.create(&cpr.ref_name("chg", "2", 1)).unwrap();
    assert_eq!(
        cpr.list_refs("chg").unwrap(),
        [
            "refs/spectr/ralph/@main/chg/2/1/checkpoint",
            "refs/spectr/ralph/@main/chg/2/1/checkpoint-index",
        ]
    );

    // Re-made by someone else before the next transaction: kept.
    cpr.drop_soon(&cp2).unwrap();
    let head = fx.git(&["rev-parse", "HEAD"]);
    fx.git(&["update-ref", &cp2.refname, head.trim()]);
    let cp3 = cpr.create(&cpr.ref_name("chg", "3", 1)).unwrap();
    let refs = cpr.list_refs("chg").unwrap();
    assert!(refs.contains(&cp2.refname), "{refs:?}");
    assert!(
        refs.contains(&cp3.refname),
        "the checkpoint is made: {refs:?}"
    );
    assert!(
        !refs.iter().any(|r| r.ends_with("/2/1/checkpoint-index")),
        "the rest of the drop is made alone: {refs:?}"
    );

    cpr.drop_soon(&cp3).unwrap();
    assert!(cpr.list_refs("chg").unwrap().contains(&cp3.refname));
    cpr.settle();
    assert!(!cpr.list_refs("chg").unwrap().contains(&cp3.refname));
}

/// One Checkpointer takes checkpoint after checkpoint (as a run does, its
/// caches warm): a change between two of them that keeps each file's size
/// and mtime (content, and a mode) is still in the second, and a revert to
/// it restores exactly that.
#[test]
fn a_change_keeping_size_and_mtime_is_never_missed() {
    let fx = populated();
    // Files older than the index (so git trusts their cached stats), the
    // index refreshed as a user's `git status` would.
    let old = std::time::SystemTime::now() - Duration::from_secs(10);
    for rel in ["a.txt", "b.txt", "untracked.txt"] {
        let f = std::fs::File::options()
            .write(true)
            .open(fx.root.join(rel))
            .unwrap();
        f.set_modified(old).unwrap();
    }
    fx.status();
    let cpr = fx.checkpointer().with_excludes(loop_excludes(&fx));
    let first = cpr.create(&cpr.ref_name("chg", "1", 1)).unwrap();
    let disguise = |rel: &str, content: &str| {
        let path = fx.root.join(rel);
        let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
        let before = std::fs::read(&path).unwrap();
        assert_eq!(before.len(), content.len(), "same size for {rel}");
        fx.write(rel, content);
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.set_modified(mtime).unwrap();
    };
    disguise("a.txt", "ALPHA\n");
    disguise("untracked.txt", "MINE, not yet added\n");
    let mtime = std::fs::metadata(fx.root.join("b.txt"))
        .unwrap()
        .modified()
        .unwrap();
    std::fs::set_permissions(
        fx.root.join("b.txt"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(fx.root.join("b.txt"))
        .unwrap();
    f.set_modified(mtime).unwrap();
    let expected = tree_state(&fx.root);

    let second = cpr.create(&cpr.ref_name("chg", "2", 1)).unwrap();
    assert_ne!(first.commit, second.commit);
    assert_eq!(
        fx.git(&["show", &format!("{}:a.txt", second.commit)]),
        "ALPHA\n"
    );
    assert_eq!(
        fx.git(&["show", &format!("{}:untracked.txt", second.commit)]),
        "MINE, not yet added\n"
    );

    // The attempt undoes the changes, again keeping sizes and mtimes.
    disguise("a.txt", "alpha\n");
    disguise("untracked.txt", "mine, not yet added\n");
    std::fs::set_permissions(
        fx.root.join("b.txt"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    cpr.revert(&second, &cpr.failed_ref_name("chg", "2", 1))
        .unwrap();
    assert_eq!(tree_state(&fx.root), expected);
}

/// A drop deletes every ref of its checkpoint, stash refs included: those
/// of a checkpoint made by this run (known without listing), of one that
/// overwrote a ref left by an earlier run (which had more stash entries), and
/// of one read back from a session (another Checkpointer).
#[test]
fn drop_deletes_every_stash_ref() {
    let fx = populated();
    let stash = |text: &str| {
        fx.write("a.txt", text);
        fx.git(&["stash", "push", "-q"]);
    };
    let stash_refs = |refname: &str| {
        fx.git(&[
            "for-each-ref",
            "--format=%(refname)",
            &format!("{refname}-stash/"),
        ])
        .lines()
        .count()
    };
    stash("one\n");
    stash("two\n");
    stash("three\n");

    // Made by this run where no ref existed.
    let cpr = fx.checkpointer();
    let fresh = cpr.create(&cpr.ref_name("chg", "1", 1)).unwrap();
    assert_eq!(stash_refs(&fresh.refname), 3);
    cpr.drop(&fresh).unwrap();
    assert!(cpr.list_refs("chg").unwrap().is_empty());

    // An earlier run (killed) left the ref with three stash refs; this run
    // overwrites it with two.
    let earlier = fx.checkpointer();
    let refname = earlier.ref_name("chg", "2", 1);
    earlier.create(&refname).unwrap();
    fx.git(&["stash", "drop", "-q"]);
    let cpr = fx.checkpointer();
    let again = cpr.create(&refname).unwrap();
    assert_eq!(stash_refs(&refname), 3, "the earlier run's third is left");
    cpr.drop(&again).unwrap();
    assert!(cpr.list_refs("chg").unwrap().is_empty());

    // Read back from a session: this Checkpointer did not make it.
    let cp = earlier.create(&cpr.ref_name("chg", "3", 1)).unwrap();
    cpr.drop(&cp).unwrap();
    assert!(cpr.list_refs("chg").unwrap().is_empty());

    // Made by this run, then re-made by another: the drop of the first
    // (its commit no longer the ref's) must still clear what is there.
    let first = cpr.create(&cpr.ref_name("chg", "4", 1)).unwrap();
    fx.git(&["stash", "push", "-q", "--include-untracked"]);
    earlier.create(&first.refname).unwrap();
    assert_eq!(stash_refs(&first.refname), 3);
    cpr.drop(&first).unwrap();
    assert!(cpr.list_refs("chg").unwrap().is_empty());
}

#[test]
fn ref_names_for_awkward_ids_are_valid_and_distinct() {
    let fx = fixture();
    let ids = [
        "plain", "1.2.3", ".hidden", "a..b", "end.", "x.lock", "a/b", "a b", "a%2Fb", "@", "@{u}",
        "~^:?*[\\", "", "ünï", "-dash", "tab\t",
    ];
    let cpr = fx.checkpointer();
    let mut seen = std::collections::BTreeSet::new();
    for id in ids {
        for name in [
            cpr.ref_name(id, id, 1),
            cpr.failed_ref_name("c", id, 2),
            Checkpointer::index_ref_name(&cpr.ref_name(id, "t", 3)),
        ] {
            assert!(
                fx.git_ok(&["check-ref-format", &name]),
                "invalid ref for {id:?}: {name}"
            );
            assert!(seen.insert(name.clone()), "duplicate {name}");
        }
    }
}

fn unescape(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 3 <= b.len() {
            out.push(u8::from_str_radix(&s[i + 1..i + 3], 16).unwrap());
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
    #[test]
    fn escaping_ids_is_reversible(id in "\\PC{1,12}") {
        let escaped = escape_component(&id);
        proptest::prop_assert_eq!(unescape(&escaped), id.as_bytes().to_vec());
        proptest::prop_assert!(!escaped.starts_with('.') && !escaped.ends_with('.'));
        proptest::prop_assert!(!escaped.contains("..") && !escaped.ends_with(".lock"));
    }
}

#[test]
fn works_in_a_linked_worktree() {
    let fx = populated();
    let wt = fx.root.parent().unwrap().join("linked");
    fx.git(&["worktree", "add", "-q", wt.to_str().unwrap()]);
    let cpr = Checkpointer::discover_with_program(&wt, TIMEOUT, fx.wrapper.clone())
        .unwrap()
        .unwrap();
    assert_eq!(cpr.repo_root(), wt);
    let main_index = fx.index_bytes();
    let cp = cpr.create(&cpr.ref_name("chg", "wt", 1)).unwrap();
    write(&wt, "a.txt", "in the linked worktree\n");
    git(&wt, &["add", "a.txt"]);
    cpr.revert(&cp, &cpr.failed_ref_name("chg", "wt", 1))
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(wt.join("a.txt")).unwrap(),
        "alpha\n"
    );
    assert_eq!(git(&wt, &["status", "--porcelain"]), "");
    assert_eq!(fx.index_bytes(), main_index);
}

#[test]
fn many_files_round_trip() {
    let fx = fixture();
    for i in 0..1500 {
        fx.write(&format!("d{}/f{i}.txt", i % 30), &format!("{i}\n"));
    }
    fx.commit_all("many");
    let cpr = fx.checkpointer();
    let cp = cpr.create(&cpr.ref_name("chg", "many", 1)).unwrap();
    for i in (0..1500).step_by(10) {
        fx.write(&format!("d{}/f{i}.txt", i % 30), "changed\n");
    }
    for i in (5..1500).step_by(50) {
        std::fs::remove_file(fx.root.join(format!("d{}/f{i}.txt", i % 30))).unwrap();
    }
    for i in 0..40 {
        fx.write(&format!("new{}/g{i}.txt", i % 4), "new\n");
    }
    let rev = cpr
        .revert(&cp, &cpr.failed_ref_name("chg", "many", 1))
        .unwrap();
    assert_eq!(rev.files_restored, 150 + 30);
    assert_eq!(rev.files_removed, 40);
    assert_eq!(fx.status(), "");
}

#[test]
fn a_stale_index_lock_stops_the_revert_before_any_change() {
    let fx = populated();
    let cpr = fx.checkpointer().with_excludes(loop_excludes(&fx));
    let cp = cpr.create(&cpr.ref_name("chg", "15", 1)).unwrap();
    fx.write("a.txt", "agent\n");
    fx.git(&["add", "a.txt"]);
    let lock = fx.root.join(".git/index.lock");
    std::fs::write(&lock, b"").unwrap();
    let failed = cpr.failed_ref_name("chg", "15", 1);
    let err = cpr.revert(&cp, &failed).unwrap_err();
    assert!(
        matches!(err, CheckpointError::IndexLocked { .. }),
        "{err:?}"
    );
    assert_eq!(fx.read("a.txt").as_deref(), Some("agent\n"));
    // Once the lock is gone the revert goes through.
    std::fs::remove_file(&lock).unwrap();
    cpr.revert(&cp, &failed).unwrap();
    assert_eq!(fx.read("a.txt").as_deref(), Some("alpha\n"));
    assert_eq!(fx.git(&["diff", "--cached"]), "");
}

/// In a repository where git keeps a second id for every object it writes
/// (`extensions.compatObjectFormat`), spectr writes none itself: every loose
/// object a checkpoint makes is in git's map.
#[test]
fn with_a_compat_object_format_every_object_is_gits() {
    // Set before the first object, as git needs it.
    let fx = fixture();
    fx.git(&["config", "core.repositoryformatversion", "1"]);
    fx.git(&["config", "extensions.compatObjectFormat", "sha256"]);
    fx.write("a.txt", "alpha\n");
    fx.commit_all("init");
    let objects = fx.root.join(".git/objects");
    let loose = || -> Vec<String> {
        let mut ids = Vec::new();
        for dir in std::fs::read_dir(&objects).unwrap().flatten() {
            let name = dir.file_name().to_string_lossy().into_owned();
            if name.len() != 2 {
                continue;
            }
            for f in std::fs::read_dir(dir.path()).unwrap().flatten() {
                ids.push(format!("{name}{}", f.file_name().to_string_lossy()));
            }
        }
        ids
    };
    let before = loose().len();
    let cpr = fx.checkpointer().with_excludes(loop_excludes(&fx));
    fx.write("a.txt", "changed\n");
    let cp = cpr.create(&cpr.ref_name("chg", "1", 1)).unwrap();
    cpr.settle();
    let ids = loose();
    assert!(ids.len() > before, "the checkpoint wrote objects");
    let map = std::fs::read_to_string(objects.join("loose-object-idx")).unwrap_or_default();
    let missing: Vec<&String> = ids.iter().filter(|id| !map.contains(id.as_str())).collect();
    assert!(
        missing.is_empty(),
        "objects not written by git: {missing:?} ({cp:?})"
    );
}
