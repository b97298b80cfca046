//! What can go wrong running a process, naming the program.

/// A failure of our own while running a process (its exit status, a timeout
/// or a cancel are results, not errors: see [`super::End`]).
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// The program could not be started (not found, bad folder, no memory).
    #[error("cannot start {program}: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    /// A thread that feeds or drains the process could not be started; the
    /// process was stopped.
    #[error("cannot start a thread to {what} for {program}: {source}")]
    Thread {
        program: String,
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// Reading its output or waiting for it failed; the process was stopped.
    #[error("while running {program}: {source}")]
    Io {
        program: String,
        #[source]
        source: std::io::Error,
    },
}

impl ProcessError {
    /// The underlying I/O error, for callers with error types of their own.
    pub fn into_io(self) -> std::io::Error {
        match self {
            ProcessError::Spawn { source, .. }
            | ProcessError::Thread { source, .. }
            | ProcessError::Io { source, .. } => source,
        }
    }
}
