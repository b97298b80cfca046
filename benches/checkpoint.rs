//! Per-task checkpoint cost against `git stash push -u` + `git stash pop`
//! (the reference, measured in the same run) on generated repositories of
//! 1,000 and 10,000 committed files (plus 1% untracked). Each iteration edits
//! one file first, as an attempt would. Goal (issue 12): checkpoint create at
//! most 0.5x the stash reference, and at most 100 ms at 10,000 files.
//!
//! Run: `cargo bench --bench checkpoint` (`SPECTR_BENCH_50K=1` adds 50,000).

use spectr::checkpoint::Checkpointer;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

fn main() {
    divan::main();
}

fn sizes() -> Vec<usize> {
    let mut s = vec![1_000, 10_000];
    if std::env::var_os("SPECTR_BENCH_50K").is_some() {
        s.push(50_000);
    }
    s
}

struct Repo {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    cp: Checkpointer,
}

fn git(root: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .stdout(std::process::Stdio::null())
        .args([
            "-c",
            "user.name=b",
            "-c",
            "user.email=b@x",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(root)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "git {args:?}");
}

fn make(files: usize) -> Repo {
    let tmp = tempfile::tempdir().expect("temp dir");
    let root = tmp.path().canonicalize().expect("canonical");
    git(&root, &["init", "-q", "-b", "main"]);
    for i in 0..files {
        let dir = root.join(format!("src/m{:03}", i / 100));
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(
            dir.join(format!("f{i}.rs")),
            format!("// file {i}\npub fn f{i}() -> usize {{ {i} }}\n"),
        )
        .expect("write");
    }
    git(&root, &["add", "-A"]);
    git(&root, &["commit", "-q", "-m", "base"]);
    for i in 0..files / 100 {
        std::fs::write(root.join(format!("untracked{i}.txt")), "wip\n").expect("write");
    }
    // Settle the index's stat cache as a user's would be.
    git(&root, &["status", "-s"]);
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
    let map = REPOS.get_or_init(Mutex::default);
    let mut map = map.lock().expect("lock");
    map.entry(files)
        .or_insert_with(|| Box::leak(Box::new(make(files))))
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
