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
}
