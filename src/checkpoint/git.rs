//! Runs git with a timeout and a clean environment.
//!
//! Every command runs through the process runner ([`crate::process`]) in a
//! process group of its own, so that a timeout kills git and anything it
//! started (a test's `sleep`): a surviving grandchild would otherwise keep
//! our pipes open and hang the loop.

use super::error::CheckpointError;
use super::planted;
use crate::process::{Cmd, End, ProcessError};
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;

/// Variables that would point git somewhere other than the repository we
/// discovered (they are set when spectr runs from a git hook or alias), or
/// change how our pathspecs are read.
const CLEARED_ENV: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
    "GIT_LITERAL_PATHSPECS",
    "GIT_GLOB_PATHSPECS",
    "GIT_NOGLOB_PATHSPECS",
    "GIT_ICASE_PATHSPECS",
    "LANGUAGE",
];

/// Our commits are bookkeeping, not the user's: a fixed identity (so it works
/// where none is configured, e.g. CI), no hooks, no signing prompts, and never
/// a split index for our temporary index files.
const BASE_ARGS: &[&str] = &[
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "commit.gpgsign=false",
    "-c",
    "core.splitIndex=false",
    "-c",
    "core.fsmonitor=false",
    // A chmod must make a file's cached stats stale (the mode cache relies on it).
    "-c",
    "core.trustctime=true",
    // Nothing in the background (a detached gc) and no signature program
    // (`gpg.program`) run on our behalf.
    "-c",
    "gc.auto=0",
    "-c",
    "maintenance.auto=false",
    "-c",
    "log.showSignature=false",
];

/// Snapshots hold the work tree's bytes exactly: no line-ending conversion,
/// no clean/smudge filter, no `ident`. With the attributes read from the
/// empty tree (`GIT_ATTR_SOURCE`) and no global attributes file, only
/// `.git/info/attributes` could still ask for a conversion.
const RAW_ARGS: &[&str] = &[
    "-c",
    "core.autocrlf=false",
    "-c",
    "core.attributesFile=/dev/null",
    "-c",
    "core.safecrlf=false",
];
const IDENTITY_NAME: &str = "spectr ralph";
const IDENTITY_EMAIL: &str = "ralph@spectr.invalid";

/// spectr's bookkeeping identity as a commit names it: `Name <email>`.
pub(crate) fn spectr_ident() -> String {
    format!("{IDENTITY_NAME} <{IDENTITY_EMAIL}>")
}

/// How to reach git for one repository.
#[derive(Debug, Clone)]
pub(crate) struct Git {
    pub(crate) program: PathBuf,
    pub(crate) timeout: Duration,
    /// Working directory for every command (the work tree root once known).
    pub(crate) cwd: PathBuf,
    /// Set once discovered, so git never re-discovers from the environment.
    pub(crate) git_dir: Option<PathBuf>,
    /// Set once discovered: a `commondir` file an agent writes into the git
    /// folder cannot point our git at a config of its own.
    pub(crate) common_dir: Option<PathBuf>,
    pub(crate) work_tree: Option<PathBuf>,
    /// The empty tree: attributes are read from it, i.e. there are none.
    pub(crate) attr_source: Option<String>,
}

pub(crate) struct GitOutput {
    pub(crate) status: ExitStatus,
    pub(crate) stdout: Vec<u8>,
    pub(crate) stderr: Vec<u8>,
}

impl GitOutput {
    pub(crate) fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).trim().to_owned()
    }

    /// Stdout as text without the trailing newline.
    pub(crate) fn stdout_line(&self) -> String {
        String::from_utf8_lossy(&self.stdout).trim_end().to_owned()
    }
}

/// One git invocation being built.
pub(crate) struct GitCmd<'g> {
    git: &'g Git,
    args: Vec<OsString>,
    index: Option<PathBuf>,
    stdin: Option<Vec<u8>>,
    c_locale: bool,
    inherit_repo_env: bool,
    user_config: bool,
    /// The user's own identity (their config and `GIT_AUTHOR_*` /
    /// `GIT_COMMITTER_*` variables) instead of spectr's bookkeeping one.
    user_identity: bool,
    /// Set last (`GIT_CONFIG_COUNT`): over every config file; a key or value
    /// holding `=` or a newline is passed as is.
    config: Vec<(String, String)>,
}

