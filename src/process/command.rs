//! A command to start: program, arguments, environment, folder, what it
//! reads, where its output goes, and the group it starts in. Building one
//! runs nothing; [`Cmd::spawn`] and [`Cmd::output`] do.

use super::child::Child;
use super::collect::{Collect, Output};
use super::error::ProcessError;
use std::ffi::OsStr;
use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// Where stdout or stderr goes.
#[derive(Debug)]
pub enum Sink {
    /// A pipe to us: read by [`Child::collect`] or taken with
    /// [`Child::take_stdout`] to stream it.
    Pipe,
    Null,
    /// A file: nothing a grandchild holds open can make us wait for it.
    File(File),
}

impl From<Sink> for Stdio {
    fn from(sink: Sink) -> Stdio {
        match sink {
            Sink::Pipe => Stdio::piped(),
            Sink::Null => Stdio::null(),
            Sink::File(f) => Stdio::from(f),
        }
    }
}

/// One process to start. It always starts as the leader of a process group
/// of its own (so it and whatever it starts can be stopped at once, and
/// Ctrl+C at the terminal reaches spectr, not it), with stdin from
/// `/dev/null` unless [`Cmd::input`] gives it bytes, and stdout and stderr
/// piped unless told otherwise.
#[derive(Debug)]
pub struct Cmd {
    std: std::process::Command,
    program: PathBuf,
    input: Option<Vec<u8>>,
    own_session: bool,
    stop_with_spectr: bool,
}

impl Cmd {
    pub fn new(program: impl AsRef<OsStr>) -> Cmd {
        let mut std = std::process::Command::new(program.as_ref());
        std.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        Cmd {
            std,
            program: PathBuf::from(program.as_ref()),
            input: None,
            own_session: false,
            stop_with_spectr: false,
        }
    }

    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Cmd {
        self.std.arg(arg);
        self
    }

    pub fn args<I, S>(mut self, args: I) -> Cmd
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.std.args(args);
        self
    }

    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Cmd {
        self.std.env(key, value);
        self
    }

    pub fn envs<I, K, V>(mut self, vars: I) -> Cmd
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        self.std.envs(vars);
        self
    }

    pub fn env_remove(mut self, key: impl AsRef<OsStr>) -> Cmd {
        self.std.env_remove(key);
        self
    }

    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Cmd {
        self.std.current_dir(dir);
        self
    }

    /// Starts in `dir` with `PWD` naming it. Every process spectr starts for
    /// an agent's work goes through here: a runtime that trusts `PWD`
    /// (Node's `process.env.PWD`, Python's `os.environ`) when it is not
    /// started through a shell would otherwise work in the folder spectr was
    /// started from (the user's tree, not the agent's lane).
    pub fn work_in(mut self, dir: &Path) -> Cmd {
        // Components drop a trailing `/` and `.`: PWD names the folder plainly.
        let pwd: PathBuf = std::path::absolute(dir)
            .unwrap_or_else(|_| dir.to_path_buf())
            .components()
            .collect();
        self.std.current_dir(dir).env("PWD", pwd);
        self
    }

    /// Writes `bytes` to its stdin (from a thread of its own, so a process
    /// that answers while it reads cannot deadlock us), then closes it.
    pub fn input(mut self, bytes: Vec<u8>) -> Cmd {
        self.std.stdin(Stdio::piped());
        self.input = Some(bytes);
        self
    }

    /// A pipe for stdin that stays open (taken with [`Child::take_stdin`]),
    /// for a process told things while it runs.
    pub fn stdin_pipe(mut self) -> Cmd {
        self.std.stdin(Stdio::piped());
        self
    }

    pub fn stdout(mut self, sink: Sink) -> Cmd {
        self.std.stdout(sink);
        self
    }

    pub fn stderr(mut self, sink: Sink) -> Cmd {
        self.std.stderr(sink);
        self
    }

    /// Starts it as the leader of a new session, not only a new group,
    /// detached from our terminal: job-control shells inside it move
    /// background jobs to new groups, which the session still holds.
    pub fn own_session(mut self) -> Cmd {
        self.own_session = true;
        self
    }

    /// On Linux it gets SIGTERM if spectr dies without cleaning up
    /// (`kill -9`), so it does not go on unsupervised; the next run stops
    /// whatever else it left behind. The kernel sends it when the *thread*
    /// that spawned it exits: spawn from a thread that lives as long as the
    /// process should (the loop's long-lived workers), never a short one.
    pub fn stop_with_spectr(mut self) -> Cmd {
        self.stop_with_spectr = true;
        self
    }

    /// The program as given.
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// Its arguments (for tests and messages).
    pub fn get_args(&self) -> std::process::CommandArgs<'_> {
        self.std.get_args()
    }

    /// The variables set or removed (`None`) on top of ours.
    pub fn get_envs(&self) -> std::process::CommandEnvs<'_> {
        self.std.get_envs()
    }

    /// Starts it. A thread that writes its input is started too; when that
    /// fails the process is killed and reaped before the error returns.
    pub fn spawn(mut self) -> Result<Child, ProcessError> {
        let (session, deathsig) = (self.own_session, self.stop_with_spectr);
        if session || deathsig {
            // SAFETY: the closure runs in the forked child before exec and
            // calls only setsid(2) and prctl(2), which are
            // async-signal-safe; it touches no memory of ours.
            unsafe {
                self.std.pre_exec(move || {
                    if session {
                        nix::unistd::setsid().map_err(std::io::Error::from)?;
                    } else {
                        nix::unistd::setpgid(
                            nix::unistd::Pid::from_raw(0),
                            nix::unistd::Pid::from_raw(0),
                        )
                        .map_err(std::io::Error::from)?;
                    }
                    #[cfg(target_os = "linux")]
                    if deathsig {
                        nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGTERM)
                            .map_err(std::io::Error::from)?;
                    }
                    Ok(())
                });
            }
        } else {
            // No pre_exec closure: std can still start it with posix_spawn
            // (much cheaper than fork for the many git commands of a run).
            self.std.process_group(0);
        }
        let program = self.program.display().to_string();
        let child = self.std.spawn().map_err(|source| ProcessError::Spawn {
            program: program.clone(),
            source,
        })?;
        Child::started(child, program, self.input)
    }

    /// Starts it and collects its output with [`Collect::new`]`(timeout)`.
    pub fn output(self, timeout: Duration) -> Result<Output, ProcessError> {
        self.spawn()?.collect(&Collect::new(timeout))
    }
}
