//! Finding the spectr project and resolving change ids.
//!
//! Discovery walks up from a start folder to the first folder holding `spectr/`,
//! never past a git boundary (a folder containing `.git` is the last one looked
//! at): a nested repository must not pick up its parent's specs. `openspec/` is
//! searched the same way and used only when no `spectr/` is found. `SPECTR_ROOT`
//! overrides the walk.

use crate::model::ModelError;
use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};

/// The environment variable that names the project root and skips discovery.
pub const SPECTR_ROOT_ENV: &str = "SPECTR_ROOT";

/// Folder names of spec folders, in order of preference.
const SPEC_DIR_NAMES: [&str; 2] = ["spectr", "openspec"];

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

    /// The human checklist, `tasks.md` (it may not exist).
    pub fn tasks_md_path(&self) -> PathBuf {
        self.dir.join("tasks.md")
    }

    /// The machine task list's root file, `tasks.jsonc` (it may not exist).
    pub fn tasks_jsonc_path(&self) -> PathBuf {
        self.dir.join("tasks.jsonc")
    }

    /// Delta specs as (capability, path), sorted by capability: every
    /// `specs/<capability>/spec.md` in the change folder.
    pub fn delta_specs(&self) -> Vec<(String, PathBuf)> {
        let Ok(entries) = std::fs::read_dir(self.dir.join("specs")) else {
            return Vec::new();
        };
        let mut specs: Vec<(String, PathBuf)> = entries
            .filter_map(Result::ok)
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let spec = e.path().join("spec.md");
                spec.is_file().then_some((name, spec))
            })
            .collect();
        specs.sort();
        specs
    }

    /// The title: `proposal.md`'s first `# ` heading (after any YAML front
    /// matter), without a leading `Change: `. None when there is no heading or
    /// the file can't be read.
    pub fn title(&self) -> Option<String> {
        let text = std::fs::read_to_string(self.proposal_path()).ok()?;
        proposal_title(&text)
    }
}

