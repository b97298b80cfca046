//! Lane merge-back property test: two random change sets on disjoint files
//! (writes, deletions, executable bit, symlinks, nested directories), each
//! made in its own lane and merged back into the user's tree, then a second
//! task in the first lane after a refresh from the user's tree, give exactly
//! what applying them all in one tree gives (a third lane, a faithful copy of
//! the user's tree, is that reference). The user's HEAD, branch, index and
//! stash never change.
//!
//! CI runs a few seeded cases; `PROPTEST_CASES=200 cargo test --test
//! checkpoint_lanes_prop` runs many.

mod common;

use common::checkpoint::*;
use proptest::prelude::*;
use spectr::checkpoint::{Checkpointer, MergePlan};
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Lane A touches only these, lane B only their `b` twins: no file of one is
/// a folder of the other.
const A_PATHS: &[&str] = &["a0", "a1", "d/a2", "d/e/a3", "new/a4", "sa"];
const CONTENTS: &[&str] = &["", "x\n", "alpha\n", "a\r\nb\r\n", "no newline"];

#[derive(Clone, Debug)]
enum Op {
    Write(usize, usize),
    Delete(usize),
    Exec(usize, bool),
    Symlink(usize, u8),
}

fn op() -> impl Strategy<Value = Op> {
    let p = 0..A_PATHS.len();
    prop_oneof![
        4 => (p.clone(), 0..CONTENTS.len()).prop_map(|(a, b)| Op::Write(a, b)),
        2 => p.clone().prop_map(Op::Delete),
        2 => (p.clone(), any::<bool>()).prop_map(|(a, b)| Op::Exec(a, b)),
        1 => (p, 0u8..2).prop_map(|(a, b)| Op::Symlink(a, b)),
    ]
}

fn path(lane: char, i: usize) -> String {
    A_PATHS[i].replacen('a', &lane.to_string(), 1)
}

fn apply(root: &Path, lane: char, op: &Op) {
    let remove = |rel: &str| {
        let full = root.join(rel);
        if full.symlink_metadata().is_ok_and(|m| !m.is_dir()) {
            std::fs::remove_file(full).unwrap();
        }
    };
    match *op {
        Op::Write(i, c) => {
            let rel = path(lane, i);
            // Never through a symlink.
            remove(&rel);
            write(root, &rel, CONTENTS[c]);
        }
        Op::Delete(i) => remove(&path(lane, i)),
        Op::Exec(i, on) => {
            let full = root.join(path(lane, i));
            if full.symlink_metadata().is_ok_and(|m| m.is_file()) {
                let mode = if on { 0o755 } else { 0o644 };
                std::fs::set_permissions(full, std::fs::Permissions::from_mode(mode)).unwrap();
            }
        }
        Op::Symlink(i, t) => {
            let rel = path(lane, i);
            remove(&rel);
            let full = root.join(&rel);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::os::unix::fs::symlink(format!("nowhere-{t}"), full).unwrap();
        }
    }
}

/// A dirty user tree holding some of both lanes' paths.
fn start() -> Fixture {
    let fx = fixture();
    for p in ["a0", "d/a2", "d/e/a3", "b0", "d/b2", "d/e/b3", "other.txt"] {
        fx.write(p, &format!("{p} committed\n"));
    }
    fx.write("changes/c1/.ralph/.gitignore", "*\n");
    fx.commit_all("base");
    fx.write("a1", "untracked a1\n");
    fx.write("b1", "untracked b1\n");
    fx.write("d/a2", "user edit\n");
    fx.write("b0", "user edit\n");
    fx
}

fn files_only(root: &Path) -> BTreeMap<Vec<u8>, Node> {
    let mut state = tree_state(root);
    // Directories follow from the files; an emptied folder is tidied by a
    // merge but left by the agent's deletion in the reference lane.
    state.retain(|k, n| *n != Node::Dir && !k.starts_with(b"changes/c1/.ralph"));
    state
}

fn user_cp(fx: &Fixture) -> Checkpointer {
    fx.checkpointer()
        .with_excludes(vec![fx.root.join("changes/c1/.ralph")])
}

proptest! {
    #![proptest_config(seeded_config(5))]

    #[test]
    fn two_lanes_merged_back_equal_both_changes_applied_directly(
        a in proptest::collection::vec(op(), 1..8),
        b in proptest::collection::vec(op(), 1..8),
        a2 in proptest::collection::vec(op(), 1..6),
    ) {
        let fx = start();
        let cp = user_cp(&fx);
        let head = fx.git(&["rev-parse", "HEAD"]).trim().to_owned();
        let index = fx.index_bytes();
        let base = cp.snapshot_tree().unwrap();
        let lanes = fx.root.join("changes/c1/.ralph/lanes");
        let open = |name: &str| cp.open_lane(&lanes.join(name), &base, Some(&head)).unwrap();
        let (la, lb, reference) = (open("a"), open("b"), open("ref"));
        prop_assert_eq!(files_only(&reference.path), files_only(&fx.root));

        for o in &a {
            apply(&la.path, 'a', o);
            apply(&reference.path, 'a', o);
        }
        for o in &b {
            apply(&lb.path, 'b', o);
            apply(&reference.path, 'b', o);
        }
        for (name, lane) in [("a", &la), ("b", &lb)] {
            let theirs = lane.checkpointer.snapshot_tree().unwrap();
            let refname = format!("refs/spectr/test/prop/{name}");
            let plan = cp.plan_merge(&base, &theirs, &refname, &[] as &[PathBuf]).unwrap();
            prop_assert!(
                !matches!(plan, MergePlan::Conflict { .. }),
                "{:?} after a={:?} b={:?}", plan, a, b
            );
            cp.apply_merge(&plan).unwrap();
        }
        prop_assert_eq!(files_only(&fx.root), files_only(&reference.path), "a={:?} b={:?}", a, b);

        // Lane A's next task starts from your tree (B's work included).
        let now = cp.snapshot_tree().unwrap();
        la.reset_to(&now, Some(&head), Some("refs/spectr/test/prop/kept")).unwrap();
        prop_assert_eq!(files_only(&la.path), files_only(&fx.root), "reset after a={:?} b={:?}", a, b);
        for o in &a2 {
            apply(&la.path, 'a', o);
            apply(&reference.path, 'a', o);
        }
        let theirs = la.checkpointer.snapshot_tree().unwrap();
        let plan = cp.plan_merge(&now, &theirs, "refs/spectr/test/prop/a2", &[] as &[PathBuf]).unwrap();
        cp.apply_merge(&plan).unwrap();
        prop_assert_eq!(files_only(&fx.root), files_only(&reference.path), "a={:?} b={:?} a2={:?}", a, b, a2);
        prop_assert_eq!(fx.git(&["rev-parse", "HEAD"]).trim().to_owned(), head);
        prop_assert_eq!(fx.git(&["symbolic-ref", "HEAD"]), "refs/heads/main\n");
        prop_assert_eq!(fx.index_bytes(), index);

        for name in ["a", "b", "ref"] {
            cp.remove_lane(&lanes.join(name), &format!("refs/spectr/test/kept/{name}")).unwrap();
        }
        prop_assert_eq!(fx.git(&["worktree", "list", "--porcelain"]).matches("worktree ").count(), 1);
    }
}
