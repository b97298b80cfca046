//! Revert property test: random things an agent does during a failing
//! attempt (files, modes, symlinks, line endings, `.gitignore` edits, ignored
//! files, empty directories, nested repositories, stash push/pop/drop,
//! commits, branch switches, index changes, other branches and tags deleted,
//! moved or made), then a revert. It must restore the checkpoint's tree byte
//! for byte (contents, modes, symlinks, empty directories), leave ignored
//! files exactly as the agent left them, put back HEAD, the branch, every
//! other branch and tag, the index and the stash, and keep the failed work
//! readable from the failed ref (and what the attempt made or moved of
//! branches and tags under its `failed-refs/`).
//!
//! CI runs a few seeded cases; `PROPTEST_CASES=500 cargo test --test
//! checkpoint_revert_prop` runs hundreds.

mod common;

use common::checkpoint::*;
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

const PATHS: &[&str] = &[
    "f0", "f1", "d/f2", "d/e/f3", "e.crlf", "link", "new1", "d/new2", "empty/in", "u0.txt",
];
const CONTENTS: &[&str] = &[
    "",
    "x\n",
    "alpha\n",
    "a\r\nb\r\n",
    "a\nb\n",
    "long line without newline",
];
const MODES: &[u32] = &[0o600, 0o644, 0o755, 0o444, 0o640];

#[derive(Clone, Debug)]
enum Step {
    Write(usize, usize),
    Delete(usize),
    Chmod(usize, usize),
    Symlink(usize, usize),
    Gitignore(u8),
    Ignored(u8, usize),
    EmptyDir(u8),
    Nested,
    Stash(u8),
    Commit,
    Branch(u8),
    Index(usize, bool),
    Rename(usize, usize),
    Merge,
    Refs(u8),
}

fn step() -> impl Strategy<Value = Step> {
    let p = 0..PATHS.len();
    prop_oneof![
        3 => (p.clone(), 0..CONTENTS.len()).prop_map(|(a, b)| Step::Write(a, b)),
        2 => p.clone().prop_map(Step::Delete),
        2 => (p.clone(), 0..MODES.len()).prop_map(|(a, b)| Step::Chmod(a, b)),
        1 => (p.clone(), p.clone()).prop_map(|(a, b)| Step::Symlink(a, b)),
        2 => (0u8..4).prop_map(Step::Gitignore),
        2 => (0u8..3, 0..CONTENTS.len()).prop_map(|(a, b)| Step::Ignored(a, b)),
        1 => (0u8..3).prop_map(Step::EmptyDir),
        1 => Just(Step::Nested),
        2 => (0u8..3).prop_map(Step::Stash),
        1 => Just(Step::Commit),
        1 => (0u8..2).prop_map(Step::Branch),
        1 => (p.clone(), any::<bool>()).prop_map(|(a, b)| Step::Index(a, b)),
        1 => (p.clone(), p).prop_map(|(a, b)| Step::Rename(a, b)),
        1 => Just(Step::Merge),
        2 => (0u8..7).prop_map(Step::Refs),
    ]
}

/// Ignored by the checkpoint's rules (`*.secret`, `ign/`).
fn ignored(path: &[u8]) -> bool {
    path.ends_with(b".secret") || path == b"ign" || path.starts_with(b"ign/")
}

/// The agent's nested repository: left alone by design.
fn nested(path: &[u8]) -> bool {
    path == b"nest" || path.starts_with(b"nest/")
}

fn remove_any(p: &Path) {
    match std::fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => {
            let _ = std::fs::remove_dir_all(p);
        }
        Ok(_) => {
            let _ = std::fs::remove_file(p);
        }
        Err(_) => {}
    }
}

/// Makes `rel`'s parent a directory (whatever was in the way goes).
fn clear_parents(root: &Path, rel: &str) {
    let mut dir = root.to_path_buf();
    let parent = Path::new(rel).parent().unwrap_or(Path::new(""));
    for c in parent.components() {
        dir.push(c);
        if std::fs::symlink_metadata(&dir).is_ok_and(|m| !m.is_dir()) {
            remove_any(&dir);
        }
    }
    std::fs::create_dir_all(&dir).unwrap();
}