/// The first level-1 heading of a proposal, skipping YAML front matter and
/// fenced code, with a `Change: ` prefix removed.
pub fn proposal_title(text: &str) -> Option<String> {
    let mut lines = text.lines().peekable();
    if lines.peek().map(|l| l.trim_end()) == Some("---") {
        lines.next();
        for line in lines.by_ref() {
            if line.trim_end() == "---" {
                break;
            }
        }
    }
    let mut in_fence = false;
    for line in lines {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# ") {
            let title = rest.trim();
            let title = title.strip_prefix("Change:").map_or(title, str::trim_start);
            if !title.is_empty() {
                return Some(title.to_string());
            }
        }
    }
    None
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
        let env = std::env::var_os(SPECTR_ROOT_ENV);
        Project::discover_with(cwd, env.as_deref())
    }

    /// [`Project::discover`] with the `SPECTR_ROOT` value passed in (so tests
    /// need not touch the process environment). An empty value counts as unset.
    pub fn discover_with(cwd: &Path, spectr_root: Option<&OsStr>) -> Result<Project, ModelError> {
        let cwd = absolute(cwd);
        match spectr_root.filter(|v| !v.is_empty()) {
            Some(root) => Project::from_env_root(&cwd.join(root)),
            None => Project::walk_up(&cwd),
        }
    }

    /// `SPECTR_ROOT` may name the project root or the spec folder itself.
    fn from_env_root(path: &Path) -> Result<Project, ModelError> {
        let invalid = |reason: &str| ModelError::SpectrRootInvalid {
            path: path.to_path_buf(),
            reason: reason.to_string(),
        };
        if !path.exists() {
            return Err(invalid("that path does not exist"));
        }
        if !path.is_dir() {
            return Err(invalid("that is not a folder"));
        }
        for name in SPEC_DIR_NAMES {
            let spec_dir = path.join(name);
            if spec_dir.is_dir() {
                return Ok(Project {
                    root: path.to_path_buf(),
                    spec_dir,
                });
            }
        }
        let named_like_spec_dir = path
            .file_name()
            .and_then(OsStr::to_str)
            .is_some_and(|n| SPEC_DIR_NAMES.contains(&n));
        if let (true, Some(parent)) = (named_like_spec_dir, path.parent()) {
            return Ok(Project {
                root: parent.to_path_buf(),
                spec_dir: path.to_path_buf(),
            });
        }
        Err(invalid("it holds no spectr/ or openspec/ folder"))
    }

    fn walk_up(cwd: &Path) -> Result<Project, ModelError> {
        let searched = bounded_ancestors(cwd);
        // The nearest folder holding either wins (an OpenSpec project inside
        // a folder with an unrelated spectr/ is that project); spectr/
        // first where one folder holds both.
        for dir in &searched {
            for name in SPEC_DIR_NAMES {
                let spec_dir = dir.join(name);
                if spec_dir.is_dir() {
                    return Ok(Project {
                        root: dir.clone(),
                        spec_dir,
                    });
                }
            }
        }
        Err(ModelError::NoProject {
            start: cwd.to_path_buf(),
            stop: searched
                .last()
                .cloned()
                .unwrap_or_else(|| cwd.to_path_buf()),
        })
    }

    /// `<spec_dir>/changes`.
    pub fn changes_dir(&self) -> PathBuf {
        self.spec_dir.join("changes")
    }

    /// Active changes (folders under `changes/` with `proposal.md`, not
    /// `archive/`), sorted by id.
    pub fn active_changes(&self) -> Result<Vec<Change>, ModelError> {
        let dir = self.changes_dir();
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => {
                return Err(ModelError::Io {
                    message: format!("cannot read the changes folder {}", dir.display()),
                    source: e,
                });
            }
        };
        let mut changes = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| ModelError::Io {
                message: format!("cannot read the changes folder {}", dir.display()),
                source: e,
            })?;
            // A name that is not UTF-8 can't be typed as an id; skip it.
            let Ok(id) = entry.file_name().into_string() else {
                continue;
            };
            if id == "archive" || id.starts_with('.') {
                continue;
            }
            let path = entry.path();
            if path.join("proposal.md").is_file() {
                changes.push(Change { id, dir: path });
            }
        }
        changes.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(changes)
    }

    /// Exact, then unique case-insensitive prefix, then unique
    /// (case-insensitive) substring. Ids that could name a path outside
    /// `changes/` are refused before any lookup.
    pub fn resolve_change(&self, typed: &str) -> Result<ResolvedChange, ModelError> {
        check_change_id(typed)?;
        let changes = self.active_changes()?;
        let ids: Vec<String> = changes.iter().map(|c| c.id.clone()).collect();
        let resolved = resolve_among(changes, typed).map_err(|e| match e {
            // A folder without proposal.md is a likelier mistake than a typo.
            ModelError::ChangeNotFound { id, .. } if self.changes_dir().join(&id).is_dir() => {
                ModelError::NotAChange {
                    id: id.clone(),
                    dir: self.changes_dir().join(&id),
                }
            }
            ModelError::ChangeNotFound { id, .. } => {
                let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
                ModelError::change_not_found(&id, Some(&self.changes_dir()), &ids)
            }
            other => other,
        })?;
        // A folder name is file content too: one that could drive the
        // terminal is refused, as a typed one is.
        if resolved.change.id.chars().any(char::is_control) {
            return Err(ModelError::InvalidChangeId {
                id: resolved.change.id,
                reason: "its folder name contains a control character; rename the folder"
                    .to_string(),
            });
        }
        Ok(resolved)
    }
}

/// Exact, then unique case-insensitive prefix, then unique case-insensitive
/// substring, over `changes` (sorted by id).
fn resolve_among(changes: Vec<Change>, typed: &str) -> Result<ResolvedChange, ModelError> {
    if let Some(change) = changes.iter().find(|c| c.id == typed) {
        return Ok(ResolvedChange {
            change: change.clone(),
            typed: None,
        });
    }
    let needle = typed.to_lowercase();
    let matchers: [&dyn Fn(&str) -> bool; 2] = [
        &|id: &str| id.to_lowercase().starts_with(&needle),
        &|id: &str| id.to_lowercase().contains(&needle),
    ];
    for matches in matchers {
        let found: Vec<&Change> = changes.iter().filter(|c| matches(&c.id)).collect();
        match found.as_slice() {
            [] => continue,
            [one] => {
                return Ok(ResolvedChange {
                    change: (*one).clone(),
                    typed: Some(typed.to_string()),
                });
            }
            many => {
                return Err(ModelError::AmbiguousChange {
                    id: typed.to_string(),
                    candidates: many.iter().map(|c| c.id.clone()).collect(),
                });
            }
        }
    }
    Err(ModelError::change_not_found(typed, None, &[]))
}

