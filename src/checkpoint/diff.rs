//! A diff between two trees as text, for a person or an agent to read.

use crate::checkpoint::{CheckpointError, Checkpointer};

impl Checkpointer {
    /// `git diff <base> <ours> -- <paths>`: no colour, no renames, and no
    /// command from the repository's configuration or attributes (external
    /// diff drivers, textconv filters: an agent could have planted one).
    pub fn diff_text(
        &self,
        base: &str,
        ours: &str,
        paths: &[String],
    ) -> Result<String, CheckpointError> {
        let mut args = vec![
            "diff".to_string(),
            "--no-color".into(),
            "--no-ext-diff".into(),
            "--no-textconv".into(),
            "--no-renames".into(),
            base.to_string(),
            ours.to_string(),
            "--".into(),
        ];
        args.extend(paths.iter().map(|f| format!(":(literal){f}")));
        let out = self.git.cmd(&args).c_locale().run()?;
        Ok(String::from_utf8_lossy(&out).into_owned())
    }
}

impl Checkpointer {
    /// Paths that differ between the trees of `base` and `ours` (commits,
    /// refs or trees), sorted; `ours` None: the work tree now, read the way
    /// a checkpoint reads it (no filter or hook of the repository's runs).
    pub fn changed_paths(
        &self,
        base: &str,
        ours: Option<&str>,
    ) -> Result<Vec<String>, CheckpointError> {
        let ours = match ours {
            Some(rev) => rev.to_string(),
            None => self.snapshot_tree()?,
        };
        let mut paths: Vec<String> = self
            .diff_trees(base, &ours)?
            .into_iter()
            .map(|d| String::from_utf8_lossy(&d.path).into_owned())
            .collect();
        paths.sort();
        Ok(paths)
    }
}
