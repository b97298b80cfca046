//! Model errors: every one names the file (and line and column where there is
//! one) and says what to do next.
//!
//! Errors that point into a file carry a boxed [`FileDiag`] (source text, span,
//! label, help) so that `ModelError` stays small while miette can still render
//! the offending text.

use miette::{Diagnostic, LabeledSpan, NamedSource, SourceCode, SourceSpan};
use std::fmt;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum ModelError {
    /// `hint`: where it looked (the changes folder) and what to do: the
    /// nearest ids when some are near, else `spectr list`.
    #[error("change '{id}' not found")]
    #[diagnostic(help("{hint}"))]
    ChangeNotFound { id: String, hint: Box<str> },

    #[error("tasks.jsonc not found for change '{id}'")]
    #[diagnostic(help("run `spectr accept {id}` first to create it from tasks.md"))]
    TasksNotFound { id: String },

    /// Something that is not a file where a tasks file should be: never
    /// opened (a named pipe would wait forever).
    #[error("{} is {what}, not a file: it cannot be read as the change's tasks", path.display())]
    #[diagnostic(help(
        "replace it with a regular file (for a spectr change, `spectr accept <change-id>` writes tasks.jsonc from tasks.md)"
    ))]
    NotAFile { path: PathBuf, what: &'static str },

    #[error("{message}")]
    Io {
        message: String,
        #[source]
        source: std::io::Error,
    },

    /// The file is not valid JSONC.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Syntax(Box<FileDiag>),

    /// Valid JSONC, but not the shape of a tasks file (wrong type, missing
    /// field, `parent` mismatch, a file referenced twice, ...).
    #[error(transparent)]
    #[diagnostic(transparent)]
    Invalid(Box<FileDiag>),

    /// The file is not UTF-8: the diagnostic points at the first bad byte.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Encoding(Box<FileDiag>),

    /// A `status` value other than pending / in_progress / completed.
    #[error(transparent)]
    #[diagnostic(transparent)]
    UnknownStatus(Box<FileDiag>),

    /// A task whose `id` is empty.
    #[error(transparent)]
    #[diagnostic(transparent)]
    EmptyId(Box<FileDiag>),

    /// The same task id defined twice (in one file or across files).
    #[error(transparent)]
    #[diagnostic(transparent)]
    DuplicateId(Box<FileDiag>),

    /// `children: "$ref:FILE"` names a file that does not exist.
    #[error(transparent)]
    #[diagnostic(transparent)]
    RefMissing(Box<FileDiag>),

    /// `$ref` files that reference each other in a loop.
    #[error(transparent)]
    #[diagnostic(transparent)]
    RefCycle(Box<FileDiag>),

    /// A `$ref` pointing outside the change folder.
    #[error(transparent)]
    #[diagnostic(transparent)]
    RefEscapes(Box<FileDiag>),

    /// The file on disk no longer matches what was read: someone else (often the
    /// agent) edited it. Nothing was written.
    #[error("{} changed on disk since it was read; nothing was written", path.display())]
    #[diagnostic(help("reload the tasks (TaskSet::reload) and apply the change again"))]
    Stale { path: PathBuf },

    #[error("task '{id}' not found in change '{change}'")]
    #[diagnostic(help("check the task id against the change's tasks.jsonc"))]
    TaskNotFound { id: String, change: String },

    #[error("task '{id}' in {} is a container; its status follows its children", path.display())]
    #[diagnostic(help("set the status of its child tasks instead"))]
    ContainerStatus { id: String, path: PathBuf },

    #[error("no tasks.md in OpenSpec change folder {}", path.display())]
    #[diagnostic(help("write tasks.md with `## 1. Title` sections of `- [ ]` checkboxes"))]
    TasksMdNotFound { path: PathBuf },

    // Discovery and change resolution (src/model/project.rs).
    #[error("no spectr/ or openspec/ folder found in {} or above it (looked up to {})", .start.display(), .stop.display())]
    #[diagnostic(help(
        "run spectr from inside a project, or set SPECTR_ROOT to the folder that holds spectr/"
    ))]
    NoProject {
        start: PathBuf,
        /// The last folder looked at: the git root, or the filesystem root.
        stop: PathBuf,
    },

    #[error("SPECTR_ROOT is set to '{}', but {reason}", .path.display())]
    #[diagnostic(help(
        "point SPECTR_ROOT at the folder that holds spectr/ (or at spectr/ itself), or unset it"
    ))]
    SpectrRootInvalid { path: PathBuf, reason: String },

    #[error("change id '{id}' is ambiguous: it matches {}", .candidates.join(", "))]
    #[diagnostic(help("type more of the id, or the full id"))]
    AmbiguousChange { id: String, candidates: Vec<String> },

    #[error("invalid change id '{id}': {reason}")]
    #[diagnostic(help(
        "a change id is a folder name under spectr/changes/, e.g. add-greeting-cli"
    ))]
    InvalidChangeId { id: String, reason: String },

    #[error("'{id}' is a folder under changes/ but not a change: it has no proposal.md")]
    #[diagnostic(help("add {}/proposal.md, or run `spectr list` to see the active changes", .dir.display()))]
    NotAChange { id: String, dir: PathBuf },
}

