//! Per-task checkpoint cost against `git stash push -u` + `git stash pop`
//! (the reference, measured in the same run) on generated repositories of
//! 1,000 and 10,000 committed files (plus 1% untracked). Each iteration edits
//! one file first, as an attempt would. Goal (issue 12): checkpoint create at
//! most 0.5x the stash reference, and at most 100 ms at 10,000 files.
//!
//! Run: `cargo bench --bench checkpoint` (`SPECTR_BENCH_50K=1` adds 50,000).

use spectr::checkpoint::Checkpointer;
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
    support::sizes(&[1_000, 10_000])
}

struct Repo {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    cp: Checkpointer,
}

fn make(files: usize) -> Repo {
    let (tmp, root) = support::user_repo(files, &|_| {});
    let cp = Checkpointer::discover(&root, Duration::from_secs(120))
        .expect("discover")
        .expect("a repository");
    Repo {
        _tmp: tmp,
        root,
        cp,
    }
}

fn repo(files: usize) -> &'static Repo {
    static REPOS: OnceLock<Mutex<BTreeMap<usize, &'static Repo>>> = OnceLock::new();
    support::cached(&REPOS, files, make)
}

fn edit(repo: &Repo, n: u64) {
    std::fs::write(repo.root.join("src/m000/f0.rs"), format!("// edit {n}\n")).expect("edit");
}

#[divan::bench(args = sizes(), sample_count = 15)]
fn checkpoint_create(bencher: divan::Bencher, files: usize) {
    let repo = repo(files);
    let refname = repo.cp.ref_name("bench", "create", 1);
    let mut n = 0;
    bencher.bench_local(|| {
        n += 1;
        edit(repo, n);
        repo.cp.create(&refname).expect("checkpoint")
    });
}

#[divan::bench(args = sizes(), sample_count = 15)]
fn checkpoint_create_and_revert(bencher: divan::Bencher, files: usize) {
    let repo = repo(files);
    let refname = repo.cp.ref_name("bench", "revert", 1);
    let failed = repo.cp.failed_ref_name("bench", "revert", 1);
    let mut n = 0;
    bencher.bench_local(|| {
        n += 1;
        let cp = repo.cp.create(&refname).expect("checkpoint");
        edit(repo, n);
        repo.cp.revert(&cp, &failed).expect("revert")
    });
}

/// The reference: what a careful user would do by hand.
#[divan::bench(args = sizes(), sample_count = 15)]
fn stash_push_u_and_pop(bencher: divan::Bencher, files: usize) {
    let repo = repo(files);
    let mut n = 0;
    bencher.bench_local(|| {
        n += 1;
        edit(repo, n);
        git(&repo.root, &["stash", "push", "-u", "-q"]);
        git(&repo.root, &["stash", "pop", "-q"]);
    });
}
