//! What a snapshot needs beyond git's tree, kept in the snapshot commit's
//! message (no extra git command to store or read it): real file modes (git
//! keeps only 644/755), empty directories (git keeps none), the stash
//! (`refs/stash` and its reflog, which is the stash list), and where every
//! branch and tag pointed (so a revert puts back one the attempt deleted or
//! moved).
//!
//! Paths and the reflog are written with `%XX` escapes for `%`, control and
//! non-ASCII bytes; a path is its line's last field, so spaces stay as is.

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Marks a message written by this version; older checkpoints have none and
/// their revert leaves modes, empty directories and the stash alone.
const MARKER: &str = "meta: 1";
/// Says the branches and tags were recorded (there may be none).
const TIPS_MARKER: &str = "tips: recorded";

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Meta {
    /// False for a checkpoint taken before metadata existed.
    pub(crate) present: bool,
    /// The most common real modes of `100644` and `100755` files.
    pub(crate) default_modes: (u32, u32),
    /// Files whose real mode is not their git mode's default.
    pub(crate) modes: BTreeMap<Vec<u8>, u32>,
    /// Empty directories (repo-relative, no trailing slash).
    pub(crate) empty_dirs: Vec<Vec<u8>>,
    /// `refs/stash` at the checkpoint (none: there was no stash).
    pub(crate) stash: Option<String>,
    /// The stash reflog file's bytes, when refs are files.
    pub(crate) stash_log: Option<Vec<u8>>,
    /// `refs/heads/*` and `refs/tags/*`: name -> object id. `None` for a
    /// checkpoint taken before they were recorded (its revert leaves them).
    pub(crate) tips: Option<BTreeMap<String, String>>,
}

impl Meta {
    pub(crate) fn new() -> Self {
        Meta {
            present: true,
            default_modes: (0o644, 0o755),
            ..Meta::default()
        }
    }

    /// The mode a file of git mode `git_mode` had at the checkpoint.
    pub(crate) fn mode_of(&self, path: &[u8], git_mode: u32) -> u32 {
        if let Some(m) = self.modes.get(path) {
            return *m;
        }
        if !self.present {
            return if git_mode == 0o100755 { 0o755 } else { 0o644 };
        }
        if git_mode == 0o100755 {
            self.default_modes.1
        } else {
            self.default_modes.0
        }
    }

    /// Appends the metadata lines to a commit message.
    pub(crate) fn write_to(&self, msg: &mut String) {
        msg.push_str(MARKER);
        msg.push('\n');
        let _ = writeln!(
            msg,
            "default-modes: {:04o} {:04o}",
            self.default_modes.0, self.default_modes.1
        );
        for (path, mode) in &self.modes {
            let _ = writeln!(msg, "mode: {mode:04o} {}", escape(path));
        }
        for dir in &self.empty_dirs {
            let _ = writeln!(msg, "dir: {}", escape(dir));
        }
        if let Some(stash) = &self.stash {
            let _ = writeln!(msg, "stash: {stash}");
        }
        if let Some(log) = &self.stash_log {
            let _ = writeln!(msg, "stash-log: {}", escape(log));
        }
        if let Some(tips) = &self.tips {
            msg.push_str(TIPS_MARKER);
            msg.push('\n');
            // Ref names hold no spaces or control characters (git refuses them).
            for (name, oid) in tips {
                let _ = writeln!(msg, "tip: {oid} {name}");
            }
        }
    }

    /// Reads the metadata back from a commit object's text (headers first).
    pub(crate) fn parse_commit(commit: &[u8]) -> Meta {
        let mut meta = Meta::default();
        let body = match find(commit, b"\n\n") {
            Some(i) => &commit[i + 2..],
            None => return meta,
        };
        for line in body.split(|&b| b == b'\n') {
            let line = String::from_utf8_lossy(line);
            if line == MARKER {
                meta.present = true;
                meta.default_modes = (0o644, 0o755);
            } else if let Some(rest) = line.strip_prefix("default-modes: ") {
                let mut it = rest
                    .split(' ')
                    .filter_map(|m| u32::from_str_radix(m, 8).ok());
                if let (Some(a), Some(b)) = (it.next(), it.next()) {
                    meta.default_modes = (a, b);
                }
            } else if let Some(rest) = line.strip_prefix("mode: ") {
                if let Some((mode, path)) = rest.split_once(' ')
                    && let Ok(mode) = u32::from_str_radix(mode, 8)
                {
                    meta.modes.insert(unescape(path), mode);
                }
            } else if let Some(rest) = line.strip_prefix("dir: ") {
                meta.empty_dirs.push(unescape(rest));
            } else if let Some(rest) = line.strip_prefix("stash: ") {
                meta.stash = Some(rest.trim().to_owned());
            } else if let Some(rest) = line.strip_prefix("stash-log: ") {
                meta.stash_log = Some(unescape(rest));
            } else if line == TIPS_MARKER {
                meta.tips.get_or_insert_with(BTreeMap::new);
            } else if let Some(rest) = line.strip_prefix("tip: ")
                && let Some((oid, name)) = rest.split_once(' ')
            {
                meta.tips
                    .get_or_insert_with(BTreeMap::new)
                    .insert(name.to_owned(), oid.to_owned());
            }
        }
        meta
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

pub(crate) fn escape(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        if b == b'%' || !(0x20..0x7f).contains(&b) {
            let _ = write!(out, "%{b:02X}");
        } else {
            out.push(char::from(b));
        }
    }
    out
}

pub(crate) fn unescape(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Some(v) = std::str::from_utf8(&b[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(v);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_a_commit_message() {
        let mut meta = Meta::new();
        meta.default_modes = (0o664, 0o775);
        meta.modes.insert(b"a b/sec ret\n%".to_vec(), 0o600);
        meta.empty_dirs.push("é/x".as_bytes().to_vec());
        meta.stash = Some("abc".into());
        meta.stash_log = Some(b"0 1 u <u@x> 1 +0000\tWIP on main: x\n".to_vec());
        meta.tips = Some(BTreeMap::from([
            ("refs/heads/main".to_owned(), "a1".to_owned()),
            ("refs/tags/v1.0".to_owned(), "b2".to_owned()),
        ]));
        let mut msg = String::from("spectr ralph: checkpoint\n\nref: r\n");
        meta.write_to(&mut msg);
        let commit = format!("tree t\nauthor a\n\n{msg}");
        assert_eq!(Meta::parse_commit(commit.as_bytes()), meta);
        // Recorded with no branch or tag at all is not "not recorded".
        meta.tips = Some(BTreeMap::new());
        let mut msg = String::new();
        meta.write_to(&mut msg);
        let commit = format!("tree t\n\n{msg}");
        assert_eq!(
            Meta::parse_commit(commit.as_bytes()).tips,
            Some(BTreeMap::new())
        );
    }

    #[test]
    fn old_checkpoints_have_no_metadata() {
        let meta = Meta::parse_commit(b"tree t\n\nspectr ralph: checkpoint\n\nref: r\n");
        assert!(!meta.present);
        assert_eq!(meta.tips, None);
        assert_eq!(meta.mode_of(b"x", 0o100755), 0o755);
    }
}