fn quiet_git(root: &Path, args: &[&str]) {
    let _ = git_cmd(root, args).output();
}

fn apply(fx: &Fixture, step: &Step) {
    let root = &fx.root;
    match *step {
        Step::Write(p, c) => {
            clear_parents(root, PATHS[p]);
            let full = root.join(PATHS[p]);
            if std::fs::symlink_metadata(&full).is_ok_and(|m| !m.is_file()) {
                remove_any(&full);
            }
            std::fs::write(&full, CONTENTS[c]).unwrap();
        }
        Step::Delete(p) => remove_any(&root.join(PATHS[p])),
        Step::Chmod(p, m) => {
            let full = root.join(PATHS[p]);
            if std::fs::symlink_metadata(&full).is_ok_and(|m| m.is_file()) {
                std::fs::set_permissions(&full, std::fs::Permissions::from_mode(MODES[m])).unwrap();
            }
        }
        Step::Symlink(p, t) => {
            clear_parents(root, PATHS[p]);
            remove_any(&root.join(PATHS[p]));
            std::os::unix::fs::symlink(PATHS[t], root.join(PATHS[p])).unwrap();
        }
        Step::Gitignore(how) => {
            let g = root.join(".gitignore");
            remove_any(&g);
            match how {
                0 => std::fs::write(&g, "").unwrap(),
                1 => {}
                2 => std::os::unix::fs::symlink("/dev/null", &g).unwrap(),
                _ => std::fs::write(&g, "*\n!*.secret\n").unwrap(),
            }
        }
        Step::Ignored(which, c) => {
            let rel = ["x.secret", "ign/y", "ign/deep/z"][usize::from(which)];
            clear_parents(root, rel);
            let full = root.join(rel);
            remove_any(&full);
            std::fs::write(full, CONTENTS[c]).unwrap();
        }
        Step::EmptyDir(which) => match which {
            0 => {
                let _ = std::fs::remove_dir(root.join("empty"));
            }
            1 => {
                clear_parents(root, "made/by/agent/x");
            }
            _ => {
                clear_parents(root, "empty/in/x");
            }
        },
        Step::Nested => {
            clear_parents(root, "nest/f");
            quiet_git(&root.join("nest"), &["init", "-q"]);
            std::fs::write(root.join("nest/f"), "nested\n").unwrap();
        }
        Step::Stash(how) => match how {
            0 => quiet_git(root, &["stash", "push", "-q", "-u", "-m", "agent"]),
            1 => quiet_git(root, &["stash", "pop", "-q"]),
            _ => quiet_git(root, &["stash", "drop", "-q"]),
        },
        Step::Commit => {
            quiet_git(root, &["add", "-A"]);
            quiet_git(root, &["commit", "-q", "--no-verify", "-m", "agent"]);
        }
        Step::Branch(how) => match how {
            0 => quiet_git(root, &["checkout", "-q", "-B", "agent-branch"]),
            _ => quiet_git(root, &["checkout", "-q", "--detach"]),
        },
        Step::Rename(a, b) => {
            let from = root.join(PATHS[a]);
            if a != b && std::fs::symlink_metadata(&from).is_ok() {
                clear_parents(root, PATHS[b]);
                remove_any(&root.join(PATHS[b]));
                let _ = std::fs::rename(&from, root.join(PATHS[b]));
            }
        }
        Step::Merge => {
            // A side branch whose change conflicts, merged: often left
            // conflicted (MERGE_HEAD) for the revert to end.
            quiet_git(root, &["add", "-A"]);
            quiet_git(root, &["commit", "-q", "--no-verify", "-m", "agent"]);
            quiet_git(root, &["branch", "-f", "side", "HEAD~1"]);
            quiet_git(root, &["stash", "push", "-q"]);
            quiet_git(root, &["checkout", "-q", "side"]);
            let _ = std::fs::write(root.join("f0"), "side\n");
            quiet_git(root, &["commit", "-q", "-am", "side"]);
            quiet_git(root, &["checkout", "-q", "-"]);
            let _ = std::fs::write(root.join("f0"), "mine\n");
            quiet_git(root, &["commit", "-q", "-am", "mine"]);
            quiet_git(root, &["merge", "-q", "side"]);
        }
        Step::Refs(how) => match how {
            0 => quiet_git(root, &["branch", "-D", "other"]),
            1 => quiet_git(root, &["branch", "-f", "other", "HEAD"]),
            2 => quiet_git(root, &["branch", "made"]),
            3 => quiet_git(root, &["tag", "-d", "v1"]),
            4 => quiet_git(root, &["tag", "-f", "-a", "v2", "-m", "moved"]),
            5 => quiet_git(root, &["tag", "made-tag"]),
            _ => {
                // A branch made and then committed on (HEAD moves with it).
                quiet_git(root, &["checkout", "-q", "-b", "made-2"]);
                quiet_git(root, &["commit", "-q", "--allow-empty", "-m", "on made-2"]);
            }
        },
        Step::Index(p, add) => {
            if add {
                quiet_git(root, &["add", "-f", "--", PATHS[p]]);
            } else {
                quiet_git(
                    root,
                    &["rm", "-q", "--cached", "--ignore-unmatch", "--", PATHS[p]],
                );
            }
        }
    }
}

