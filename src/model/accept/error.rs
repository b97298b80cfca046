//! What can go wrong in `spectr accept`: its own module so that the tasks.md
//! parser (shared with `md_sync`) needs nothing else of `accept`.

use crate::model::ModelError;
use miette::{NamedSource, SourceSpan};
use std::path::PathBuf;

#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum AcceptError {
    #[error("change '{change}' has no tasks.md (looked for {})", path.display())]
    #[diagnostic(help(
        "write the checklist in tasks.md (`## 1. Section` headings, `- [ ] task` lines), then run `spectr accept {change}` again"
    ))]
    NoTasksMd { change: String, path: PathBuf },

    #[error(
        "change '{change}' has no tasks.md to convert; its tasks.jsonc is already its task list"
    )]
    #[diagnostic(help(
        "edit {} directly, or write a tasks.md and run `spectr accept {change}` again (statuses are kept)", .jsonc.display()
    ))]
    NothingToConvert { change: String, jsonc: PathBuf },

    #[error("{} changed on disk while `spectr accept` ran; nothing was written", path.display())]
    #[diagnostic(help(
        "something else (an agent, an editor) is updating the tasks: let it finish, then run the command again"
    ))]
    ChangedMeanwhile { path: PathBuf },

    #[error("{}: no tasks found", path.display())]
    #[diagnostic(help(
        "tasks are checkbox lines such as `- [ ] Add the parser` under `## 1. Section` headings"
    ))]
    NoTasks { path: PathBuf },

    #[error("{}:{line}: section number {number} is used twice (first on line {first})", path.display())]
    #[diagnostic(help(
        "renumber the sections so each `## N.` is unique; task ids derive from them"
    ))]
    DuplicateSection {
        path: PathBuf,
        line: usize,
        first: usize,
        number: u64,
        #[source_code]
        src: std::sync::Arc<NamedSource<String>>,
        #[label("this section")]
        span: SourceSpan,
    },

    #[error("cannot keep task statuses: the existing {} does not load", path.display())]
    #[diagnostic(help(
        "fix the file where the error above points, or delete tasks.jsonc and tasks-*.jsonc to start over from tasks.md (statuses are then lost)"
    ))]
    ExistingUnreadable {
        path: PathBuf,
        #[source]
        #[diagnostic_source]
        source: ModelError,
    },

    #[error(transparent)]
    #[diagnostic(transparent)]
    Config(#[from] crate::model::spectr_yaml::ConfigError),

    /// tasks.md or tasks.jsonc is not a file (a named pipe, a folder).
    #[error(transparent)]
    #[diagnostic(transparent)]
    NotAFile(ModelError),

    /// tasks.md is not UTF-8 (the diagnostic points at the first bad byte).
    #[error(transparent)]
    #[diagnostic(transparent)]
    Encoding(Box<crate::model::FileDiag>),

    #[error("cannot {what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}
