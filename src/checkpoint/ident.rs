//! The user's identities for a task's commit made without git: asked of
//! git once a run (`git var GIT_AUTHOR_IDENT` and `GIT_COMMITTER_IDENT`,
//! each checked as strictly as `git commit-tree` checks it), dated per
//! commit in the local time zone as git dates them. Where git would write
//! something else, or write it otherwise (a date fixed by the environment,
//! a commit encoding that is not UTF-8, an identity that is not UTF-8,
//! objects to be synced to disk), there are none, and git makes the commit.

/// `Name <email>` of the author and the committer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UserIdents {
    pub(crate) author: String,
    pub(crate) committer: String,
}

impl UserIdents {
    /// From `git var`'s two answers (dated identities) and the config
    /// lines that would make git write a commit otherwise (`git config -z`
    /// items); `None`: git must make the commits.
    pub(crate) fn from_git(author: &[u8], committer: &[u8], config: &[u8]) -> Option<UserIdents> {
        let line = |bytes: &[u8]| -> Option<String> {
            let text = std::str::from_utf8(bytes).ok()?;
            undated(text.strip_suffix('\n').unwrap_or(text))
        };
        let otherwise = config
            .split(|&b| b == 0)
            .filter(|item| !item.is_empty())
            .any(|item| {
                let text = String::from_utf8_lossy(item);
                let (key, value) = text.split_once('\n').unwrap_or((&text, ""));
                match key {
                    "i18n.commitencoding" => !is_utf8_name(value),
                    // Objects synced as git writes them: git's to write.
                    "core.fsync" => true,
                    "core.fsyncobjectfiles" => !matches!(value, "false" | "no" | "off" | "0"),
                    _ => false,
                }
            });
        if otherwise {
            return None;
        }
        Some(UserIdents {
            author: line(author)?,
            committer: line(committer)?,
        })
    }
}

/// The config keys [`UserIdents::from_git`] looks at, as a regexp for
/// `git config --get-regexp`.
pub(crate) const CONFIG_KEYS: &str = r"^(i18n\.commitencoding|core\.fsync|core\.fsyncobjectfiles)$";

/// `Name <email>` of `Name <email> <seconds> <zone>`.
fn undated(ident: &str) -> Option<String> {
    let mut parts = ident.rsplitn(3, ' ');
    let (zone, seconds, who) = (parts.next()?, parts.next()?, parts.next()?);
    let dated = zone.len() == 5
        && zone.starts_with(['+', '-'])
        && seconds.bytes().all(|b| b.is_ascii_digit());
    (dated && who.ends_with('>')).then(|| who.to_owned())
}

/// git's own test for a UTF-8 encoding name (an empty one is not: git
/// writes an empty `encoding` header for it).
fn is_utf8_name(name: &str) -> bool {
    name.eq_ignore_ascii_case("utf-8") || name.eq_ignore_ascii_case("utf8")
}

/// Whether the environment fixes a commit's dates (git then uses them).
pub(crate) fn dates_fixed_by_env() -> bool {
    ["GIT_AUTHOR_DATE", "GIT_COMMITTER_DATE"]
        .iter()
        .any(|v| std::env::var_os(v).is_some())
}

/// The local time zone's offset at `seconds` as git writes it (`+0530`).
pub(crate) fn local_zone(seconds: nix::libc::time_t) -> Option<String> {
    let t = seconds;
    let mut tm = std::mem::MaybeUninit::<nix::libc::tm>::zeroed();
    // SAFETY: localtime_r writes only into `tm`, which is ours and large
    // enough; it returns null on failure, when `tm` is not read.
    let done = unsafe { nix::libc::localtime_r(&t, tm.as_mut_ptr()) };
    if done.is_null() {
        return None;
    }
    // SAFETY: localtime_r filled it in (it did not return null).
    let offset = unsafe { tm.assume_init() }.tm_gmtoff / 60;
    let sign = if offset < 0 { '-' } else { '+' };
    let offset = offset.abs();
    Some(format!("{sign}{:02}{:02}", offset / 60, offset % 60))
}

/// Whether `git commit-tree` takes `message` byte for byte: it refuses a
/// NUL, and rewrites as Latin-1 what it deems invalid UTF-8, which
/// includes the non-characters (U+FDD0 to U+FDEF, U+xxFFFE and U+xxFFFF).
pub(crate) fn message_kept_as_is(message: &str) -> bool {
    !message.chars().any(|c| {
        let c = u32::from(c);
        c == 0 || (c & 0xfffe) == 0xfffe || (0xfdd0..=0xfdef).contains(&c)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_are_read_from_git_var() {
        let (author, committer) = (
            b"Grace <g@x> 1795951805 -0230\n".as_slice(),
            b"Ada Lovelace <ada@example.com> 1795951805 +0000\n".as_slice(),
        );
        assert_eq!(
            UserIdents::from_git(author, committer, b""),
            Some(UserIdents {
                author: "Grace <g@x>".into(),
                committer: "Ada Lovelace <ada@example.com>".into(),
            })
        );
        type Case<'a> = (&'a [u8], &'a [u8], &'a [u8], &'a str);
        let cases: [Case; 6] = [
            (
                author,
                committer,
                b"i18n.commitencoding\nISO-8859-1\0",
                "an encoding",
            ),
            (
                author,
                committer,
                b"i18n.commitencoding\n\0",
                "an empty encoding",
            ),
            (
                author,
                committer,
                b"core.fsync\nloose-object\0",
                "synced objects",
            ),
            (
                author,
                committer,
                b"core.fsyncobjectfiles\ntrue\0",
                "synced objects",
            ),
            (b"Jos\xe9 <j@x> 1 +0000\n", committer, b"", "not UTF-8"),
            (b"no date <x>\n", committer, b"", "no date"),
        ];
        for (a, c, config, why) in cases {
            assert_eq!(UserIdents::from_git(a, c, config), None, "{why}");
        }
        let utf8 = b"i18n.commitencoding\nUTF-8\0core.fsyncobjectfiles\nfalse\0";
        assert!(UserIdents::from_git(author, committer, utf8).is_some());
    }

    #[test]
    fn messages_git_would_rewrite_are_told() {
        assert!(message_kept_as_is("1.1 Ünïcode ✓ 🦀\n\nbody\n"));
        assert!(!message_kept_as_is("a\u{FFFE}b"));
        assert!(!message_kept_as_is("a\u{1FFFF}b"));
        assert!(!message_kept_as_is("a\u{FDD0}b"));
        assert!(message_kept_as_is("a\u{FDCF}\u{E000}b"));
        assert!(!message_kept_as_is("nul\0here"));
    }

    #[test]
    fn the_zone_is_written_as_git_writes_it() {
        let zone = local_zone(1_795_951_805).expect("a zone");
        assert_eq!(zone.len(), 5, "{zone}");
        assert!(zone.starts_with(['+', '-']), "{zone}");
    }
}