/// The user's repository before the attempt.
fn start() -> Fixture {
    let fx = fixture();
    fx.write(".gitignore", "*.secret\nign/\n");
    fx.write(".gitattributes", "*.crlf text eol=crlf\n");
    fx.write("f0", "zero\n");
    fx.write("f1", "one\n");
    fx.write("d/f2", "#!/bin/sh\n");
    fx.write("d/e/f3", "three\n");
    fx.write("e.crlf", "a\r\nb\r\n");
    std::os::unix::fs::symlink("f1", fx.root.join("link")).unwrap();
    fx.commit_all("base");
    fx.write("f0", "older\n");
    fx.commit_all("older");
    fx.write("f0", "zero\n");
    fx.commit_all("base again");
    // Other branches and tags, one of each kind.
    fx.git(&["branch", "other", "HEAD~1"]);
    fx.git(&["tag", "v1", "HEAD~1"]);
    fx.git(&["tag", "-a", "v2", "-m", "two", "HEAD~2"]);
    // The user's stash, staged change, untracked, ignored and odd files.
    fx.write("f1", "stashed\n");
    fx.git(&["stash", "push", "-q", "-m", "user's"]);
    fx.write("f1", "staged\n");
    fx.git(&["add", "f1"]);
    fx.write("e.crlf", "a\nb\n");
    fx.write("u0.txt", "untracked\n");
    fx.write("x.secret", "API_KEY=x\n");
    fx.write("ign/y", "ignored\n");
    std::fs::create_dir(fx.root.join("empty")).unwrap();
    for (f, m) in [("f0", 0o600), ("d/f2", 0o755), ("u0.txt", 0o640)] {
        std::fs::set_permissions(fx.root.join(f), std::fs::Permissions::from_mode(m)).unwrap();
    }
    fx
}

type GitState = (
    String,
    String,
    String,
    String,
    Option<Vec<u8>>,
    Option<Vec<u8>>,
);

fn git_state(fx: &Fixture) -> GitState {
    let out = |args: &[&str]| {
        String::from_utf8_lossy(&git_cmd(&fx.root, args).output().unwrap().stdout).into_owned()
    };
    (
        out(&["symbolic-ref", "-q", "HEAD"]),
        out(&["rev-parse", "HEAD", "refs/heads/main"]),
        branches_and_tags(fx),
        out(&["rev-parse", "-q", "--verify", "refs/stash"]),
        std::fs::read(fx.root.join(".git/logs/refs/stash")).ok(),
        std::fs::read(fx.root.join(".git/index")).ok(),
    )
}

