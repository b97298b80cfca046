//! Per-task merge-back overhead of a parallel lane (issue 9) on a generated
//! repository of 10,000 committed files (plus 1% untracked): the lane's
//! `reset_to`, then, after a task that edited 3 files, the lane's
//! `snapshot_tree`, `plan_merge` (which checkpoints the user's tree) and
//! `apply_merge`. Goal: at most 100 ms per task. The stages are also
//! measured alone, with one checkpoint `create` as the machine's yardstick.
//!
//! Run: `cargo bench --bench lanes` (`SPECTR_BENCH_50K=1` adds 50,000).

use spectr::checkpoint::{Checkpointer, LaneTree, MergePlan};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

mod support;
use support::git;

fn main() {
    divan::main();
}

fn sizes() -> Vec<usize> {
    support::sizes(&[10_000])
}

struct Repo {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    cp: Checkpointer,
    lane: LaneTree,
}

fn make(files: usize) -> Repo {
    // A change whose `.ralph/` (where lanes live) git ignores.
    let (tmp, root) = support::user_repo(files, &|root| {
        std::fs::create_dir_all(root.join("change/.ralph")).expect("mkdir");
        std::fs::write(root.join("change/.ralph/.gitignore"), "*\n").expect("write");
        std::fs::write(root.join("change/tasks.md"), "- [ ] 1.1\n").expect("write");
    });
    let cp = Checkpointer::discover(&root, Duration::from_secs(120))
        .expect("discover")
        .expect("a repository")
        .with_excludes(vec![root.join("change/.ralph")]);
    let head = support::head(&root);
    let tree = cp.snapshot_tree().expect("snapshot");
    let lane = cp
        .open_lane(&root.join("change/.ralph/lanes/1"), &tree, Some(&head))
        .expect("open lane");
    git(&lane.path, &["status", "-s"]);
    Repo {
        _tmp: tmp,
        root,
        cp,
        lane,
    }
}

fn repo(files: usize) -> &'static Repo {
    static REPOS: OnceLock<Mutex<BTreeMap<usize, &'static Repo>>> = OnceLock::new();
    support::cached(&REPOS, files, make)
}

/// What a task does in its lane: edits 3 files.
fn task(repo: &Repo, n: u64) {
    for f in ["src/m000/f0.rs", "src/m050/f5000.rs", "src/m099/f9999.rs"] {
        std::fs::write(repo.lane.path.join(f), format!("// task {n}\n")).expect("edit");
    }
}

fn head(repo: &Repo) -> String {
    support::head(&repo.root)
}

/// One task's merge-back as the brief defines it: `reset_to` (the lane is
/// refreshed to the previous merge's result, a valid target: the three-way
/// merge keeps whatever the user changed since), the task's 3 edits, the
/// lane's `snapshot_tree`, `plan_merge` and `apply_merge`.
#[divan::bench(args = sizes(), sample_count = 15)]
fn merge_back_per_task(bencher: divan::Bencher, files: usize) {
    let repo = repo(files);
    let head = head(repo);
    let refname = repo.cp.ref_name("bench", "merge", 1);
    let mut n = 0;
    let mut target = repo.cp.snapshot_tree().expect("user snapshot");
    bencher.bench_local(|| {
        n += 1;
        repo.lane
            .reset_to(&target, Some(&head), None)
            .expect("reset");
        task(repo, n);
        let theirs = repo
            .lane
            .checkpointer
            .snapshot_tree()
            .expect("lane snapshot");
        let plan = repo
            .cp
            .plan_merge(&target, &theirs, &refname, &[])
            .expect("plan");
        let MergePlan::Clean { merged, .. } = &plan else {
            panic!("{plan:?}")
        };
        target = merged.clone();
        repo.cp.apply_merge(&plan).expect("apply")
    });
}

/// Reference for the machine's speed in the same run: one checkpoint.
#[divan::bench(args = sizes(), sample_count = 15)]
fn user_checkpoint_create(bencher: divan::Bencher, files: usize) {
    let repo = repo(files);
    let refname = repo.cp.ref_name("bench", "create", 1);
    bencher.bench_local(|| repo.cp.create(&refname).expect("checkpoint"));
}

/// Stage: the user's `snapshot_tree` (the lane refresh's source).
#[divan::bench(args = sizes(), sample_count = 15)]
fn user_snapshot_tree(bencher: divan::Bencher, files: usize) {
    let repo = repo(files);
    bencher.bench_local(|| repo.cp.snapshot_tree().expect("snapshot"));
}

/// Stage: `reset_to` after a task edited 3 files.
#[divan::bench(args = sizes(), sample_count = 15)]
fn lane_reset_to(bencher: divan::Bencher, files: usize) {
    let repo = repo(files);
    let head = head(repo);
    let base = repo.cp.snapshot_tree().expect("snapshot");
    let mut n = 0;
    bencher
        .with_inputs(|| {
            n += 1;
            task(repo, n);
        })
        .bench_local_values(|()| repo.lane.reset_to(&base, Some(&head), None).expect("reset"));
}

/// Stage: the lane's `snapshot_tree` after a task edited 3 files.
#[divan::bench(args = sizes(), sample_count = 15)]
fn lane_snapshot_tree(bencher: divan::Bencher, files: usize) {
    let repo = repo(files);
    let mut n = 0;
    bencher
        .with_inputs(|| {
            n += 1;
            task(repo, n);
        })
        .bench_local_values(|()| repo.lane.checkpointer.snapshot_tree().expect("snapshot"));
}

/// Opening a lane (once per lane per run): `git worktree add --no-checkout`,
/// every file written, the index read and refreshed; then its removal.
#[divan::bench(args = sizes(), sample_count = 3)]
fn open_and_remove_lane(bencher: divan::Bencher, files: usize) {
    let repo = repo(files);
    let head = head(repo);
    let tree = repo.cp.snapshot_tree().expect("snapshot");
    let mut n = 0;
    bencher.bench_local(|| {
        n += 1;
        let path = repo.root.join(format!("change/.ralph/lanes/open{n}"));
        let lane = repo.cp.open_lane(&path, &tree, Some(&head)).expect("open");
        repo.cp
            .remove_lane(&lane.path, "refs/spectr/bench/removed")
            .expect("remove");
    });
}