impl Git {
    pub(crate) fn cmd<I, S>(&self, args: I) -> GitCmd<'_>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        GitCmd {
            git: self,
            args: args.into_iter().map(|a| a.as_ref().to_owned()).collect(),
            index: None,
            stdin: None,
            c_locale: false,
            inherit_repo_env: false,
            user_config: false,
            user_identity: false,
            config: Vec::new(),
        }
    }
}

impl GitCmd<'_> {
    pub(crate) fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    pub(crate) fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Use this index file instead of the user's (`GIT_INDEX_FILE`).
    pub(crate) fn index(mut self, path: &Path) -> Self {
        self.index = Some(path.to_owned());
        self
    }

    pub(crate) fn stdin(mut self, input: Vec<u8>) -> Self {
        self.stdin = Some(input);
        self
    }

    /// Untranslated messages, for the one place we read git's stderr.
    pub(crate) fn c_locale(mut self) -> Self {
        self.c_locale = true;
        self
    }

    /// Keep GIT_DIR / GIT_WORK_TREE from our environment (discovery only).
    pub(crate) fn inherit_repo_env(mut self) -> Self {
        self.inherit_repo_env = true;
        self
    }

    /// Read the user's configuration as is (no conversion overrides).
    pub(crate) fn user_config(mut self) -> Self {
        self.user_config = true;
        self
    }

    /// Commits made as the user (a task's commit), not as spectr.
    pub(crate) fn user_identity(mut self) -> Self {
        self.user_identity = true;
        self
    }

    /// One more setting, over every config file.
    pub(crate) fn config(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.config.push((key.into(), value.into()));
        self
    }

    /// Starts it to be talked to: its stdin and stdout are pipes for the
    /// caller, stderr is dropped (its `ok` lines say what went right).
    pub(crate) fn spawn_talking(self) -> Result<crate::process::Child, CheckpointError> {
        let command = self.describe();
        self.build()
            .stdin_pipe()
            .stdout(crate::process::Sink::Pipe)
            .stderr(crate::process::Sink::Null)
            .spawn()
            .map_err(|e| match e {
                ProcessError::Spawn { source, .. } => CheckpointError::Spawn { command, source },
                e => CheckpointError::io(
                    format!("while starting {command}"),
                    &self.git.program,
                    e.into_io(),
                ),
            })
    }

    /// Runs and requires exit status 0; returns stdout.
    pub(crate) fn run(self) -> Result<Vec<u8>, CheckpointError> {
        let command = self.describe();
        let out = self.output()?;
        if out.status.success() {
            Ok(out.stdout)
        } else {
            Err(CheckpointError::Git {
                command,
                code: out.status.code(),
                stderr: out.stderr_text(),
            })
        }
    }

    /// Runs and returns whatever the exit status was; only a failure to start,
    /// an I/O failure or a timeout is an error.
    pub(crate) fn output(self) -> Result<GitOutput, CheckpointError> {
        let command = self.describe();
        let timeout = self.git.timeout;
        let mut cmd = self.build();
        if let Some(input) = self.stdin {
            cmd = cmd.input(input);
        }
        match cmd.output(timeout) {
            Ok(out) => match out.end {
                End::Exited(status) => Ok(GitOutput {
                    status,
                    stdout: out.stdout,
                    stderr: out.stderr,
                }),
                End::TimedOut | End::Cancelled => Err(CheckpointError::Timeout {
                    command,
                    after: timeout,
                }),
            },
            Err(ProcessError::Spawn { source, .. }) => {
                Err(CheckpointError::Spawn { command, source })
            }
            Err(e) => Err(CheckpointError::io(
                format!("while running {command}"),
                &self.git.program,
                e.into_io(),
            )),
        }
    }

    /// The process to run: our config flags and a clean environment (the
    /// runner gives it a process group of its own; stdin is `/dev/null`
    /// unless input is given).
    fn build(&self) -> Cmd {
        let mut cmd = Cmd::new(&self.git.program).args(BASE_ARGS);
        if !self.user_config {
            cmd = cmd.args(RAW_ARGS);
        }
        if self.index.is_some() {
            // Our temporary indexes are read only by this git and by us: no
            // trailing checksum (hashing 1 MB at 10k files, on each write and
            // each read). A git without the option writes one as always.
            cmd = cmd.args(["-c", "index.skipHash=true"]);
        }
        cmd = cmd.args(&self.args).current_dir(&self.git.cwd);
        for var in CLEARED_ENV {
            if self.inherit_repo_env && (*var == "GIT_DIR" || *var == "GIT_WORK_TREE") {
                continue;
            }
            cmd = cmd.env_remove(var);
        }
        cmd = cmd.env_remove("GIT_ATTR_SOURCE");
        // Clean and smudge filters an agent could have planted, off (there
        // is no switch for all of them: see `planted`).
        let mut config = match (&self.git.common_dir, &self.git.git_dir) {
            (Some(common), Some(git_dir)) if !self.user_config => {
                planted::filters_off(&planted::filter_names(common, git_dir))
            }
            _ => Vec::new(),
        };
        config.extend(self.config.iter().cloned());
        if !config.is_empty() {
            // Replaces an inherited count (its keys are not read then).
            cmd = cmd.env("GIT_CONFIG_COUNT", config.len().to_string());
        }
        for (i, (key, value)) in config.iter().enumerate() {
            cmd = cmd
                .env(format!("GIT_CONFIG_KEY_{i}"), key)
                .env(format!("GIT_CONFIG_VALUE_{i}"), value);
        }
        if let Some(tree) = &self.git.attr_source
            && !self.user_config
        {
            cmd = cmd.env("GIT_ATTR_SOURCE", tree);
        }
        if let Some(dir) = &self.git.git_dir {
            cmd = cmd.env("GIT_DIR", dir);
        }
        if let Some(dir) = &self.git.common_dir {
            cmd = cmd.env("GIT_COMMON_DIR", dir);
        }
        if let Some(tree) = &self.git.work_tree {
            cmd = cmd.env("GIT_WORK_TREE", tree);
        }
        if let Some(index) = &self.index {
            cmd = cmd.env("GIT_INDEX_FILE", index);
        }
        if self.c_locale {
            cmd = cmd.env("LC_ALL", "C");
        }
        if !self.user_identity {
            cmd = cmd
                .env("GIT_AUTHOR_NAME", IDENTITY_NAME)
                .env("GIT_AUTHOR_EMAIL", IDENTITY_EMAIL)
                .env("GIT_COMMITTER_NAME", IDENTITY_NAME)
                .env("GIT_COMMITTER_EMAIL", IDENTITY_EMAIL);
        }
        cmd.env("GIT_TERMINAL_PROMPT", "0")
            // Never a pager or an editor from the repository's config.
            .env("GIT_PAGER", "cat")
            .env("GIT_EDITOR", "true")
    }

    fn describe(&self) -> String {
        let mut s = String::from("git");
        for a in &self.args {
            s.push(' ');
            s.push_str(&a.to_string_lossy());
            if s.len() > 200 {
                s.push_str(" ...");
                break;
            }
        }
        s
    }
}