/// Every branch and tag with what it points at.
fn branches_and_tags(fx: &Fixture) -> String {
    fx.git(&[
        "for-each-ref",
        "--format=%(objectname) %(refname)",
        "refs/heads/",
        "refs/tags/",
    ])
}

fn split(tree: BTreeMap<Vec<u8>, Node>) -> (BTreeMap<Vec<u8>, Node>, BTreeMap<Vec<u8>, Node>) {
    let tree: BTreeMap<_, _> = tree.into_iter().filter(|(p, _)| !nested(p)).collect();
    tree.into_iter().partition(|(p, _)| !ignored(p))
}

proptest! {
    #![proptest_config(seeded_config(12))]

    #[test]
    fn revert_restores_the_checkpoint_exactly(
        steps in proptest::collection::vec(step(), 1..10),
        kept in 0u8..3,
    ) {
        let fx = start();
        let cpr = fx.checkpointer();
        // 1, 2: the checkpoint takes the snapshot a task's commit took just
        // before (`--commit task`); 2: with a file spectr wrote since (as
        // the completed status), added to it again.
        if kept > 0 {
            let guard = fx.root.join("f0");
            cpr.snapshot_tree_for_next(std::slice::from_ref(&guard)).unwrap();
            if kept == 2 {
                let tmp = fx.root.join("f0.new");
                std::fs::write(&tmp, "zero, then spectr's edit\n").unwrap();
                std::fs::rename(&tmp, &guard).unwrap();
            }
        }
        let (tree_before, _) = split(tree_state(&fx.root));
        let git_before = git_state(&fx);
        let cp = cpr.create(&cpr.ref_name("c", "1", 1)).unwrap();

        for s in &steps {
            apply(&fx, s);
        }
        let (agent_tree, agent_ignored) = split(tree_state(&fx.root));
        let agent_refs = branches_and_tags(&fx);
        let failed = cpr.failed_ref_name("c", "1", 1);
        let r = cpr.revert(&cp, &failed);
        prop_assert!(r.is_ok(), "{r:?} after {steps:?}");

        let (tree_after, ignored_after) = split(tree_state(&fx.root));
        prop_assert_eq!(&tree_after, &tree_before, "work tree after {:?}", steps);
        prop_assert_eq!(&ignored_after, &agent_ignored, "ignored files after {:?}", steps);
        prop_assert_eq!(git_state(&fx), git_before.clone(), "HEAD/branch/stash/index after {:?}", steps);

        // Branches and tags the attempt made or moved stay reachable.
        let before_refs = &git_before.2;
        for line in agent_refs.lines().filter(|l| !before_refs.contains(*l)) {
            let (oid, name) = line.split_once(' ').unwrap();
            if name == "refs/heads/main" {
                continue; // HEAD's branch: its commits are the failed ref's parents
            }
            let kept = format!("refs/spectr/ralph/@main/c/1/1/failed-refs/{}", &name["refs/".len()..]);
            let found = fx.git(&["rev-parse", &kept]);
            prop_assert_eq!(found.trim(), oid, "{} kept after {:?}", name, steps);
        }

        // The failed work is readable, and no secret went into it.
        let saved = git(&fx.root, &["ls-tree", "-r", "-z", "--name-only", &failed]);
        for path in saved.split('\0').filter(|p| !p.is_empty()) {
            prop_assert!(!ignored(path.as_bytes()), "{path} saved after {steps:?}");
        }
        for (path, node) in &agent_tree {
            if let Node::File { bytes, .. } = node {
                let name = String::from_utf8_lossy(path);
                let out = git_cmd(&fx.root, &["cat-file", "blob", &format!("{failed}:{name}")])
                    .output()
                    .unwrap();
                prop_assert_eq!(&out.stdout, bytes, "{} in the failed ref after {:?}", name, steps);
            }
        }
    }
}
