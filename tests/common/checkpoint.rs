//! Shared by the checkpoint tests: scratch repositories whose git (the
//! tests' and the Checkpointer's, through a wrapper) ignores the developer's
//! config, and a full picture of a work tree to compare byte for byte.

// Each test binary uses its own subset.
#[allow(unused_imports)]
pub use super::{git, git_cmd};
use spectr::checkpoint::Checkpointer;
use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub const TIMEOUT: Duration = Duration::from_secs(30);

pub struct Fixture {
    pub _tmp: tempfile::TempDir,
    /// Canonical (git reports the work tree with symlinks resolved).
    pub root: PathBuf,
    /// Runs git isolated from the developer's config.
    pub wrapper: PathBuf,
}

pub fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let root = base.join("repo");
    std::fs::create_dir(&root).unwrap();
    git(&root, &["init", "-q", "-b", "main"]);
    let wrapper = base.join("git-isolated");
    write_script(
        &wrapper,
        "GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1 exec git \"$@\"",
    );
    Fixture {
        _tmp: tmp,
        root,
        wrapper,
    }
}

impl Fixture {
    /// Writes spectr's owner marker for `index.lock` naming a process
    /// that is gone, as a spectr killed while it held the lock leaves it.
    pub fn name_index_lock_a_killed_spectrs(&self) {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let start = stat
            .rsplit(')')
            .next()
            .and_then(|r| r.split_whitespace().nth(19))
            .unwrap_or("1")
            .to_owned();
        child.wait().unwrap();
        std::fs::write(
            self.root.join(".git/spectr-ralph-index.lock.owner"),
            format!("{pid} {start}"),
        )
        .unwrap();
    }

    pub fn checkpointer(&self) -> Checkpointer {
        Checkpointer::discover_with_program(&self.root, TIMEOUT, self.wrapper.clone())
            .unwrap()
            .expect("a git work tree")
    }
    pub fn write(&self, rel: &str, content: &str) {
        write(&self.root, rel, content);
    }
    pub fn read(&self, rel: &str) -> Option<String> {
        std::fs::read_to_string(self.root.join(rel)).ok()
    }
    pub fn exists(&self, rel: &str) -> bool {
        self.root.join(rel).symlink_metadata().is_ok()
    }
    pub fn git(&self, args: &[&str]) -> String {
        git(&self.root, args)
    }
    pub fn git_ok(&self, args: &[&str]) -> bool {
        git_cmd(&self.root, args).output().unwrap().status.success()
    }
    pub fn commit_all(&self, msg: &str) -> String {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", msg]);
        self.git(&["rev-parse", "HEAD"]).trim().to_owned()
    }
    pub fn status(&self) -> String {
        self.git(&["status", "--porcelain=v1", "-uall"])
    }
    pub fn index_bytes(&self) -> Option<Vec<u8>> {
        std::fs::read(self.root.join(".git/index")).ok()
    }
}

pub fn write(root: &Path, rel: &str, content: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

pub fn write_script(path: &Path, body: &str) {
    std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

pub fn is_executable(path: &Path) -> bool {
    path.metadata().unwrap().permissions().mode() & 0o111 != 0
}

/// A typical pre-attempt state: commits, an untracked file, ignored files
/// and the loop's own files.
pub fn populated() -> Fixture {
    let fx = fixture();
    fx.write(".gitignore", "*.log\n");
    fx.write("a.txt", "alpha\n");
    fx.write("b.txt", "beta\n");
    fx.write("script.sh", "echo hi\n");
    fx.write("dir/c.txt", "gamma\n");
    fx.commit_all("init");
    fx.write("untracked.txt", "mine, not yet added\n");
    fx.write("keep.log", "ignored before\n");
    fx.write(".ralph/session.json", "{\"v\":1}\n");
    fx
}

pub fn loop_excludes(fx: &Fixture) -> Vec<PathBuf> {
    vec![fx.root.join(".ralph")]
}

/// One path of a work tree as a revert must restore it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    File { bytes: Vec<u8>, mode: u32 },
    Symlink(PathBuf),
    Dir,
}

/// Every path below `root` (`.git` at the top left out), with contents,
/// modes and symlink targets; directories too, so empty ones count.
pub fn tree_state(root: &Path) -> BTreeMap<Vec<u8>, Node> {
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<Vec<u8>, Node>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let path = e.path();
        let rel = path
            .strip_prefix(root)
            .unwrap()
            .as_os_str()
            .as_bytes()
            .to_vec();
        if rel == b".git" {
            continue;
        }
        let m = std::fs::symlink_metadata(&path).unwrap();
        if m.file_type().is_symlink() {
            out.insert(rel, Node::Symlink(std::fs::read_link(&path).unwrap()));
        } else if m.is_dir() {
            out.insert(rel, Node::Dir);
            walk(root, &path, out);
        } else {
            let bytes = std::fs::read(&path).unwrap();
            out.insert(
                rel,
                Node::File {
                    bytes,
                    mode: m.permissions().mode() & 0o7777,
                },
            );
        }
    }
}

/// A property test's config: `PROPTEST_CASES` cases (else `default_cases`),
/// a fixed RNG and no failure files, so CI runs the same seeded cases.
pub fn seeded_config(default_cases: u32) -> proptest::test_runner::Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(default_cases);
    proptest::test_runner::Config {
        cases,
        failure_persistence: None,
        rng_algorithm: proptest::test_runner::RngAlgorithm::ChaCha,
        ..proptest::test_runner::Config::default()
    }
}
