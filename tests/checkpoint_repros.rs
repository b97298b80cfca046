//! The checkpoint/revert repros of issue 8 ("never lose work"), one test
//! each, against real git repositories in temp dirs.

mod common;

use common::checkpoint::*;
use common::mode;
use spectr::checkpoint::{CheckpointError, Checkpointer, CleanScope};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Item 1: whatever the agent does to `.gitignore`, ignored files are neither
/// snapshotted nor deleted.
#[test]
fn ignored_files_survive_any_gitignore_edit() {
    type Edit = (&'static str, fn(&Path));
    let edits: [Edit; 4] = [
        ("emptied", |r| {
            std::fs::write(r.join(".gitignore"), "").unwrap()
        }),
        ("deleted", |r| {
            std::fs::remove_file(r.join(".gitignore")).unwrap()
        }),
        ("renamed", |r| {
            std::fs::rename(r.join(".gitignore"), r.join("gitignore.old")).unwrap()
        }),
        ("symlinked", |r| {
            std::fs::remove_file(r.join(".gitignore")).unwrap();
            std::os::unix::fs::symlink("/dev/null", r.join(".gitignore")).unwrap();
        }),
    ];
    for (what, edit) in edits {
        let fx = fixture();
        fx.write(".gitignore", ".env\nnode_modules/\nsub/*.tmp\n");
        fx.write("sub/.gitignore", "local.secret\n");
        fx.write("a.txt", "a\n");
        fx.commit_all("init");
        fx.write(".env", "API_KEY=x\n");
        fx.write("node_modules/p/i.js", "x\n");
        fx.write("sub/deep/local.secret", "s\n");
        fx.write("sub/x.tmp", "t\n");
        let cpr = fx.checkpointer();
        let cp = cpr.create(&cpr.ref_name("c", "1", 1)).unwrap();
        edit(&fx.root);
        std::fs::write(fx.root.join("sub/.gitignore"), "").unwrap();
        let failed = cpr.failed_ref_name("c", "1", 1);
        cpr.revert(&cp, &failed).unwrap();
        assert_eq!(fx.read(".env").as_deref(), Some("API_KEY=x\n"), "{what}");
        assert_eq!(
            fx.read("node_modules/p/i.js").as_deref(),
            Some("x\n"),
            "{what}"
        );
        assert_eq!(
            fx.read("sub/deep/local.secret").as_deref(),
            Some("s\n"),
            "{what}"
        );
        assert_eq!(fx.read("sub/x.tmp").as_deref(), Some("t\n"), "{what}");
        assert_eq!(
            fx.read(".gitignore").as_deref(),
            Some(".env\nnode_modules/\nsub/*.tmp\n"),
            "{what}"
        );
        let saved = fx.git(&["ls-tree", "-r", "--name-only", &failed]);
        for secret in [".env", "node_modules", "local.secret", "x.tmp"] {
            assert!(!saved.contains(secret), "{what}: {secret} in {saved}");
        }
        assert_eq!(fx.status(), "", "{what}");
    }
}

fn stash_state(fx: &Fixture) -> (String, Option<Vec<u8>>) {
    let head = fx.git(&["rev-parse", "-q", "--verify", "refs/stash"]);
    (
        head,
        std::fs::read(fx.root.join(".git/logs/refs/stash")).ok(),
    )
}

/// Item 4: the user's stash list comes back exactly; an agent's own stash
/// entry does not stay behind.
#[test]
fn the_users_stash_is_restored_exactly() {
    let fx = populated();
    fx.write("a.txt", "stashed one\n");
    fx.git(&["stash", "push", "-q", "-m", "first"]);
    fx.write("b.txt", "stashed two\n");
    fx.git(&["stash", "push", "-q", "-m", "second"]);
    let before = stash_state(&fx);
    let cpr = fx.checkpointer().with_excludes(loop_excludes(&fx));
    let cp = cpr.create(&cpr.ref_name("c", "1", 1)).unwrap();

    fx.git(&["stash", "pop", "-q"]);
    fx.git(&["stash", "drop", "-q"]);
    fx.write("a.txt", "agent\n");
    fx.git(&["stash", "push", "-q", "-m", "agent's"]);
    // Nothing keeps the dropped entries but our refs.
    fx.git(&["reflog", "expire", "--expire=now", "--all"]);
    fx.git(&["prune", "--expire=now"]);
    let r = cpr.revert(&cp, &cpr.failed_ref_name("c", "1", 1)).unwrap();
    assert!(
        r.notices.iter().any(|n| n.contains("stash")),
        "{:?}",
        r.notices
    );
    assert_eq!(stash_state(&fx), before);
    assert_eq!(
        fx.git(&["stash", "list", "--format=%s"]),
        "On main: second\nOn main: first\n"
    );
    fx.git(&["stash", "apply", "-q", "stash@{1}"]);
    assert_eq!(fx.read("a.txt").as_deref(), Some("stashed one\n"));

    // No stash at the checkpoint: the agent's is removed.
    let fx = populated();
    let cpr = fx.checkpointer().with_excludes(loop_excludes(&fx));
    let cp = cpr.create(&cpr.ref_name("c", "1", 1)).unwrap();
    fx.write("a.txt", "agent\n");
    fx.git(&["stash", "push", "-q"]);
    cpr.revert(&cp, &cpr.failed_ref_name("c", "1", 1)).unwrap();
    assert_eq!(fx.git(&["stash", "list"]), "");
}

/// Item 7: a kill -9 while the index was being restored leaves our
/// index.lock: the next revert recognises it as ours and goes on; a lock that
/// is not ours is named in the error.
#[test]
fn our_stale_index_lock_is_recovered_and_a_foreign_one_named() {
    let fx = populated();
    let cpr = fx.checkpointer().with_excludes(loop_excludes(&fx));
    let cp = cpr.create(&cpr.ref_name("c", "1", 1)).unwrap();
    fx.write("a.txt", "agent\n");
    fx.git(&["add", "a.txt"]);
    let lock = fx.root.join(".git/index.lock");
    std::fs::write(&lock, b"DIRC half written").unwrap();
    let err = cpr
        .revert(&cp, &cpr.failed_ref_name("c", "1", 1))
        .unwrap_err();
    assert!(
        matches!(err, CheckpointError::IndexLocked { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains(".git/index.lock"), "{err}");
    assert!(err.to_string().contains("delete that file"), "{err}");

    // As a killed spectr leaves it: our owner marker naming a dead process.
    fx.name_index_lock_a_killed_spectrs();
    let r = cpr.revert(&cp, &cpr.failed_ref_name("c", "1", 1)).unwrap();
    assert!(
        r.notices.iter().any(|n| n.contains("index.lock")),
        "{:?}",
        r.notices
    );
    assert!(!lock.exists());
    assert_eq!(fx.read("a.txt").as_deref(), Some("alpha\n"));
    assert_eq!(fx.git(&["diff", "--cached"]), "");
}

/// Item 9: a nested repository without commits, before the checkpoint or
/// created by the agent, neither fails a checkpoint nor a revert; it is left
/// alone and named.
#[test]
fn nested_repositories_without_commits_are_left_alone() {
    let fx = populated();
    std::fs::create_dir(fx.root.join("pre")).unwrap();
    git(&fx.root.join("pre"), &["init", "-q"]);
    fx.write("pre/f.txt", "nested\n");
    let cpr = fx.checkpointer().with_excludes(loop_excludes(&fx));
    let cp = cpr.create(&cpr.ref_name("c", "1", 1)).unwrap();
    assert!(
        cp.notices.iter().any(|n| n.contains("pre/")),
        "{:?}",
        cp.notices
    );
    std::fs::create_dir(fx.root.join("new")).unwrap();
    git(&fx.root.join("new"), &["init", "-q"]);
    fx.write("new/g.txt", "agent's repo\n");
    fx.write("a.txt", "agent\n");
    let r = cpr.revert(&cp, &cpr.failed_ref_name("c", "1", 1)).unwrap();
    assert!(
        r.notices.iter().any(|n| n.contains("new/")),
        "{:?}",
        r.notices
    );
    assert_eq!(fx.read("a.txt").as_deref(), Some("alpha\n"));
    assert_eq!(fx.read("pre/f.txt").as_deref(), Some("nested\n"));
    assert_eq!(fx.read("new/g.txt").as_deref(), Some("agent's repo\n"));
}

/// Item 10: mid-merge (and the like) refuses to checkpoint, saying what to do.
#[test]
fn a_merge_in_progress_refuses_to_start() {
    let fx = populated();
    let head = fx.git(&["rev-parse", "HEAD"]);
    std::fs::write(fx.root.join(".git/MERGE_HEAD"), &head).unwrap();
    let err =
        Checkpointer::discover_with_program(&fx.root, TIMEOUT, fx.wrapper.clone()).unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(err, CheckpointError::OperationInProgress { .. }),
        "{err:?}"
    );
    assert!(
        text.contains("merge") && text.contains("git merge --abort"),
        "{text}"
    );
    std::fs::remove_file(fx.root.join(".git/MERGE_HEAD")).unwrap();
    let cpr = fx.checkpointer();
    std::fs::create_dir(fx.root.join(".git/rebase-merge")).unwrap();
    let err = cpr.create(&cpr.ref_name("c", "1", 1)).unwrap_err();
    assert!(err.to_string().contains("rebase --abort"), "{err}");
}

/// Item 11: real modes come back (git itself keeps only 644/755).
#[test]
fn file_modes_are_restored() {
    let fx = populated();
    for (f, m) in [("secret.txt", 0o600), ("ro.txt", 0o444), ("a.txt", 0o640)] {
        fx.write(f, "x\n");
        std::fs::set_permissions(fx.root.join(f), std::fs::Permissions::from_mode(m)).unwrap();
    }
    let cpr = fx.checkpointer().with_excludes(loop_excludes(&fx));
    let cp = cpr.create(&cpr.ref_name("c", "1", 1)).unwrap();
    for f in ["secret.txt", "ro.txt", "a.txt"] {
        std::fs::set_permissions(fx.root.join(f), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    fx.write("secret.txt", "changed\n");
    std::fs::remove_file(fx.root.join("ro.txt")).unwrap();
    cpr.revert(&cp, &cpr.failed_ref_name("c", "1", 1)).unwrap();
    assert_eq!(mode(&fx.root.join("secret.txt")), 0o600);
    assert_eq!(mode(&fx.root.join("ro.txt")), 0o444);
    assert_eq!(mode(&fx.root.join("a.txt")), 0o640);
    assert_eq!(fx.read("secret.txt").as_deref(), Some("x\n"));
}

/// Item 12: line-ending attributes and filters do not change a byte.
#[test]
fn eol_attributes_do_not_change_bytes() {
    let fx = fixture();
    fx.write(
        ".gitattributes",
        "*.txt text eol=crlf\n*.dat filter=upper\n",
    );
    fx.git(&["config", "filter.upper.clean", "tr a-z A-Z"]);
    fx.git(&["config", "filter.upper.smudge", "tr A-Z a-z"]);
    fx.write("lf.txt", "one\ntwo\n");
    fx.write("crlf.txt", "one\r\ntwo\r\n");
    fx.write("f.dat", "MiXeD\n");
    fx.commit_all("init");
    // The work tree as the user has it (not as git would check it out).
    fx.write("lf.txt", "one\ntwo\n");
    fx.write("f.dat", "MiXeD\n");
    let before = tree_state(&fx.root);
    let cpr = fx.checkpointer();
    let cp = cpr.create(&cpr.ref_name("c", "1", 1)).unwrap();
    fx.write("lf.txt", "one\r\ntwo\r\n");
    fx.write("crlf.txt", "one\ntwo\n");
    fx.write("f.dat", "changed\n");
    cpr.revert(&cp, &cpr.failed_ref_name("c", "1", 1)).unwrap();
    assert_eq!(tree_state(&fx.root), before);
}

/// Item 13: empty directories: the checkpoint's stay, the agent's go.
#[test]
fn empty_directories_survive_and_new_ones_go() {
    let fx = populated();
    std::fs::create_dir_all(fx.root.join("empty/inner")).unwrap();
    std::fs::create_dir_all(fx.root.join("dir/empty2")).unwrap();
    std::fs::create_dir_all(fx.root.join("filled")).unwrap();
    let cpr = fx.checkpointer().with_excludes(loop_excludes(&fx));
    let before = tree_state(&fx.root);
    let cp = cpr.create(&cpr.ref_name("c", "1", 1)).unwrap();
    fx.write("empty/inner/new.txt", "agent\n");
    std::fs::remove_dir(fx.root.join("dir/empty2")).unwrap();
    fx.write("filled/x.txt", "agent\n");
    std::fs::create_dir_all(fx.root.join("agent/made/this")).unwrap();
    std::fs::create_dir_all(fx.root.join("dir/agent-empty")).unwrap();
    cpr.revert(&cp, &cpr.failed_ref_name("c", "1", 1)).unwrap();
    assert_eq!(tree_state(&fx.root), before);
}

/// Item 13 again, with folders listed before: a checkpoint lists again
/// only the folders whose time changed (listings are kept by the folder's
/// inode, modification and change times), so one checkpoint after another
/// in a run still sees an empty folder made between them, at any depth,
/// in folders whose modification time says nothing happened.
#[test]
fn empty_directories_made_between_two_checkpoints_are_seen() {
    let fx = populated();
    std::fs::create_dir_all(fx.root.join("dir/old-empty")).unwrap();
    let long_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(600);
    for d in ["", "dir", "dir/old-empty"] {
        std::fs::File::open(fx.root.join(d))
            .and_then(|f| f.set_modified(long_ago))
            .unwrap();
    }
    let cpr = fx.checkpointer().with_excludes(loop_excludes(&fx));
    let first = cpr.create(&cpr.ref_name("c", "1", 1)).unwrap();
    cpr.drop(&first).unwrap();
    // Between the two: a new empty folder in a listed folder, one at the
    // top, one inside the old empty one; and nothing else.
    std::fs::create_dir(fx.root.join("dir/new-empty")).unwrap();
    std::fs::create_dir(fx.root.join("top-empty")).unwrap();
    std::fs::create_dir(fx.root.join("dir/old-empty/deeper")).unwrap();
    let before = tree_state(&fx.root);
    let cp = cpr.create(&cpr.ref_name("c", "2", 1)).unwrap();
    for d in ["dir/new-empty", "top-empty", "dir/old-empty/deeper"] {
        std::fs::remove_dir(fx.root.join(d)).unwrap();
    }
    cpr.revert(&cp, &cpr.failed_ref_name("c", "2", 1)).unwrap();
    assert_eq!(tree_state(&fx.root), before);
}

/// Item 16: temporary index folders left by a killed spectr are cleaned;
/// a live run's are not.
#[test]
fn stale_temporary_folders_are_cleaned() {
    let fx = populated();
    let stale = fx.root.join(".git/spectr-ralph-stale");
    std::fs::create_dir(&stale).unwrap();
    std::fs::write(stale.join("index"), b"x").unwrap();
    std::fs::write(stale.join("owner"), "4194304 1").unwrap();
    let live = fx.root.join(".git/spectr-ralph-live");
    std::fs::create_dir(&live).unwrap();
    std::fs::write(live.join("owner"), format!("{} 0", std::process::id())).unwrap();
    let cpr = fx.checkpointer();
    cpr.create(&cpr.ref_name("c", "1", 1)).unwrap();
    assert!(!stale.exists());
    assert!(live.exists());
    let left: Vec<_> = std::fs::read_dir(fx.root.join(".git"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("spectr-ralph-"))
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left, [std::ffi::OsString::from("spectr-ralph-live")]);
}

/// Item 17: a revert killed after saving the failed work finishes on the
/// next try without snapshotting the half-restored tree over it.
#[test]
fn an_interrupted_revert_finishes_without_a_second_snapshot() {
    let fx = populated();
    let cpr = fx.checkpointer().with_excludes(loop_excludes(&fx));
    let cp = cpr.create(&cpr.ref_name("c", "1", 1)).unwrap();
    let before = tree_state(&fx.root);
    fx.write("a.txt", "agent\n");
    fx.write("b.txt", "agent\n");
    fx.write("new.txt", "agent\n");
    // A git that dies once the files are being put back (the empty-directory
    // pass runs `ls-files --directory` after writing them).
    let breaking = fx.root.parent().unwrap().join("git-breaks");
    write_script(
        &breaking,
        "case \"$*\" in *--directory*) exit 9;; esac\nGIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1 exec git \"$@\"",
    );
    let failed = cpr.failed_ref_name("c", "1", 1);
    assert!(
        cpr.clone()
            .with_git_program(breaking)
            .revert(&cp, &failed)
            .is_err()
    );
    let first = fx.git(&["rev-parse", &failed]);
    // Half way: undo part of the restore to show a second snapshot would differ.
    fx.write("b.txt", "half\n");
    // A kill in the middle of putting b.txt back leaves its temporary file
    // (seen in the kill -9 torture test): the second try removes it.
    fx.write(".b.txt.spectr-tmp-0123456789abcdef0123456789abcdef", "ha");
    let r = cpr.revert(&cp, &failed).unwrap();
    assert_eq!(fx.git(&["rev-parse", &failed]), first);
    assert_eq!(fx.git(&["show", &format!("{failed}:a.txt")]), "agent\n");
    assert_eq!(fx.git(&["show", &format!("{failed}:b.txt")]), "agent\n");
    assert!(
        r.notices.iter().any(|n| n.contains("interrupted")),
        "{:?}",
        r.notices
    );
    assert_eq!(tree_state(&fx.root), before);
}

/// Item 18: two worktrees running the same change never share refs.
#[test]
fn two_worktrees_keep_their_refs_apart() {
    let fx = populated();
    let wt = fx.root.parent().unwrap().join("linked");
    fx.git(&["worktree", "add", "-q", wt.to_str().unwrap()]);
    let main = fx.checkpointer();
    let linked = Checkpointer::discover_with_program(&wt, TIMEOUT, fx.wrapper.clone())
        .unwrap()
        .unwrap();
    assert_eq!(main.worktree_name(), "main");
    assert_eq!(linked.worktree_name(), "linked");
    let a = main.create(&main.ref_name("c", "1", 1)).unwrap();
    let b = linked.create(&linked.ref_name("c", "1", 1)).unwrap();
    assert_ne!(a.refname, b.refname);
    assert_eq!(main.list_refs("c").unwrap().len(), 2);
    assert_eq!(linked.clean("c", CleanScope::All).unwrap(), 2);
    assert_eq!(
        main.list_refs("c").unwrap().len(),
        2,
        "the other run's refs stay"
    );
    assert!(main.list_refs("c").unwrap()[0].starts_with("refs/spectr/ralph/@main/c/"));
}

/// Item 19: a large untracked file being snapshotted is named once.
#[test]
fn large_untracked_files_are_named() {
    let fx = populated();
    let f = std::fs::File::create(fx.root.join("big.bin")).unwrap();
    f.set_len(50_000_001).unwrap();
    let cpr = fx.checkpointer().with_excludes(loop_excludes(&fx));
    let cp = cpr.create(&cpr.ref_name("c", "1", 1)).unwrap();
    assert!(
        cp.notices
            .iter()
            .any(|n| n.contains("big.bin") && n.contains(".gitignore")),
        "{:?}",
        cp.notices
    );
    let again = cpr.create(&cpr.ref_name("c", "1", 2)).unwrap();
    assert!(again.notices.is_empty(), "{:?}", again.notices);
}

/// Item 11, across checkpoints of one run: a chmod between two checkpoints
/// is seen (modes are cached by the file's stats, which a chmod changes).
#[test]
fn a_chmod_between_checkpoints_is_seen() {
    let fx = populated();
    let cpr = fx.checkpointer().with_excludes(loop_excludes(&fx));
    cpr.create(&cpr.ref_name("c", "1", 1)).unwrap();
    std::fs::set_permissions(
        fx.root.join("b.txt"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    let cp = cpr.create(&cpr.ref_name("c", "2", 1)).unwrap();
    std::fs::set_permissions(
        fx.root.join("b.txt"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    cpr.revert(&cp, &cpr.failed_ref_name("c", "2", 1)).unwrap();
    assert_eq!(mode(&fx.root.join("b.txt")), 0o600);
}

/// Item 20: a repository used through GIT_DIR / GIT_WORK_TREE (the git dir
/// outside the work tree) gets checkpoints and reverts.
#[test]
fn a_repository_reached_through_git_dir_gets_checkpoints() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let (work, gd) = (base.join("proj"), base.join("gd"));
    let change = work.join("spectr/changes/c");
    std::fs::create_dir_all(&change).unwrap();
    std::fs::write(change.join("proposal.md"), "# c\n").unwrap();
    std::fs::write(
        change.join("tasks.jsonc"),
        r#"{ "version": 1, "tasks": [ { "id": "1.1", "section": "S", "description": "d", "status": "pending" } ] }"#,
    )
    .unwrap();
    let with_env = |args: &[&str]| {
        let mut cmd = git_cmd(&work, args);
        cmd.env("GIT_DIR", &gd).env("GIT_WORK_TREE", &work);
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    git(
        &base,
        &["init", "-q", "-b", "main", "--bare", gd.to_str().unwrap()],
    );
    with_env(&["config", "core.bare", "false"]);
    with_env(&["add", "-A"]);
    with_env(&["commit", "-q", "-m", "base"]);
    let agent = base.join("agent.sh");
    std::fs::write(
        &agent,
        "echo agent > new.txt\necho '<promise>FAILED: x</promise>'\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_spectr"))
        .args([
            "ralph",
            "c",
            "--json",
            "--max-retries",
            "0",
            "--commit",
            "off",
            "--agent-cmd",
        ])
        .arg(format!("sh {}", agent.display()))
        .current_dir(&work)
        .env("GIT_DIR", &gd)
        .env("GIT_WORK_TREE", &work)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("\"event\":\"checkpoint\""), "{stdout}");
    assert!(stdout.contains("\"event\":\"reverted\""), "{stdout}");
    assert!(!work.join("new.txt").exists(), "reverted");
    assert!(with_env(&["for-each-ref"]).contains("refs/spectr/ralph/@main/c/1.1/1/failed"));
}

/// Item 10, the other way round: a merge the agent left conflicted is ended
/// by the revert (the user's next commit must not silently be a merge), and
/// the next checkpoint works.
#[test]
fn a_merge_the_agent_left_is_ended_by_the_revert() {
    let fx = populated();
    fx.git(&["checkout", "-q", "-b", "other"]);
    fx.write("a.txt", "other side\n");
    fx.git(&["commit", "-q", "-am", "other"]);
    fx.git(&["checkout", "-q", "main"]);
    let cpr = fx.checkpointer().with_excludes(loop_excludes(&fx));
    let before = tree_state(&fx.root);
    let index = fx.index_bytes();
    let cp = cpr.create(&cpr.ref_name("c", "1", 1)).unwrap();
    fx.write("a.txt", "main side\n");
    fx.git(&["commit", "-q", "-am", "agent"]);
    assert!(!fx.git_ok(&["merge", "-q", "other"]), "a conflict");
    assert!(fx.root.join(".git/MERGE_HEAD").exists());
    let r = cpr.revert(&cp, &cpr.failed_ref_name("c", "1", 1)).unwrap();
    assert!(
        r.notices.iter().any(|n| n.contains("merge")),
        "{:?}",
        r.notices
    );
    assert!(!fx.root.join(".git/MERGE_HEAD").exists());
    assert!(!fx.root.join(".git/MERGE_MSG").exists());
    assert_eq!(tree_state(&fx.root), before);
    assert_eq!(fx.index_bytes(), index);
    cpr.create(&cpr.ref_name("c", "1", 2)).unwrap();
}

/// Item 1: rules from `.git/info/exclude` and `core.excludesFile` count too.
#[test]
fn info_exclude_and_core_excludes_file_are_honoured() {
    let fx = populated();
    let global = fx.root.parent().unwrap().join("global-ignore");
    std::fs::write(&global, "*.glob\n").unwrap();
    fx.git(&["config", "core.excludesFile", global.to_str().unwrap()]);
    std::fs::write(fx.root.join(".git/info/exclude"), "local-only/\n").unwrap();
    fx.write("x.glob", "global\n");
    fx.write("local-only/y", "local\n");
    let cpr = fx.checkpointer().with_excludes(loop_excludes(&fx));
    let cp = cpr.create(&cpr.ref_name("c", "1", 1)).unwrap();
    fx.write("a.txt", "agent\n");
    let failed = cpr.failed_ref_name("c", "1", 1);
    cpr.revert(&cp, &failed).unwrap();
    assert_eq!(fx.read("x.glob").as_deref(), Some("global\n"));
    assert_eq!(fx.read("local-only/y").as_deref(), Some("local\n"));
    let saved = fx.git(&["ls-tree", "-r", "--name-only", &failed]);
    assert!(
        !saved.contains("x.glob") && !saved.contains("local-only"),
        "{saved}"
    );
}
