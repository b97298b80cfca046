//! Finding the spectr project and resolving change ids.
//!
//! STUB: contract for the CLI and the loop.

use crate::model::ModelError;
use std::path::{Path, PathBuf};

/// A spectr (or OpenSpec) project: the folder holding `spectr/` (or `openspec/`).
#[derive(Debug, Clone)]
pub struct Project {
    pub root: PathBuf,
    /// `<root>/spectr` or `<root>/openspec`.
    pub spec_dir: PathBuf,
}

/// An active change folder.
#[derive(Debug, Clone)]
pub struct Change {
    pub id: String,
    pub dir: PathBuf,
}

impl Change {
    pub fn proposal_path(&self) -> PathBuf {
        self.dir.join("proposal.md")
    }

    /// `design.md` when present.
    pub fn design_path(&self) -> Option<PathBuf> {
        let p = self.dir.join("design.md");
        p.is_file().then_some(p)
    }

    /// Delta specs as (capability, path), sorted by capability.
    pub fn delta_specs(&self) -> Vec<(String, PathBuf)> {
        todo!("model helper")
    }
}

#[derive(Debug, Clone)]
pub struct ResolvedChange {
    pub change: Change,
    /// Set when the typed id was not an exact match: the text the user typed.
    pub typed: Option<String>,
}

impl Project {
    /// Walks up from `cwd` for `spectr/` (then `openspec/`), stopping at a `.git`
    /// boundary; `SPECTR_ROOT` overrides.
    pub fn discover(cwd: &Path) -> Result<Project, ModelError> {
        let _ = cwd;
        todo!("model helper")
    }

    /// Active changes (folders under `changes/` with `proposal.md`, not
    /// `archive/`), sorted by id.
    pub fn active_changes(&self) -> Result<Vec<Change>, ModelError> {
        todo!("model helper")
    }

    /// Exact, then unique case-insensitive prefix, then unique substring.
    pub fn resolve_change(&self, typed: &str) -> Result<ResolvedChange, ModelError> {
        let _ = typed;
        todo!("model helper")
    }
}
