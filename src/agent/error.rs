//! Agent errors: each says which agent or file is involved and what to do next.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum AgentError {
    /// `--agent` was not given and none of the supported CLIs is on PATH.
    #[error("no coding-agent CLI found on PATH (looked for: {looked_for})")]
    #[diagnostic(help(
        "install one of them, or name any command with --agent-cmd '<command line>':\n{install}"
    ))]
    NoneInstalled { looked_for: String, install: String },

    /// The chosen agent's binary is not on PATH.
    #[error("{name} (`{binary}`) is not installed or not on PATH")]
    #[diagnostic(help("install it with: {install}\nor pick another agent with --agent"))]
    NotInstalled {
        name: &'static str,
        binary: String,
        install: &'static str,
    },

    /// The agent answers `--version` outside the sandbox but fails inside
    /// it: every attempt would fail the same way.
    #[error(
        "{name} (`{program}`) fails inside the sandbox but works outside it: `{program} --version` {detail}"
    )]
    #[diagnostic(help(
        "inside the sandbox everything but the task's work tree, the agent's own state folders and a private /tmp is read-only, and of the real /tmp only the agent's installation, spectr itself, the files the agent's variables name (OPENCODE_CONFIG…) and an empty TMPDIR of its own are seen. If its answer names a folder it cannot write, add it to `ralph: sandbox_writable`; if it names a file it cannot find under /tmp, install the agent outside /tmp ({install}, with a --prefix in your home); or run without --sandbox"
    ))]
    BrokenInSandbox {
        name: &'static str,
        program: String,
        detail: String,
        install: &'static str,
    },

    /// `--agent custom` without `--agent-cmd`.
    #[error("--agent custom needs --agent-cmd '<command line>'")]
    #[diagnostic(help(
        "for example: --agent-cmd 'my-agent --yes'  (the prompt goes to stdin, or to a file \
         named where {{prompt_file}} appears)"
    ))]
    CustomCmdMissing,

    /// `--agent-cmd ''`: nothing to run.
    #[error("--agent-cmd is empty")]
    #[diagnostic(help(
        "give the command line of your agent, e.g. --agent-cmd 'my-agent --yes', or drop \
         --agent-cmd to use an installed agent CLI"
    ))]
    CustomCmdEmpty,

    /// `--agent-cmd` could not be split into words.
    #[error("cannot read --agent-cmd `{cmd}`: {reason}")]
    #[diagnostic(help(
        "quote words with '…' or \"…\"; pipes, redirections and $VARIABLES are not expanded \
         (wrap the command in sh -c '…' if you need a shell)"
    ))]
    CustomCmdSyntax { cmd: String, reason: String },

    /// `--agent-cmd`'s program was not found.
    #[error("the --agent-cmd program `{program}` was not found")]
    #[diagnostic(help("give a path to it, or add its folder to PATH"))]
    CustomProgramMissing { program: String },

    /// The prompt file for an agent could not be written.
    #[error("cannot write the prompt file {}", path.display())]
    #[diagnostic(help("check that the folder exists and is writable"))]
    PromptFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The attempt's own folder (for files the agent writes, such as
    /// copilot's usage file) could not be created.
    #[error("cannot create the attempt folder {}", path.display())]
    #[diagnostic(help("check that the change's .ralph folder is writable"))]
    AttemptDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The attempt's transcript file could not be created.
    #[error("cannot create the agent transcript {}", path.display())]
    #[diagnostic(help("check that the state folder is writable (see --state-dir)"))]
    Transcript {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The supervisor could not start one of its own threads.
    #[error("cannot start the agent supervisor: {what}")]
    #[diagnostic(help("the system may be out of threads or memory; try again"))]
    Thread {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
}