/// The git release that first merges onto a given base
/// (`git merge-tree --write-tree --merge-base`): lanes' merge-backs and a
/// task commit over the user's own changes need it.
pub const MERGE_BASE_GIT: (u32, u32) = (2, 40);

/// `(major, minor)` of `git version 2.39.5` (vendor suffixes ignored).
pub(crate) fn parse_version(text: &str) -> Option<(u32, u32)> {
    let number = text.trim().strip_prefix("git version ")?;
    let mut parts = number.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

impl Git {
    /// This git's `(major, minor)`; `None` when it cannot be told.
    pub(crate) fn version(&self) -> Option<(u32, u32)> {
        let out = self.cmd(["version"]).c_locale().output().ok()?;
        parse_version(&String::from_utf8_lossy(&out.stdout))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn versions_are_read_with_vendor_suffixes() {
        assert_eq!(parse_version("git version 2.39.5\n"), Some((2, 39)));
        assert_eq!(parse_version("git version 2.47.3"), Some((2, 47)));
        assert_eq!(
            parse_version("git version 2.39.3 (Apple Git-146)"),
            Some((2, 39))
        );
        assert_eq!(parse_version("git version 2.45.windows.1"), Some((2, 45)));
        assert_eq!(parse_version("nonsense"), None);
    }

    fn envs(cmd: &Cmd) -> BTreeMap<String, Option<String>> {
        cmd.get_envs()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.map(|v| v.to_string_lossy().into_owned()),
                )
            })
            .collect()
    }

    fn git() -> Git {
        Git {
            program: PathBuf::from("git"),
            timeout: Duration::from_secs(30),
            cwd: PathBuf::from("/repo"),
            git_dir: Some(PathBuf::from("/repo/.git")),
            common_dir: None,
            work_tree: Some(PathBuf::from("/repo")),
            attr_source: None,
        }
    }

    #[test]
    fn inherited_git_variables_are_replaced_or_cleared() {
        let git = git();
        let env = envs(&git.cmd(["status"]).build());
        assert_eq!(env["GIT_DIR"].as_deref(), Some("/repo/.git"));
        assert_eq!(env["GIT_WORK_TREE"].as_deref(), Some("/repo"));
        assert_eq!(env["GIT_INDEX_FILE"], None, "cleared, not inherited");
        assert_eq!(env["GIT_NAMESPACE"], None);
        assert_eq!(env["GIT_COMMITTER_NAME"].as_deref(), Some("spectr ralph"));
        assert_eq!(env["GIT_AUTHOR_EMAIL"].as_deref(), Some(IDENTITY_EMAIL));
    }

    #[test]
    fn discovery_alone_honours_git_dir_and_work_tree() {
        let git = Git {
            git_dir: None,
            work_tree: None,
            ..git()
        };
        let env = envs(&git.cmd(["rev-parse"]).inherit_repo_env().build());
        assert!(!env.contains_key("GIT_DIR"), "inherited: {env:?}");
        assert!(!env.contains_key("GIT_WORK_TREE"), "inherited: {env:?}");
        assert_eq!(env["GIT_INDEX_FILE"], None, "still cleared");
        let env = envs(&git.cmd(["rev-parse"]).build());
        assert_eq!(env["GIT_DIR"], None, "cleared for every other command");
    }

    #[test]
    fn snapshots_read_no_attributes_but_user_config_reads_them() {
        let git = Git {
            attr_source: Some("4b825dc642cb6eb9a060e54bf8d69288fbee4904".into()),
            ..git()
        };
        let cmd = git.cmd(["add", "-A"]).build();
        assert!(envs(&cmd)["GIT_ATTR_SOURCE"].is_some());
        let args: Vec<_> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert!(args.contains(&"core.autocrlf=false".to_owned()), "{args:?}");
        let cmd = git.cmd(["config", "core.autocrlf"]).user_config().build();
        assert_eq!(envs(&cmd)["GIT_ATTR_SOURCE"], None);
        let args: Vec<_> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert!(
            !args.contains(&"core.autocrlf=false".to_owned()),
            "{args:?}"
        );
    }

    #[test]
    fn settings_over_the_config_files_go_through_the_environment() {
        let git = git();
        let env = envs(&git.cmd(["status"]).build());
        assert!(!env.contains_key("GIT_CONFIG_COUNT"), "{env:?}");
        let cmd = git
            .cmd(["merge-tree"])
            .config("merge.a=b.driver", "x = y")
            .config("merge.default", "text")
            .build();
        let env = envs(&cmd);
        assert_eq!(env["GIT_CONFIG_COUNT"].as_deref(), Some("2"));
        assert_eq!(env["GIT_CONFIG_KEY_0"].as_deref(), Some("merge.a=b.driver"));
        assert_eq!(env["GIT_CONFIG_VALUE_0"].as_deref(), Some("x = y"));
        assert_eq!(env["GIT_CONFIG_KEY_1"].as_deref(), Some("merge.default"));
    }

    #[test]
    fn a_temporary_index_is_passed_explicitly() {
        let git = git();
        let cmd = git.cmd(["add", "-A"]).index(Path::new("/tmp/i")).build();
        assert_eq!(envs(&cmd)["GIT_INDEX_FILE"].as_deref(), Some("/tmp/i"));
        let args: Vec<_> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert!(
            args.contains(&"commit.gpgsign=false".to_owned()),
            "{args:?}"
        );
        assert!(
            args.contains(&"core.hooksPath=/dev/null".to_owned()),
            "{args:?}"
        );
        assert_eq!(&args[args.len() - 2..], ["add", "-A"]);
    }
}
