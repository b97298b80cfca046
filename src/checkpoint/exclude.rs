//! Paths the loop owns: turned into repo-relative paths and literal pathspecs.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// `path` relative to `root` (absolute, or already relative to `root`), or
/// `None` when it lies outside the work tree or is the root itself.
pub(crate) fn repo_relative(root: &Path, path: &Path) -> Option<PathBuf> {
    if path.is_relative() {
        return normalize(path);
    }
    let abs = normalize_abs(path);
    if let Ok(rel) = abs.strip_prefix(root) {
        return normalize(rel);
    }
    // `root` has symlinks resolved (git's realpath); resolve `path` too. It
    // may not exist yet (a session file written later): resolve its longest
    // existing ancestor and keep the rest.
    let mut existing = abs.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            let mut full = real;
            full.extend(rest.iter().rev());
            return full.strip_prefix(root).ok().and_then(normalize);
        }
        rest.push(existing.file_name()?.to_owned());
        existing = existing.parent()?;
    }
}

/// Lexical clean-up of a relative path; `None` if it climbs out or is empty.
fn normalize(rel: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in rel.components() {
        match c {
            Component::Normal(s) => out.push(s),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    (!out.as_os_str().is_empty()).then_some(out)
}

fn normalize_abs(abs: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in abs.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Whether a work-tree path is any change's run state: its `.ralph/` folder
/// (learnings, session, locks, lanes, transcripts) or its session file
/// `.ralph-session.json`, under `spectr/changes/<id>/` or
/// `openspec/changes/<id>/` (archived changes too) at any depth. The loop's
/// own change is excluded by path; these are every other run's, spectr's
/// own all the same: never the attempt's work, never the user's to be told of.
pub(crate) fn is_run_state(rel: &[u8]) -> bool {
    let parts: Vec<&[u8]> = rel
        .split(|&b| b == b'/')
        .filter(|p| !p.is_empty())
        .collect();
    parts.windows(2).enumerate().any(|(i, w)| {
        if !matches!(w[0], b"spectr" | b"openspec") || w[1] != b"changes" {
            return false;
        }
        let rest = &parts[i + 2..];
        let rest = match rest.first() {
            Some(&b"archive") => &rest[1..],
            _ => rest,
        };
        matches!(rest.get(1), Some(&(b".ralph" | b".ralph-session.json")))
    })
}

/// A pathspec matching exactly `rel` (and everything under it), from the top
/// of the work tree, no glob characters honoured.
pub(crate) fn literal_pathspec(rel: &Path) -> OsString {
    pathspec(":(top,literal)", rel)
}

/// A pathspec excluding `rel` (and everything under it).
pub(crate) fn exclude_pathspec(rel: &Path) -> OsString {
    pathspec(":(top,literal,exclude)", rel)
}

fn pathspec(magic: &str, rel: &Path) -> OsString {
    let mut bytes = magic.as_bytes().to_vec();
    bytes.extend_from_slice(rel.as_os_str().as_bytes());
    std::ffi::OsStr::from_bytes(&bytes).to_owned()
}

/// Adds the line `pattern` (after a `# why` comment) to the exclude file at
/// `path` unless a line already says it; true when it was added. The file
/// is the user's: everything in it is kept, byte for byte, and it is
/// replaced atomically.
pub(crate) fn add_info_exclude(path: &Path, pattern: &str, why: &str) -> std::io::Result<bool> {
    let old = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e),
    };
    if old
        .split(|&b| b == b'\n')
        .any(|l| l.strip_suffix(b"\r").unwrap_or(l) == pattern.as_bytes())
    {
        return Ok(false);
    }
    let mut new = old;
    if new.last().is_some_and(|&b| b != b'\n') {
        new.push(b'\n');
    }
    new.extend_from_slice(format!("# {why}\n{pattern}\n").as_bytes());
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    crate::model::atomic::write_atomic(path, &new)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_info_exclude_entry_is_added_once_and_keeps_every_byte() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("info/exclude");
        // No file (nor folder) yet.
        assert!(add_info_exclude(&path, ".ralph-session.json", "spectr").unwrap());
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "# spectr\n.ralph-session.json\n"
        );
        assert!(!add_info_exclude(&path, ".ralph-session.json", "spectr").unwrap());
        // The user's file without a final newline keeps its bytes.
        std::fs::write(&path, "*.log\r\n# mine").unwrap();
        assert!(add_info_exclude(&path, ".ralph-session.json", "spectr").unwrap());
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "*.log\r\n# mine\n# spectr\n.ralph-session.json\n"
        );
        // A line the user wrote themselves counts (CRLF too).
        std::fs::write(&path, ".ralph-session.json\r\n").unwrap();
        assert!(!add_info_exclude(&path, ".ralph-session.json", "spectr").unwrap());
    }

    #[test]
    fn relative_paths_are_cleaned() {
        let root = Path::new("/repo");
        assert_eq!(
            repo_relative(root, Path::new("./a/../b/c")),
            Some(PathBuf::from("b/c"))
        );
        assert_eq!(repo_relative(root, Path::new("../x")), None);
        assert_eq!(repo_relative(root, Path::new(".")), None);
    }

    #[test]
    fn absolute_paths_inside_the_root_become_relative() {
        let root = Path::new("/repo");
        assert_eq!(
            repo_relative(root, Path::new("/repo/.ralph/session.json")),
            Some(PathBuf::from(".ralph/session.json"))
        );
        assert_eq!(repo_relative(root, Path::new("/repo")), None);
    }

    #[test]
    fn any_changes_run_state_is_spectrs_own() {
        for own in [
            "spectr/changes/c/.ralph",
            "spectr/changes/c/.ralph/",
            "spectr/changes/c/.ralph/learnings.md",
            "spectr/changes/c/.ralph/lanes/lane-1/",
            "spectr/changes/c/.ralph-session.json",
            "openspec/changes/c/.ralph/lock",
            "sub/project/spectr/changes/c/.ralph/session.json",
            "spectr/changes/archive/2025-01-01-c/.ralph/learnings.md",
        ] {
            assert!(is_run_state(own.as_bytes()), "{own}");
        }
        for user in [
            ".ralph/x",
            "spectr/changes/c/tasks.jsonc",
            "spectr/changes/c/notes/.ralph/x",
            "spectr/changes/.ralph/x",
            "spectr/specs/c/.ralph/x",
            "spectr/changes/c/.ralph-session.json.bak",
            "src/changes/c/.ralph/x",
        ] {
            assert!(!is_run_state(user.as_bytes()), "{user}");
        }
    }

    #[test]
    fn pathspecs_carry_literal_magic() {
        assert_eq!(
            exclude_pathspec(Path::new("a b/*.json")),
            OsString::from(":(top,literal,exclude)a b/*.json")
        );
    }
}
