//! Model errors: every one names the file (and line and column where there is
//! one) and says what to do next.
//!
//! STUB: the model helper fills in the variants; the CLI renders them with miette.

#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum ModelError {
    #[error("change '{id}' not found")]
    #[diagnostic(help("run `spectr list` to see the active changes"))]
    ChangeNotFound { id: String },

    #[error("tasks.jsonc not found for change '{id}'")]
    #[diagnostic(help("run `spectr accept {id}` first to create it from tasks.md"))]
    TasksNotFound { id: String },

    #[error("{message}")]
    Io {
        message: String,
        #[source]
        source: std::io::Error,
    },

    // Discovery and change resolution (src/model/project.rs).
    #[error("no spectr/ or openspec/ folder found in {} or above it (looked up to {})", .start.display(), .stop.display())]
    #[diagnostic(help(
        "run spectr from inside a project, or set SPECTR_ROOT to the folder that holds spectr/"
    ))]
    NoProject {
        start: std::path::PathBuf,
        /// The last folder looked at: the git root, or the filesystem root.
        stop: std::path::PathBuf,
    },

    #[error("SPECTR_ROOT is set to '{}', but {reason}", .path.display())]
    #[diagnostic(help(
        "point SPECTR_ROOT at the folder that holds spectr/ (or at spectr/ itself), or unset it"
    ))]
    SpectrRootInvalid {
        path: std::path::PathBuf,
        reason: String,
    },

    #[error("change id '{id}' is ambiguous: it matches {}", .candidates.join(", "))]
    #[diagnostic(help("type more of the id, or the full id"))]
    AmbiguousChange { id: String, candidates: Vec<String> },

    #[error("invalid change id '{id}': {reason}")]
    #[diagnostic(help(
        "a change id is a folder name under spectr/changes/, e.g. add-greeting-cli"
    ))]
    InvalidChangeId { id: String, reason: String },
}
