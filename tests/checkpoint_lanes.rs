//! Parallel lanes, git layer: linked worktrees filled from the user's tree,
//! reset, merged back with a three-way merge, removed; the user's HEAD,
//! branch, index and stash never change.

mod common;

use common::checkpoint::*;
use spectr::checkpoint::{CheckpointError, Checkpointer, LaneTree, MergePlan};
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

const TASKS: &str = "changes/c1/tasks.md";

/// The user's repository state a lane must never change.
#[derive(Debug, PartialEq, Eq)]
struct UserGit {
    head: String,
    branch: String,
    index: Option<Vec<u8>>,
    stash: String,
}

fn user_git(fx: &Fixture) -> UserGit {
    UserGit {
        head: fx.git(&["rev-parse", "HEAD"]),
        branch: fx.git(&["symbolic-ref", "HEAD"]),
        index: fx.index_bytes(),
        stash: fx.git(&["stash", "list", "--format=%H %gs"]),
    }
}

/// A dirty user tree: modified, deleted, untracked, executable, symlink,
/// nested directories, ignored files, a stash entry, the loop's files and
/// the change's `.ralph/` folder (ignored by its own `.gitignore`).
fn dirty() -> Fixture {
    let fx = populated();
    fx.write(TASKS, "- [ ] 1.1 one\n- [ ] 2.1 two\n");
    fx.write("changes/c1/.ralph/.gitignore", "*\n");
    fx.commit_all("tasks");
    fx.write("a.txt", "stashed\n");
    fx.git(&["stash", "push", "-q"]);
    fx.write("a.txt", "alpha\nuser edit\n");
    std::fs::remove_file(fx.root.join("b.txt")).unwrap();
    std::fs::set_permissions(
        fx.root.join("script.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    std::os::unix::fs::symlink("a.txt", fx.root.join("link")).unwrap();
    fx.write("deep/x/y/z.txt", "nested\n");
    fx.write("deep/x/build.log", "ignored\n");
    fx
}

fn lanes_dir(fx: &Fixture) -> PathBuf {
    fx.root.join("changes/c1/.ralph/lanes")
}

/// The loop's own files, as a run excludes them (its state folder holds the lanes).
fn user_cp(fx: &Fixture) -> Checkpointer {
    let mut excludes = loop_excludes(fx);
    excludes.push(fx.root.join("changes/c1/.ralph"));
    fx.checkpointer().with_excludes(excludes)
}

fn head(fx: &Fixture) -> String {
    fx.git(&["rev-parse", "HEAD"]).trim().to_owned()
}

/// The user's work tree as a lane should hold it: without ignored files, the
/// loop's files and the lanes folder.
fn user_content(fx: &Fixture) -> BTreeMap<Vec<u8>, Node> {
    let mut state = tree_state(&fx.root);
    state.retain(|k, _| {
        !(k.starts_with(b".ralph") || k.starts_with(b"changes/c1/.ralph") || k.ends_with(b".log"))
    });
    state
}

fn lane_content(lane: &LaneTree) -> BTreeMap<Vec<u8>, Node> {
    tree_state(&lane.path)
}

fn open(fx: &Fixture, cp: &Checkpointer, name: &str) -> (LaneTree, String) {
    let tree = cp.snapshot_tree().unwrap();
    let lane = cp
        .open_lane(&lanes_dir(fx).join(name), &tree, Some(&head(fx)))
        .unwrap();
    (lane, tree)
}

fn worktrees(fx: &Fixture) -> usize {
    fx.git(&["worktree", "list", "--porcelain"])
        .lines()
        .filter(|l| l.starts_with("worktree "))
        .count()
}

fn status_without_loop_files(root: &Path) -> String {
    git(root, &["status", "--porcelain=v1", "-uall"])
        .lines()
        .filter(|l| !l.contains(".ralph/"))
        .map(|l| format!("{l}\n"))
        .collect()
}

#[test]
fn a_lane_opens_with_the_users_exact_content_and_status() {
    let fx = dirty();
    let before = user_git(&fx);
    let cp = user_cp(&fx);
    let (lane, _) = open(&fx, &cp, "l1");

    assert_eq!(lane_content(&lane), user_content(&fx));
    assert!(!lane.path.join("deep/x/build.log").exists(), "ignored");
    assert!(!lane.path.join(".ralph").exists(), "loop files");
    assert_eq!(
        status_without_loop_files(&lane.path),
        status_without_loop_files(&fx.root)
    );
    assert_eq!(
        git(&lane.path, &["rev-parse", "HEAD"]).trim(),
        head(&fx),
        "lane HEAD at the user's commit"
    );
    assert!(
        !git_cmd(&lane.path, &["symbolic-ref", "-q", "HEAD"])
            .status()
            .unwrap()
            .success(),
        "lane HEAD detached"
    );
    assert_eq!(user_git(&fx), before);
    // The user's status does not show the lanes (ignored folder).
    assert!(!fx.status().contains("lanes"), "{}", fx.status());
}

#[test]
fn lanes_need_a_commit() {
    let fx = fixture();
    fx.write("a.txt", "a\n");
    let cp = fx.checkpointer();
    let tree = cp.snapshot_tree().unwrap();
    let err = cp
        .open_lane(&fx.root.join(".ralph/lanes/l1"), &tree, None)
        .unwrap_err();
    assert!(matches!(err, CheckpointError::LanesNeedCommit), "{err}");
    assert!(err.to_string().contains("at least one commit"), "{err}");
}

#[test]
fn reset_to_restores_exact_content_and_keeps_the_lanes_commits() {
    let fx = dirty();
    let cp = user_cp(&fx);
    let (lane, _) = open(&fx, &cp, "l1");
    let before = user_git(&fx);

    // The agent edits, adds, deletes, chmods and commits in the lane.
    write(&lane.path, "a.txt", "agent\n");
    write(&lane.path, "new/file.txt", "agent new\n");
    std::fs::remove_file(lane.path.join("dir/c.txt")).unwrap();
    std::fs::set_permissions(
        lane.path.join("script.sh"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    git(&lane.path, &["add", "-A"]);
    git(&lane.path, &["commit", "-q", "-m", "agent commit"]);
    let agent_commit = git(&lane.path, &["rev-parse", "HEAD"]).trim().to_owned();
    write(&lane.path, "later.txt", "uncommitted\n");
    write(&lane.path, "junk.log", "ignored in lane\n");

    // Meanwhile the user changed their tree.
    fx.write("dir/c.txt", "gamma\nuser again\n");
    let tree = cp.snapshot_tree().unwrap();
    let keep = "refs/spectr/test/lane-kept";
    let reset = lane.reset_to(&tree, Some(&head(&fx)), Some(keep)).unwrap();

    assert_eq!(reset.kept_commits.as_deref(), Some(keep));
    let mut lane_now = lane_content(&lane);
    assert_eq!(
        lane_now.remove(&b"junk.log"[..]),
        Some(Node::File {
            bytes: b"ignored in lane\n".to_vec(),
            mode: 0o644
        }),
        "ignored files in the lane stay"
    );
    assert_eq!(lane_now, user_content(&fx));
    assert!(
        reset.files_written >= 3 && reset.files_removed >= 2,
        "{reset:?}"
    );
    assert!(fx.git_ok(&["merge-base", "--is-ancestor", &agent_commit, keep]));
    assert_eq!(git(&lane.path, &["rev-parse", "HEAD"]).trim(), head(&fx));
    assert_eq!(
        status_without_loop_files(&lane.path),
        status_without_loop_files(&fx.root)
    );
    assert_eq!(user_git(&fx), before);

    // A reset with nothing changed writes nothing and keeps nothing.
    let again = lane.reset_to(&tree, Some(&head(&fx)), Some(keep)).unwrap();
    assert_eq!((again.files_written, again.files_removed), (0, 0));
    assert_eq!(again.kept_commits, None);
}

/// Opens a lane, lets `work` change it, and plans its merge into the user's tree.
fn lane_change(
    fx: &Fixture,
    cp: &Checkpointer,
    name: &str,
    work: impl FnOnce(&Path),
) -> (String, String) {
    let (lane, base) = open(fx, cp, name);
    work(&lane.path);
    let theirs = lane.checkpointer.snapshot_tree().unwrap();
    (base, theirs)
}

fn plan(cp: &Checkpointer, base: &str, theirs: &str, name: &str) -> MergePlan {
    cp.plan_merge(
        base,
        theirs,
        &format!("refs/spectr/test/merge/{name}"),
        &[PathBuf::from(TASKS)],
    )
    .unwrap()
}

#[test]
fn disjoint_lane_changes_merge_into_the_users_tree() {
    let fx = dirty();
    let cp = user_cp(&fx);
    let before = user_git(&fx);
    let (base_a, theirs_a) = lane_change(&fx, &cp, "a", |p| {
        write(p, "a.txt", "alpha\nuser edit\nlane a\n");
        write(p, "added/by_a.txt", "new from a\n");
    });
    let (base_b, theirs_b) = lane_change(&fx, &cp, "b", |p| {
        write(p, "dir/c.txt", "gamma from b\n");
        std::fs::remove_file(p.join("untracked.txt")).unwrap();
        std::fs::set_permissions(p.join("dir/c.txt"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
    });
    // What applying both directly gives.
    let mut expected = user_content(&fx);
    expected.insert(
        b"a.txt".to_vec(),
        Node::File {
            bytes: b"alpha\nuser edit\nlane a\n".to_vec(),
            mode: 0o644,
        },
    );
    expected.insert(b"added".to_vec(), Node::Dir);
    expected.insert(
        b"added/by_a.txt".to_vec(),
        Node::File {
            bytes: b"new from a\n".to_vec(),
            mode: 0o644,
        },
    );
    expected.insert(
        b"dir/c.txt".to_vec(),
        Node::File {
            bytes: b"gamma from b\n".to_vec(),
            mode: 0o755,
        },
    );
    expected.remove(&b"untracked.txt"[..]);

    let plan_a = plan(&cp, &base_a, &theirs_a, "a");
    let MergePlan::Clean { changes, .. } = &plan_a else {
        panic!("{plan_a:?}")
    };
    assert_eq!(changes.len(), 2);
    assert_eq!(
        cp.apply_merge(&plan_a).unwrap(),
        ["a.txt", "added/by_a.txt"]
    );
    let plan_b = plan(&cp, &base_b, &theirs_b, "b");
    assert_eq!(
        cp.apply_merge(&plan_b).unwrap(),
        ["dir/c.txt", "untracked.txt"]
    );

    assert_eq!(user_content(&fx), expected);
    assert_eq!(user_git(&fx), before);
}

#[test]
fn the_same_line_edited_by_two_lanes_is_a_conflict_and_writes_nothing() {
    let fx = dirty();
    let cp = user_cp(&fx);
    let (base_a, theirs_a) =
        lane_change(&fx, &cp, "a", |p| write(p, "a.txt", "from a\nuser edit\n"));
    let (base_b, theirs_b) =
        lane_change(&fx, &cp, "b", |p| write(p, "a.txt", "from b\nuser edit\n"));
    let plan_a = plan(&cp, &base_a, &theirs_a, "a");
    cp.apply_merge(&plan_a).unwrap();
    let before = (user_content(&fx), user_git(&fx));

    let plan_b = plan(&cp, &base_b, &theirs_b, "b");
    let MergePlan::Conflict { files, messages } = &plan_b else {
        panic!("{plan_b:?}")
    };
    assert_eq!(files, &["a.txt"]);
    assert!(messages.iter().any(|m| m.contains("a.txt")), "{messages:?}");
    assert!(cp.apply_merge(&plan_b).unwrap().is_empty());
    assert_eq!((user_content(&fx), user_git(&fx)), before);
    assert!(!fx.git_ok(&["rev-parse", "-q", "--verify", "refs/spectr/test/merge/b"]));
}

#[test]
fn a_file_edited_between_plan_and_apply_stops_the_merge() {
    let fx = dirty();
    let cp = user_cp(&fx);
    let (base, theirs) = lane_change(&fx, &cp, "a", |p| {
        write(p, "a.txt", "alpha\nuser edit\nlane\n");
        write(p, "dir/c.txt", "lane c\n");
    });
    let plan_a = plan(&cp, &base, &theirs, "a");
    fx.write("dir/c.txt", "a person typed here\n");
    let before = user_content(&fx);
    let err = cp.apply_merge(&plan_a).unwrap_err();
    assert!(
        matches!(&err, CheckpointError::ChangedDuringMerge { path } if path == "dir/c.txt"),
        "{err}"
    );
    assert_eq!(user_content(&fx), before, "nothing written");

    // A file the merge would add, created by a person meanwhile; and one
    // the merge would delete, edited meanwhile.
    let (base, theirs) = lane_change(&fx, &cp, "b", |p| {
        write(p, "brand-new.txt", "lane\n");
        std::fs::remove_file(p.join("untracked.txt")).unwrap();
    });
    let plan_b = plan(&cp, &base, &theirs, "b");
    fx.write("brand-new.txt", "person\n");
    let err = cp.apply_merge(&plan_b).unwrap_err();
    assert!(
        matches!(&err, CheckpointError::ChangedDuringMerge { path } if path == "brand-new.txt"),
        "{err}"
    );
    std::fs::remove_file(fx.root.join("brand-new.txt")).unwrap();
    fx.write("untracked.txt", "person again\n");
    let err = cp.apply_merge(&plan_b).unwrap_err();
    assert!(
        matches!(&err, CheckpointError::ChangedDuringMerge { path } if path == "untracked.txt"),
        "{err}"
    );
    assert_eq!(fx.read("untracked.txt").as_deref(), Some("person again\n"));
    assert!(!fx.exists("brand-new.txt"));
}

#[test]
fn skipped_paths_are_never_merged_nor_conflicts() {
    let fx = dirty();
    let cp = user_cp(&fx);
    let (base, theirs) = lane_change(&fx, &cp, "a", |p| {
        write(p, TASKS, "- [x] 1.1 one\n- [ ] 2.1 two\n");
        write(p, "a.txt", "alpha\nuser edit\nlane\n");
    });
    fx.write(TASKS, "- [ ] 1.1 one\n- [x] 2.1 two\n");
    let plan = plan(&cp, &base, &theirs, "a");
    let MergePlan::Clean { changes, .. } = &plan else {
        panic!("{plan:?}")
    };
    assert_eq!(
        changes.iter().map(|c| c.path.as_str()).collect::<Vec<_>>(),
        ["a.txt"]
    );
    assert_eq!(cp.apply_merge(&plan).unwrap(), ["a.txt"]);
    assert_eq!(fx.read(TASKS).unwrap(), "- [ ] 1.1 one\n- [x] 2.1 two\n");

    // Only the tasks file changed: nothing to merge, no checkpoint.
    let (base, theirs) = lane_change(&fx, &cp, "b", |p| write(p, TASKS, "other\n"));
    assert_eq!(plan_only(&cp, &base, &theirs, "b"), MergePlan::Nothing);
    assert!(!fx.git_ok(&["rev-parse", "-q", "--verify", "refs/spectr/test/merge/b"]));
    assert_eq!(plan_only(&cp, &base, &base, "c"), MergePlan::Nothing);
}

fn plan_only(cp: &Checkpointer, base: &str, theirs: &str, name: &str) -> MergePlan {
    plan(cp, base, theirs, name)
}

#[test]
fn reverting_the_plans_checkpoint_undoes_an_applied_merge() {
    let fx = dirty();
    let cp = user_cp(&fx);
    let (base, theirs) = lane_change(&fx, &cp, "a", |p| {
        write(p, "a.txt", "alpha\nuser edit\nlane\n");
        std::fs::remove_file(p.join("link")).unwrap();
        write(p, "z/new.txt", "z\n");
        std::fs::set_permissions(p.join("script.sh"), std::fs::Permissions::from_mode(0o644))
            .unwrap();
    });
    let before = (tree_state(&fx.root), user_git(&fx));
    let plan = plan(&cp, &base, &theirs, "a");
    let written = cp.apply_merge(&plan).unwrap();
    assert_eq!(written, ["a.txt", "link", "script.sh", "z/new.txt"]);
    assert!(!is_executable(&fx.root.join("script.sh")));
    assert!(!fx.exists("link"));
    let MergePlan::Clean { checkpoint, .. } = &plan else {
        panic!()
    };
    cp.revert(checkpoint, "refs/spectr/test/merge/a-failed")
        .unwrap();
    assert_eq!((tree_state(&fx.root), user_git(&fx)), before);
}

#[test]
fn removing_a_lane_keeps_its_work_and_leaves_no_worktree() {
    let fx = dirty();
    let cp = user_cp(&fx);
    let (lane, _) = open(&fx, &cp, "l1");
    assert_eq!(worktrees(&fx), 2);
    // Opening it again reuses the worktree and resets it.
    write(&lane.path, "a.txt", "scratch\n");
    let (again, _) = open(&fx, &cp, "l1");
    assert_eq!((again.path.clone(), worktrees(&fx)), (lane.path.clone(), 2));
    assert_eq!(lane_content(&again), user_content(&fx));
    write(&lane.path, "a.txt", "lane work\n");
    let keep = "refs/spectr/test/removed/l1";
    cp.remove_lane(&lane.path, keep).unwrap();
    assert!(!lane.path.exists());
    assert_eq!(worktrees(&fx), 1);
    assert_eq!(fx.git(&["show", &format!("{keep}:a.txt")]), "lane work\n");
    // Again: already gone is fine.
    cp.remove_lane(&lane.path, keep).unwrap();

    // An unchanged lane keeps nothing.
    let (lane, _) = open(&fx, &cp, "l2");
    cp.remove_lane(&lane.path, "refs/spectr/test/removed/l2")
        .unwrap();
    assert!(!fx.git_ok(&["rev-parse", "-q", "--verify", "refs/spectr/test/removed/l2"]));
    assert_eq!(worktrees(&fx), 1);
}

#[test]
fn stale_lanes_are_kept_and_removed_after_a_crash() {
    let fx = dirty();
    let cp = user_cp(&fx);
    let (l1, _) = open(&fx, &cp, "l1");
    let (_l2, _) = open(&fx, &cp, "l2");
    write(&l1.path, "a.txt", "crashed work\n");
    write(&lanes_dir(&fx), "junk/file.txt", "leftover\n");
    let names = cp
        .remove_stale_lanes(&lanes_dir(&fx), "refs/spectr/test/stale")
        .unwrap();
    assert_eq!(names, ["junk", "l1", "l2"]);
    assert_eq!(worktrees(&fx), 1);
    assert!(std::fs::read_dir(lanes_dir(&fx)).unwrap().next().is_none());
    assert_eq!(
        fx.git(&["show", "refs/spectr/test/stale/l1:a.txt"]),
        "crashed work\n"
    );
    assert_eq!(
        fx.git(&["show", "refs/spectr/test/stale/junk:file.txt"]),
        "leftover\n"
    );
}

#[test]
fn lanes_outside_the_tree_are_swept_from_their_owned_folder_only() {
    let fx = dirty();
    let cp = user_cp(&fx);
    let outside = fx.root.parent().unwrap().join("cache/lanes/c1");
    let tree = cp.snapshot_tree().unwrap();
    let l1 = cp
        .open_lane(&outside.join("lane-1"), &tree, Some(&head(&fx)))
        .unwrap();
    write(&l1.path, "a.txt", "crashed work\n");
    // A folder a crash left before its worktree was registered, and a
    // folder of somebody else's next to the owned one.
    write(&outside, "lane-2/half.txt", "half\n");
    let foreign = fx.root.parent().unwrap().join("cache/lanes/other");
    write(&foreign, "lane-1/theirs.txt", "theirs\n");
    // Another work tree never takes over the owned folder.
    let twin = fx.root.parent().unwrap().join("twin");
    fx.git(&["worktree", "add", "-q", "--detach", twin.to_str().unwrap()]);
    let twin_cp = Checkpointer::discover(&twin, std::time::Duration::from_secs(30))
        .unwrap()
        .unwrap();
    let refused = twin_cp.open_lane(
        &outside.join("lane-9"),
        &twin_cp.snapshot_tree().unwrap(),
        Some(&head(&fx)),
    );
    assert!(
        matches!(refused, Err(CheckpointError::Lane { .. })),
        "{refused:?}"
    );
    // A folder that already holds something is never claimed.
    let crowded = fx.root.parent().unwrap().join("crowded");
    write(&crowded, "mine/file.txt", "someone's\n");
    let l3 = cp
        .open_lane(&crowded.join("lane-3"), &tree, Some(&head(&fx)))
        .unwrap();
    cp.remove_lane(&l3.path, "refs/spectr/test/l3").unwrap();
    assert!(
        cp.remove_stale_lanes(&crowded, "refs/spectr/test/stale")
            .unwrap()
            .is_empty()
    );
    assert!(
        crowded.join("mine/file.txt").exists(),
        "not ours: left alone"
    );

    assert!(
        cp.remove_stale_lanes(&foreign, "refs/spectr/test/stale")
            .unwrap()
            .is_empty()
    );
    assert!(
        foreign.join("lane-1/theirs.txt").exists(),
        "not ours: left alone"
    );
    let names = cp
        .remove_stale_lanes(&outside, "refs/spectr/test/stale")
        .unwrap();
    assert_eq!(names, ["lane-1", "lane-2"]);
    assert!(!outside.exists(), "the emptied owned folder is removed");
    assert_eq!(
        fx.git(&["show", "refs/spectr/test/stale/lane-1:a.txt"]),
        "crashed work\n"
    );
    assert_eq!(
        fx.git(&["show", "refs/spectr/test/stale/lane-2:half.txt"]),
        "half\n"
    );
    assert_eq!(worktrees(&fx), 2, "the user's and the twin");
}

#[test]
fn checkpoints_inside_a_lane_revert_without_moving_any_branch() {
    let fx = dirty();
    let cp = user_cp(&fx);
    let (lane, _) = open(&fx, &cp, "l1");
    let before_user = (user_content(&fx), user_git(&fx));
    let lcp = &lane.checkpointer;
    let before = lane_content(&lane);
    let c = lcp.create(&lcp.ref_name("c1", "1.1", 1)).unwrap();
    assert!(c.refname.contains(&format!("@{}/", lcp.worktree_name())));
    assert_eq!(c.branch, None);
    write(&lane.path, "a.txt", "agent\n");
    write(&lane.path, "b2.txt", "agent\n");
    git(&lane.path, &["add", "-A"]);
    git(&lane.path, &["commit", "-q", "-m", "agent"]);
    git(&lane.path, &["stash", "list"]);
    lcp.revert(&c, &lcp.failed_ref_name("c1", "1.1", 1))
        .unwrap();
    assert_eq!(lane_content(&lane), before);
    assert_eq!(git(&lane.path, &["rev-parse", "HEAD"]).trim(), head(&fx));
    assert_eq!((user_content(&fx), user_git(&fx)), before_user);
}

#[test]
fn the_users_checkpoints_never_touch_a_lane() {
    let fx = dirty();
    let cp = user_cp(&fx);
    let (lane, _) = open(&fx, &cp, "l1");
    write(&lane.path, "a.txt", "lane work\n");
    let lane_before = lane_content(&lane);
    let c = cp.create("refs/spectr/test/user-cp").unwrap();
    let files = fx.git(&["ls-tree", "-r", "--name-only", &c.commit]);
    assert!(!files.contains(".ralph"), "{files}");
    fx.write("a.txt", "user attempt\n");
    cp.revert(&c, "refs/spectr/test/user-failed").unwrap();
    assert_eq!(lane_content(&lane), lane_before);
    assert_eq!(worktrees(&fx), 2);
    assert!(!cp.snapshot_tree().unwrap().is_empty());
}

/// The lanes' folder is ignored only by its own `.gitignore` (`*`), like a
/// virtualenv: a revert of the user's tree must leave it alone even where
/// the loop's excludes do not cover it.
#[test]
fn a_revert_leaves_a_folder_that_ignores_itself_alone() {
    let fx = dirty();
    fx.write(".venv/.gitignore", "*\n");
    fx.write(".venv/lib/site.py", "venv\n");
    let cp = fx.checkpointer().with_excludes(loop_excludes(&fx));
    let (lane, _) = open(&fx, &cp, "l1");
    write(&lane.path, "a.txt", "lane work\n");
    let lane_before = lane_content(&lane);
    // Files older than the checkpoint's second were not made by the attempt.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let c = cp.create("refs/spectr/test/user-cp").unwrap();
    fx.write("a.txt", "attempt\n");
    fx.write("attempt-new.txt", "attempt\n");
    let r = cp.revert(&c, "refs/spectr/test/user-failed").unwrap();
    assert!(
        !fx.exists("attempt-new.txt"),
        "the attempt's file is removed"
    );
    assert_eq!(fx.read(".venv/lib/site.py").as_deref(), Some("venv\n"));
    assert_eq!(
        fx.read("changes/c1/.ralph/.gitignore").as_deref(),
        Some("*\n")
    );
    assert_eq!(lane_content(&lane), lane_before);
    assert!(
        r.notices.iter().any(|n| n.contains(".venv/lib/site.py")),
        "{r:?}"
    );
    // Not the attempt's work: not copied into the failed ref either.
    let saved = fx.git(&[
        "ls-tree",
        "-r",
        "--name-only",
        "refs/spectr/test/user-failed",
    ]);
    assert!(
        saved.contains("attempt-new.txt") && !saved.contains(".venv"),
        "{saved}"
    );
    assert_eq!(worktrees(&fx), 2);
}

#[test]
fn lane_removal_never_touches_folders_or_worktrees_that_are_not_lanes() {
    let fx = dirty();
    let cp = user_cp(&fx);
    let (lane, _) = open(&fx, &cp, "l1");
    // A worktree of the user's own, and ordinary folders.
    let own = fx.root.parent().unwrap().join("own-worktree");
    fx.git(&["worktree", "add", "-q", "--detach", own.to_str().unwrap()]);
    fx.write("src/sub/file.txt", "user\n");

    assert!(matches!(
        cp.remove_lane(&fx.root.join("src"), "refs/spectr/test/x"),
        Err(CheckpointError::Lane { .. })
    ));
    assert!(matches!(
        cp.remove_lane(&own, "refs/spectr/test/x"),
        Err(CheckpointError::Lane { .. })
    ));
    assert!(matches!(
        cp.open_lane(&own, &cp.snapshot_tree().unwrap(), Some(&head(&fx))),
        Err(CheckpointError::Lane { .. })
    ));
    // A misdirected clean-up removes only spectr's marked lanes.
    let names = cp
        .remove_stale_lanes(fx.root.parent().unwrap(), "refs/spectr/test/stale")
        .unwrap();
    assert_eq!(names, ["repo/changes/c1/.ralph/lanes/l1"]);
    assert!(!lane.path.exists());
    let names = cp
        .remove_stale_lanes(&fx.root, "refs/spectr/test/stale")
        .unwrap();
    assert!(names.is_empty(), "{names:?}");
    assert_eq!(fx.read("src/sub/file.txt").as_deref(), Some("user\n"));
    assert!(fx.exists(".ralph/session.json"));
    assert!(fx.exists("changes/c1/.ralph/.gitignore"));
    assert!(own.join("a.txt").exists());
    assert_eq!(worktrees(&fx), 2);
}

#[test]
fn reset_to_undoes_an_agents_ignore_rules_and_leftover_git_state() {
    let fx = dirty();
    let cp = user_cp(&fx);
    let (lane, tree) = open(&fx, &cp, "l1");
    let expected = lane_content(&lane);
    // The agent hides a new file behind its own ignore rule, stages files,
    // leaves a merge in progress and a killed git's index lock.
    write(&lane.path, ".gitignore", "*.log\n*.hidden\n");
    write(&lane.path, "secret.hidden", "agent\n");
    git(&lane.path, &["add", "-A"]);
    let git_dir = git(&lane.path, &["rev-parse", "--absolute-git-dir"]);
    let git_dir = PathBuf::from(git_dir.trim());
    std::fs::write(git_dir.join("MERGE_HEAD"), format!("{}\n", head(&fx))).unwrap();
    std::fs::write(git_dir.join("index.lock"), b"").unwrap();

    let reset = lane.reset_to(&tree, Some(&head(&fx)), None).unwrap();
    assert_eq!(lane_content(&lane), expected);
    assert!(!git_dir.join("MERGE_HEAD").exists());
    assert!(!git_dir.join("index.lock").exists());
    assert!(!reset.notices.is_empty(), "{reset:?}");
    assert_eq!(
        status_without_loop_files(&lane.path),
        status_without_loop_files(&fx.root)
    );
    // The lane's next checkpoint is not refused.
    lane.checkpointer
        .create("refs/spectr/test/lane-cp")
        .unwrap();
}

#[test]
fn lanes_and_plans_can_move_to_worker_threads() {
    fn send_sync<T: Send + Sync + 'static>() {}
    send_sync::<LaneTree>();
    send_sync::<MergePlan>();
    send_sync::<spectr::checkpoint::LaneReset>();
}

/// A user tree with `.gitattributes` (committed, so every lane has it) and a
/// ten-line `notes.md`, and the merge of two lanes each editing it: `a`
/// merged first, then `b` planned.
fn two_lanes_on_notes(
    attributes: &str,
    config: &[(&str, &str)],
    edit_a: &str,
    edit_b: &str,
) -> (Fixture, Checkpointer, MergePlan) {
    let (fx, cp, base_b, theirs_b) =
        two_lanes_on_notes_merged_a(attributes, config, edit_a, edit_b);
    let plan_b = plan(&cp, &base_b, &theirs_b, "b");
    (fx, cp, plan_b)
}

/// [`two_lanes_on_notes`] up to `a` merged: `b`'s base and tree.
fn two_lanes_on_notes_merged_a(
    attributes: &str,
    config: &[(&str, &str)],
    edit_a: &str,
    edit_b: &str,
) -> (Fixture, Checkpointer, String, String) {
    let fx = populated();
    fx.write(".gitattributes", attributes);
    let lines: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    fx.write("notes.md", &lines);
    fx.commit_all("attributes");
    for (key, value) in config {
        fx.git(&["config", key, value]);
    }
    let cp = user_cp(&fx);
    let (base_a, theirs_a) = lane_change(&fx, &cp, "a", |p| write(p, "notes.md", edit_a));
    let (base_b, theirs_b) = lane_change(&fx, &cp, "b", |p| write(p, "notes.md", edit_b));
    let plan_a = plan(&cp, &base_a, &theirs_a, "a");
    cp.apply_merge(&plan_a).unwrap();
    (fx, cp, base_b, theirs_b)
}

fn notes_with(first: &str, last: &str) -> String {
    let mut s = String::new();
    for i in 1..=10 {
        match i {
            1 if !first.is_empty() => s.push_str(first),
            _ => s.push_str(&format!("line {i}\n")),
        }
    }
    s.push_str(last);
    s
}

#[test]
fn merge_union_in_gitattributes_keeps_both_lanes_lines_without_a_conflict() {
    let a = notes_with("", "- note from task a\n");
    let b = notes_with("", "- note from task b\n");
    let (fx, cp, plan_b) = two_lanes_on_notes("notes.md merge=union\n", &[], &a, &b);
    let MergePlan::Clean { changes, .. } = &plan_b else {
        panic!("{plan_b:?}")
    };
    assert_eq!(changes.len(), 1);
    assert_eq!(cp.apply_merge(&plan_b).unwrap(), ["notes.md"]);
    assert_eq!(
        fx.read("notes.md").unwrap(),
        notes_with("", "- note from task a\n- note from task b\n")
    );
}

#[test]
fn merge_binary_in_gitattributes_makes_any_two_sided_change_a_conflict() {
    for attributes in ["notes.md merge=binary\n", "notes.md -merge\n"] {
        // Lines far apart: a text merge would be clean.
        let a = notes_with("line 1 from a\n", "");
        let b = notes_with("", "line 11 from b\n");
        let (fx, cp, plan_b) = two_lanes_on_notes(attributes, &[], &a, &b);
        let MergePlan::Conflict { files, messages } = &plan_b else {
            panic!("{attributes}: {plan_b:?}")
        };
        assert_eq!(files, &["notes.md"], "{attributes}");
        assert!(
            messages.iter().any(|m| m.contains("notes.md")),
            "{messages:?}"
        );
        assert!(cp.apply_merge(&plan_b).unwrap().is_empty());
        assert_eq!(fx.read("notes.md").unwrap(), a, "{attributes}: ours kept");
    }
    // A resolve attempt's tree keeps ours too, as git's binary driver
    // does: no markers, and not the text merge git made in its place.
    let a = notes_with("line 1 from a\n", "");
    for b in [
        notes_with("", "line 11 from b\n"),
        notes_with("from b\n", ""),
    ] {
        let (fx, cp, base_b, theirs_b) =
            two_lanes_on_notes_merged_a("notes.md merge=binary\n", &[], &a, &b);
        let ours = cp.snapshot_tree().unwrap();
        let remerged = cp
            .merge_with_markers(&base_b, &ours, &theirs_b, &[PathBuf::from(TASKS)])
            .unwrap()
            .unwrap();
        assert_eq!(remerged.conflicted, ["notes.md"]);
        let merged = fx.git(&["show", &format!("{}:notes.md", remerged.tree)]);
        assert_eq!(merged, a, "ours kept in the resolve attempt's tree");
    }
}

#[test]
fn merge_text_in_gitattributes_is_the_line_merge_as_with_no_rule() {
    for attributes in ["notes.md merge=text\n", "notes.md merge\n", ""] {
        // Lines far apart: clean, both kept.
        let a = notes_with("line 1 from a\n", "");
        let b = notes_with("", "line 11 from b\n");
        let (fx, cp, plan_b) = two_lanes_on_notes(attributes, &[], &a, &b);
        let MergePlan::Clean { notes, .. } = &plan_b else {
            panic!("{attributes:?}: {plan_b:?}")
        };
        assert!(notes.is_empty(), "{attributes:?}: {notes:?}");
        cp.apply_merge(&plan_b).unwrap();
        assert_eq!(
            fx.read("notes.md").unwrap(),
            notes_with("line 1 from a\n", "line 11 from b\n"),
            "{attributes:?}"
        );
        // The same line: a conflict, with markers in a resolve attempt.
        let a = notes_with("from a\n", "");
        let b = notes_with("from b\n", "");
        let (fx, cp, base_b, theirs_b) = two_lanes_on_notes_merged_a(attributes, &[], &a, &b);
        let plan_b = plan(&cp, &base_b, &theirs_b, "b");
        let MergePlan::Conflict { files, .. } = &plan_b else {
            panic!("{attributes:?}: {plan_b:?}")
        };
        assert_eq!(files, &["notes.md"]);
        let ours = cp.snapshot_tree().unwrap();
        let remerged = cp
            .merge_with_markers(&base_b, &ours, &theirs_b, &[PathBuf::from(TASKS)])
            .unwrap()
            .unwrap();
        let text = fx.git(&["show", &format!("{}:notes.md", remerged.tree)]);
        assert!(
            text.contains("<<<<<<< ") && text.contains("from a\n=======\nfrom b\n"),
            "{attributes:?}: {text}"
        );
    }
}

#[test]
fn a_merge_driver_from_the_repository_config_never_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let ran = tmp.path().join("ran");
    let touch = format!("touch {} && false", ran.display());
    let config = [
        ("merge.planted.driver", touch.as_str()),
        ("merge.union.driver", touch.as_str()),
        ("merge.default", "planted"),
    ];
    // A named driver: merged as text (lines far apart merge cleanly).
    let a = notes_with("line 1 from a\n", "");
    let b = notes_with("", "line 11 from b\n");
    let (fx, cp, plan_b) = two_lanes_on_notes("notes.md merge=planted\n", &config, &a, &b);
    let MergePlan::Clean { notes, .. } = &plan_b else {
        panic!("{plan_b:?}")
    };
    assert!(
        notes.iter().any(|n| n.driver == "planted"
            && n.path == "notes.md"
            && n.to_string().contains("never runs")),
        "{notes:?}"
    );
    cp.apply_merge(&plan_b).unwrap();
    assert_eq!(
        fx.read("notes.md").unwrap(),
        notes_with("line 1 from a\n", "line 11 from b\n")
    );
    assert!(!ran.exists(), "the planted driver ran");

    // The same line: a text conflict, still without running it.
    let a = notes_with("from a\n", "");
    let b = notes_with("from b\n", "");
    let (_fx, _cp, plan_b) = two_lanes_on_notes("notes.md merge=planted\n", &config, &a, &b);
    assert!(matches!(plan_b, MergePlan::Conflict { .. }), "{plan_b:?}");
    assert!(!ran.exists(), "the planted driver ran");

    // `merge=union` is git's own union even where the config names a `union` driver;
    // a path with no attribute (merge.default) and `.git/info/attributes` run nothing either.
    let a = notes_with("", "- a\n");
    let b = notes_with("", "- b\n");
    let (fx, cp, plan_b) = two_lanes_on_notes("notes.md merge=union\n", &config, &a, &b);
    cp.apply_merge(&plan_b).unwrap();
    assert_eq!(fx.read("notes.md").unwrap(), notes_with("", "- a\n- b\n"));
    assert!(!ran.exists(), "the planted union driver ran");
    let a = notes_with("line 1 from a\n", "");
    let b = notes_with("", "line 11 from b\n");
    let (_fx, _cp, plan_b) = two_lanes_on_notes("", &config, &a, &b);
    assert!(matches!(plan_b, MergePlan::Clean { .. }), "{plan_b:?}");
    assert!(!ran.exists(), "merge.default ran");
    let fx = populated();
    // A name with a quote and `=` in it, too.
    fx.write(".git/info/attributes", "* merge=pl'a=nted\n");
    for (key, value) in config {
        fx.git(&["config", key, value]);
    }
    fx.git(&["config", "merge.pl'a=nted.driver", &touch]);
    fx.write("notes.md", &notes_with("", ""));
    fx.commit_all("notes");
    let cp = user_cp(&fx);
    let (base_a, theirs_a) = lane_change(&fx, &cp, "a", |p| write(p, "notes.md", &a));
    let (base_b, theirs_b) = lane_change(&fx, &cp, "b", |p| write(p, "notes.md", &b));
    cp.apply_merge(&plan(&cp, &base_a, &theirs_a, "a")).unwrap();
    let plan_b = plan(&cp, &base_b, &theirs_b, "b");
    assert!(matches!(plan_b, MergePlan::Clean { .. }), "{plan_b:?}");
    assert!(!ran.exists(), ".git/info/attributes ran it");
}

#[test]
fn merge_union_also_joins_a_file_both_lanes_created_and_leaves_other_conflicts_alone() {
    let fx = populated();
    fx.write(".gitattributes", "*.md merge=union\n");
    fx.commit_all("attributes");
    let cp = user_cp(&fx);
    let (base_a, theirs_a) = lane_change(&fx, &cp, "a", |p| {
        write(p, "CHANGES.md", "- a\n");
        write(p, "a.txt", "from a\n");
    });
    let (base_b, theirs_b) = lane_change(&fx, &cp, "b", |p| {
        write(p, "CHANGES.md", "- b\n");
        write(p, "a.txt", "from b\n");
    });
    cp.apply_merge(&plan(&cp, &base_a, &theirs_a, "a")).unwrap();
    // a.txt (no rule) still conflicts; CHANGES.md is not reported.
    let plan_b = plan(&cp, &base_b, &theirs_b, "b");
    let MergePlan::Conflict { files, messages } = &plan_b else {
        panic!("{plan_b:?}")
    };
    assert_eq!(files, &["a.txt"]);
    assert!(
        !messages.iter().any(|m| m.contains("CHANGES.md")),
        "{messages:?}"
    );
    // A resolve attempt's tree: a.txt with markers, CHANGES.md unioned
    // (git's text merge of it would have left markers no one looks for).
    let ours = cp.snapshot_tree().unwrap();
    let remerged = cp
        .merge_with_markers(&base_b, &ours, &theirs_b, &[])
        .unwrap()
        .unwrap();
    assert_eq!(remerged.conflicted, ["a.txt"]);
    let show = |path: &str| fx.git(&["show", &format!("{}:{path}", remerged.tree)]);
    assert_eq!(show("CHANGES.md"), "- a\n- b\n");
    assert!(show("a.txt").contains("<<<<<<<"));

    // Without another conflict: both sides' lines.
    let (base_c, theirs_c) = lane_change(&fx, &cp, "c", |p| write(p, "CHANGES.md", "- c\n"));
    fx.write("CHANGES.md", "- a\n- mine\n");
    let plan_c = plan(&cp, &base_c, &theirs_c, "c");
    cp.apply_merge(&plan_c).unwrap();
    assert_eq!(fx.read("CHANGES.md").unwrap(), "- a\n- mine\n- c\n");
}

/// A lane killed right after its attempt's checkpoint, before the run could
/// record it: removing the stale lane for its change drops those refs (and
/// only its change's).
#[test]
fn a_stale_lanes_unrecorded_checkpoint_refs_go_with_it() {
    let fx = dirty();
    let cp = user_cp(&fx);
    let (l1, _) = open(&fx, &cp, "l1");
    let lane_cp = l1.checkpointer.clone();
    let name = lane_cp.worktree_name().to_owned();
    lane_cp.create(&lane_cp.ref_name("c1", "2.1", 1)).unwrap();
    lane_cp
        .create(&lane_cp.ref_name("other", "2.1", 1))
        .unwrap();
    let refs = || fx.git(&["for-each-ref", "--format=%(refname)", "refs/spectr/"]);
    assert!(
        refs().contains(&format!("@{name}/c1/2.1/1/checkpoint")),
        "{}",
        refs()
    );
    cp.remove_stale_lanes_of(&lanes_dir(&fx), "refs/spectr/test/stale", Some("c1"))
        .unwrap();
    let left = refs();
    assert!(!left.contains(&format!("@{name}/c1/")), "{left}");
    assert!(
        left.contains(&format!("@{name}/other/2.1/1/checkpoint")),
        "{left}"
    );
}
