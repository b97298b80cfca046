//! Shared helpers for the `tests/cli_*.rs` tests: temporary projects (bounded
//! by a `.git` folder so discovery never climbs out of them) and a `spectr`
//! command running in them.

// Each test binary uses its own subset.
#[allow(unused_imports)]
pub use super::{copy_dir, stdout_text as stdout};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The upstream fixtures, beside the repository (CI always has them there).
pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/spectr-upstream")
}

/// A throwaway project: `<tmp>/.git/` and `<tmp>/spectr/changes/`.
pub struct Proj {
    pub tmp: tempfile::TempDir,
}

impl Proj {
    pub fn new() -> Proj {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join(".git")).unwrap();
        std::fs::create_dir_all(tmp.path().join("spectr/changes")).unwrap();
        Proj { tmp }
    }

    /// A project holding copies of the upstream fixture changes.
    pub fn with_fixtures() -> Proj {
        let p = Proj::new();
        copy_dir(&fixtures_dir().join("changes"), &p.changes());
        p
    }

    pub fn root(&self) -> &Path {
        self.tmp.path()
    }

    pub fn changes(&self) -> PathBuf {
        self.root().join("spectr/changes")
    }

    pub fn change_dir(&self, id: &str) -> PathBuf {
        self.changes().join(id)
    }

    /// Creates a change with a proposal titled `title` and, when given, tasks.md.
    pub fn add_change(&self, id: &str, title: &str, tasks_md: Option<&str>) -> PathBuf {
        let dir = self.change_dir(id);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("proposal.md"),
            format!("# Change: {title}\n\n## Why\nTest.\n"),
        )
        .unwrap();
        if let Some(md) = tasks_md {
            std::fs::write(dir.join("tasks.md"), md).unwrap();
        }
        dir
    }

    pub fn write(&self, rel: &str, text: &str) {
        let p = self.root().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.root().join(rel)).unwrap()
    }

    /// `spectr` run from the project root.
    pub fn cmd(&self) -> assert_cmd::Command {
        spectr_in(self.root())
    }
}

/// `spectr` run from `dir`, with no `SPECTR_ROOT` from the caller's
/// environment and a hang guard.
pub fn spectr_in(dir: &Path) -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::new(env!("CARGO_BIN_EXE_spectr"));
    cmd.current_dir(dir)
        .env_remove("SPECTR_ROOT")
        .env("NO_COLOR", "1")
        .timeout(Duration::from_secs(60));
    cmd
}

/// stderr with miette's line wrapping undone (its `│` gutters dropped and
/// whitespace runs collapsed), so tests can look for whole sentences.
pub fn stderr(out: &std::process::Output) -> String {
    let text = String::from_utf8_lossy(&out.stderr).replace('│', " ");
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A tasks.md with `sections` sections of `per` tasks each.
pub fn tasks_md(sections: usize, per: usize) -> String {
    let mut md = String::from("# Tasks\n");
    for s in 1..=sections {
        md.push_str(&format!("\n## {s}. Section {s}\n\n"));
        for t in 1..=per {
            md.push_str(&format!("- [ ] {s}.{t} Task {s}.{t}\n"));
        }
    }
    md
}
