//! The user's identities for a task's commit made without git: asked of
//! git once a run (`git var -l`: author and committer, each from the
//! environment or config, as `git commit-tree` would take them), dated per
//! commit in the local time zone as git dates them. Where git would write
//! something else (a date fixed by the environment, a commit encoding that
//! is not UTF-8) there are none, and git makes the commit.

/// `Name <email>` of the author and the committer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UserIdents {
    pub(crate) author: String,
    pub(crate) committer: String,
}

impl UserIdents {
    /// From `git var -l`'s output; `None` when either is missing, or the
    /// config names a commit encoding other than UTF-8 (git writes an
    /// `encoding` header then).
    pub(crate) fn parse(listing: &str) -> Option<UserIdents> {
        let (mut author, mut committer) = (None, None);
        for line in listing.lines() {
            let Some((key, value)) = line.split_once('=') else {
                continue;
            };
            match key {
                "GIT_AUTHOR_IDENT" => author = Some(undated(value)?),
                "GIT_COMMITTER_IDENT" => committer = Some(undated(value)?),
                "i18n.commitencoding" if !is_utf8_name(value) => return None,
                _ => {}
            }
        }
        Some(UserIdents {
            author: author?,
            committer: committer?,
        })
    }
}

/// `Name <email>` of `Name <email> <seconds> <zone>`.
fn undated(ident: &str) -> Option<String> {
    let mut parts = ident.rsplitn(3, ' ');
    let (zone, seconds, who) = (parts.next()?, parts.next()?, parts.next()?);
    let dated = zone.len() == 5
        && zone.starts_with(['+', '-'])
        && seconds.bytes().all(|b| b.is_ascii_digit());
    (dated && who.ends_with('>')).then(|| who.to_owned())
}

/// git's own test for a UTF-8 encoding name.
fn is_utf8_name(name: &str) -> bool {
    name.is_empty() || name.eq_ignore_ascii_case("utf-8") || name.eq_ignore_ascii_case("utf8")
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
/// includes the non-characters U+xxFFFE and U+xxFFFF.
pub(crate) fn message_kept_as_is(message: &str) -> bool {
    !message
        .chars()
        .any(|c| c == '\0' || (u32::from(c) & 0xfffe) == 0xfffe)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_are_read_from_git_var() {
        let listing = "GIT_COMMITTER_IDENT=Ada Lovelace <ada@example.com> 1795951805 +0000\n\
                       GIT_AUTHOR_IDENT=Grace <g@x> 1795951805 -0230\n\
                       core.bare=false\n";
        assert_eq!(
            UserIdents::parse(listing),
            Some(UserIdents {
                author: "Grace <g@x>".into(),
                committer: "Ada Lovelace <ada@example.com>".into(),
            })
        );
        assert_eq!(UserIdents::parse("GIT_AUTHOR_IDENT=a <b> 1 +0000\n"), None);
        let latin = format!("{listing}i18n.commitencoding=ISO-8859-1\n");
        assert_eq!(UserIdents::parse(&latin), None, "git writes an encoding");
        let utf8 = format!("{listing}i18n.commitencoding=UTF-8\n");
        assert!(UserIdents::parse(&utf8).is_some());
        assert_eq!(undated("no date <x>"), None);
    }

    #[test]
    fn messages_git_would_rewrite_are_told() {
        assert!(message_kept_as_is("1.1 Ünïcode ✓ 🦀\n\nbody\n"));
        assert!(!message_kept_as_is("a\u{FFFE}b"));
        assert!(!message_kept_as_is("a\u{1FFFF}b"));
        assert!(!message_kept_as_is("nul\0here"));
    }

    #[test]
    fn the_zone_is_written_as_git_writes_it() {
        let zone = local_zone(1_795_951_805).expect("a zone");
        assert_eq!(zone.len(), 5, "{zone}");
        assert!(zone.starts_with(['+', '-']), "{zone}");
    }
}