/// Refuses ids that are empty or could name anything but a folder directly
/// under `changes/`: path separators, `.`/`..`, drive prefixes, control
/// characters.
pub fn check_change_id(typed: &str) -> Result<(), ModelError> {
    let invalid = |reason: String| ModelError::InvalidChangeId {
        id: typed.to_string(),
        reason,
    };
    if typed.trim().is_empty() {
        return Err(invalid("it is empty".to_string()));
    }
    if typed.contains('/') || typed.contains('\\') {
        let last = typed
            .split(['/', '\\'])
            .rev()
            .find(|s| !s.is_empty() && *s != "." && *s != "..");
        let hint = match last {
            Some(name) => format!("; give the change's folder name only, e.g. '{name}'"),
            None => String::new(),
        };
        return Err(invalid(format!("it contains a path separator{hint}")));
    }
    if typed.contains("..") || typed == "." {
        return Err(invalid("it contains '..' or is '.'".to_string()));
    }
    if typed.chars().any(char::is_control) {
        return Err(invalid("it contains a control character".to_string()));
    }
    // On Windows `C:x` is a drive-relative path; refuse anything that is not
    // exactly one normal path component on any platform.
    let mut components = Path::new(typed).components();
    match (components.next(), components.next()) {
        (Some(Component::Normal(_)), None) => Ok(()),
        _ => Err(invalid("it is not a plain folder name".to_string())),
    }
}

/// `dir` and its ancestors, up to and including the first one holding `.git`
/// (a file in worktrees and submodules, a folder otherwise).
pub fn bounded_ancestors(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for d in dir.ancestors() {
        out.push(d.to_path_buf());
        if d.join(".git").exists() {
            break;
        }
    }
    out
}

/// `p` made absolute against the process's current folder, without touching
/// symlinks (the user's view of the path is what error messages should show).
fn absolute(p: &Path) -> PathBuf {
    if p.is_absolute() {
        return p.to_path_buf();
    }
    match std::env::current_dir() {
        Ok(cwd) => cwd.join(p),
        Err(_) => p.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(id: &str) -> Change {
        Change {
            id: id.to_string(),
            dir: PathBuf::from("/x").join(id),
        }
    }

    fn ids(v: &[&str]) -> Vec<Change> {
        v.iter().map(|i| change(i)).collect()
    }

    #[test]
    fn resolution_order() {
        let all = ids(&["add-foo", "add-foo-bar", "remove-baz", "update-qux"]);
        let r = resolve_among(all.clone(), "add-foo").unwrap();
        assert_eq!((r.change.id.as_str(), r.typed), ("add-foo", None));
        let r = resolve_among(all.clone(), "REM").unwrap();
        assert_eq!(r.change.id, "remove-baz");
        assert_eq!(r.typed.as_deref(), Some("REM"));
        let r = resolve_among(all.clone(), "qux").unwrap();
        assert_eq!(r.change.id, "update-qux");
        match resolve_among(all.clone(), "add") {
            Err(ModelError::AmbiguousChange { candidates, .. }) => {
                assert_eq!(candidates, ["add-foo", "add-foo-bar"])
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            resolve_among(all, "zzz"),
            Err(ModelError::ChangeNotFound { .. })
        ));
    }

    #[test]
    fn prefix_beats_substring() {
        // "bar" is a prefix of one id and a substring of another.
        let r = resolve_among(ids(&["add-bar", "bar-thing"]), "bar").unwrap();
        assert_eq!(r.change.id, "bar-thing");
    }

    #[test]
    fn unsafe_ids_refused() {
        for bad in [
            "", " ", "../x", "a/b", "a\\b", "..", ".", "x..y", "a\0b", "/etc",
        ] {
            assert!(
                matches!(
                    check_change_id(bad),
                    Err(ModelError::InvalidChangeId { .. })
                ),
                "{bad:?} was accepted"
            );
        }
        for good in ["add-foo", "x", "add.v2"] {
            assert!(check_change_id(good).is_ok(), "{good:?} refused");
        }
    }

    #[test]
    fn path_hint_names_the_folder() {
        let err = check_change_id("spectr/changes/add-foo/").unwrap_err();
        assert!(err.to_string().contains("'add-foo'"), "{err}");
    }

    #[test]
    fn titles() {
        assert_eq!(
            proposal_title("# Change: Add X\n").as_deref(),
            Some("Add X")
        );
        assert_eq!(proposal_title("# Add Y\n# Z").as_deref(), Some("Add Y"));
        let fm = "---\nid: a\n# not a title\n---\n\n## Why\n# Real\n";
        assert_eq!(proposal_title(fm).as_deref(), Some("Real"));
        assert_eq!(proposal_title("```\n# no\n```\n## Why\n"), None);
        assert_eq!(proposal_title("#NoSpace\n"), None);
    }
}