impl ModelError {
    /// An I/O error with a message naming what was being done and to which file.
    pub fn io(what: &str, path: &Path, source: std::io::Error) -> ModelError {
        ModelError::Io {
            message: format!("cannot {what} {}: {source}", path.display()),
            source,
        }
    }

    /// The located detail, for errors that point into a file.
    pub fn file_diag(&self) -> Option<&FileDiag> {
        match self {
            ModelError::Syntax(d)
            | ModelError::Encoding(d)
            | ModelError::Invalid(d)
            | ModelError::UnknownStatus(d)
            | ModelError::EmptyId(d)
            | ModelError::DuplicateId(d)
            | ModelError::RefMissing(d)
            | ModelError::RefCycle(d)
            | ModelError::RefEscapes(d) => Some(d),
            _ => None,
        }
    }
}

/// A problem at one place in one file: path, 1-based line and column, the
/// source text (for miette to show the offending text), a label and a help text.
#[derive(Debug)]
pub struct FileDiag {
    pub path: PathBuf,
    pub line: usize,
    pub column: usize,
    pub message: String,
    pub label: String,
    pub help: String,
    pub src: NamedSource<String>,
    pub span: SourceSpan,
}

impl FileDiag {
    /// Builds a diagnostic for bytes `start..end` of `text` (the file at
    /// `path`). Offsets are clamped to the text, so any span is safe.
    pub fn new(
        path: &Path,
        text: &str,
        start: usize,
        end: usize,
        message: impl Into<String>,
        label: impl Into<String>,
        help: impl Into<String>,
    ) -> FileDiag {
        let start = floor_char_boundary(text, start.min(text.len()));
        let end = floor_char_boundary(text, end.clamp(start, text.len()));
        let (line, column) = line_col(text, start);
        FileDiag {
            path: path.to_path_buf(),
            line,
            column,
            message: shown(&message.into(), false),
            label: label.into(),
            help: help.into(),
            src: NamedSource::new(path.display().to_string(), shown(text, true)),
            span: SourceSpan::from(start..end),
        }
    }

    /// The text the span covers.
    pub fn snippet(&self) -> &str {
        let start = self.span.offset();
        let end = start + self.span.len();
        self.src.inner().get(start..end).unwrap_or("")
    }
}

impl fmt::Display for FileDiag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.path.display(),
            self.line,
            self.column,
            self.message
        )
    }
}

impl std::error::Error for FileDiag {}

impl Diagnostic for FileDiag {
    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new(&self.help))
    }

    fn source_code(&self) -> Option<&dyn SourceCode> {
        Some(&self.src)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        Some(Box::new(std::iter::once(
            LabeledSpan::new_primary_with_span(Some(self.label.clone()), self.span),
        )))
    }
}

/// `text` with each control character replaced by a visible one of the same
/// length in bytes, so that spans into it stay valid: an error that quotes a
/// file must not send the file's escape sequences to the terminal (miette
/// prints source snippets as they are). `lines` keeps line breaks (a source
/// text); otherwise they become spaces (a one-line message). The UI applies
/// its own filter (`crate::text`) on top; this one keeps the snippet aligned.
pub fn shown(text: &str, lines: bool) -> String {
    let needs = |c: char| c.is_control() && c != '\t';
    if !text.chars().any(needs) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' if lines => out.push('\n'),
            '\r' if lines && chars.peek() == Some(&'\n') => out.push('\r'),
            '\n' | '\r' if !lines => out.push(' '),
            // U+0080..U+009F take two bytes in UTF-8, as does U+00B7.
            c if needs(c) && c.len_utf8() == 2 => out.push('\u{b7}'),
            c if needs(c) => out.push('?'),
            c => out.push(c),
        }
    }
    out
}

/// `bytes` (the content of `path`) as text, or a diagnostic at the first byte
/// that is not UTF-8: its line and column, the byte, and what to do.
pub fn decode_utf8(path: &Path, bytes: Vec<u8>) -> Result<String, Box<FileDiag>> {
    let err = match String::from_utf8(bytes) {
        Ok(text) => return Ok(text),
        Err(e) => e,
    };
    let at = err.utf8_error().valid_up_to();
    let bad_len = err.utf8_error().error_len().unwrap_or(1);
    let bytes = err.into_bytes();
    let shown: Vec<String> = bytes[at..]
        .iter()
        .take(bad_len)
        .map(|b| format!("0x{b:02X}"))
        .collect();
    let utf16 = bytes.starts_with(&[0xFF, 0xFE]) || bytes.starts_with(&[0xFE, 0xFF]);
    let help = if utf16 {
        "this file is UTF-16: save it as UTF-8 (without a byte-order mark)"
    } else {
        "save the file as UTF-8 (e.g. `iconv -f WINDOWS-1252 -t UTF-8`), or retype the character there"
    };
    // Every byte before `at` is valid, so the lossy text agrees with the file
    // up to the bad byte, which shows as U+FFFD.
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let end = at + text[at..].chars().next().map_or(0, char::len_utf8);
    Err(Box::new(FileDiag::new(
        path,
        &text,
        at,
        end,
        format!(
            "not valid UTF-8 (byte {} at byte offset {at})",
            shown.join(" ")
        ),
        "not UTF-8",
        help,
    )))
}

/// 1-based line and column (in characters) of byte `offset` in `text`.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = floor_char_boundary(text, offset.min(text.len()));
    let before = &text[..offset];
    let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

fn floor_char_boundary(text: &str, mut i: usize) -> usize {
    while i > 0 && !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// What a path that exists but is not a regular file is, for
/// [`ModelError::NotAFile`]: `None` for a regular file (links followed) or
/// nothing there.
pub(crate) fn not_a_file(path: &Path) -> Option<ModelError> {
    use std::os::unix::fs::FileTypeExt;
    let kind = std::fs::metadata(path).ok()?.file_type();
    let what = if kind.is_file() {
        return None;
    } else if kind.is_dir() {
        "a folder"
    } else if kind.is_fifo() {
        "a named pipe (FIFO)"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else {
        "not a regular file"
    };
    Some(ModelError::NotAFile {
        path: path.to_path_buf(),
        what,
    })
}

impl ModelError {
    /// No change `id` in `dir` among `ids`: says where it looked and the
    /// nearest ids, as a typo'd option value is answered.
    pub fn change_not_found(id: &str, dir: Option<&Path>, ids: &[&str]) -> ModelError {
        let near = crate::text::nearest(id, ids, 3);
        let looked = dir.map_or_else(String::new, |d| format!("looked in {}: ", d.display()));
        let hint = match near.as_slice() {
            [] => "run `spectr list` to see the active changes".to_string(),
            [one] => format!("did you mean '{one}'? (`spectr list` shows the active changes)"),
            many => format!(
                "did you mean one of: {}? (`spectr list` shows the active changes)",
                many.iter()
                    .map(|n| format!("'{n}'"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        ModelError::ChangeNotFound {
            id: id.to_string(),
            hint: format!("{looked}{hint}").into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_chars_not_bytes() {
        let text = "ab\ncé\"x";
        assert_eq!(line_col(text, 0), (1, 1));
        assert_eq!(line_col(text, 3), (2, 1));
        // 'é' is two bytes; the quote after it is column 3.
        assert_eq!(line_col(text, 6), (2, 3));
        assert_eq!(line_col(text, 999), (2, 5));
    }

    #[test]
    fn quoted_file_text_cannot_drive_the_terminal() {
        let text = "{\"status\": \"x\u{1b}]0;t\u{7}\u{1b}[2J\u{9b}\"}\r\n\r";
        let d = FileDiag::new(
            Path::new("t"),
            text,
            11,
            text.len() - 4,
            format!("unknown status {}", &text[11..text.len() - 4]),
            "here",
            "fix it",
        );
        let src = d.src.inner();
        assert_eq!(src.len(), text.len(), "spans stay valid");
        assert_eq!(src, "{\"status\": \"x?]0;t??[2J·\"}\r\n?");
        assert_eq!(d.message, "unknown status \"x?]0;t??[2J·\"");
    }

    #[test]
    fn utf8_errors_point_at_the_first_bad_byte() {
        let path = Path::new("/x/tasks.md");
        assert_eq!(decode_utf8(path, b"ok\n".to_vec()).unwrap(), "ok\n");
        let d = decode_utf8(path, b"## 1. A\n- [ ] caf\xE9 x\n\xFF".to_vec()).unwrap_err();
        assert_eq!((d.line, d.column), (2, 10));
        assert!(
            d.to_string()
                .starts_with("/x/tasks.md:2:10: not valid UTF-8 (byte 0xE9"),
            "{d}"
        );
        assert!(d.help.contains("save the file as UTF-8"), "{}", d.help);
        assert_eq!(d.snippet(), "\u{fffd}");
        let d = decode_utf8(path, vec![0xFF, 0xFE, b'{', 0]).unwrap_err();
        assert_eq!((d.line, d.column), (1, 1));
        assert!(d.help.contains("UTF-16"), "{}", d.help);
    }

    #[test]
    fn display_names_file_line_column() {
        let d = FileDiag::new(
            Path::new("/x/tasks.jsonc"),
            "{\n  \"status\": \"done\"\n}",
            14,
            20,
            "unknown status \"done\"",
            "here",
            "use pending",
        );
        assert_eq!(
            d.to_string(),
            "/x/tasks.jsonc:2:13: unknown status \"done\""
        );
        assert_eq!(d.snippet(), "\"done\"");
        let e = ModelError::UnknownStatus(Box::new(d));
        assert!(e.to_string().starts_with("/x/tasks.jsonc:2:13"));
        assert_eq!(
            Diagnostic::help(&e).map(|h| h.to_string()).as_deref(),
            Some("use pending")
        );
        assert!(std::mem::size_of::<ModelError>() <= 64);
    }
}
