//! Running a started process to its end and keeping its output: both pipes
//! drained on threads (a chatty process never blocks on a full pipe), a
//! deadline, an optional cancel, and the group stopped for sure.

use super::child::Child;
use super::error::ProcessError;
use crossbeam_channel::RecvTimeoutError;
use std::io::Read;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

/// How long the pipes are still read once the process is over, when a
/// process that left its tree unseen may hold them (see [`AfterExit::StopTheRest`]).
pub const PIPE_DRAIN_LIMIT: Duration = Duration::from_secs(2);

/// How often a cancel, or an exit while the pipes stay open, is looked for.
const POLL: Duration = Duration::from_millis(20);

/// What happens once the process has exited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterExit {
    /// Its output ends when the pipes close, which must happen before the
    /// deadline. For programs whose helpers end with them (git with hooks
    /// and filters off); a timeout returns without the output.
    AwaitPipes,
    /// Whatever is left of its tree is killed as soon as it exits (or is
    /// stopped), and the pipes are read for at most [`PIPE_DRAIN_LIMIT`]
    /// more: a user's command may leave a daemon holding them.
    StopTheRest,
}

/// How to run a started process to its end.
pub struct Collect<'a> {
    timeout: Duration,
    cancel: Option<&'a dyn Fn() -> bool>,
    after_exit: AfterExit,
    /// Keep only each stream's last this many bytes.
    tail: Option<usize>,
}

impl<'a> Collect<'a> {
    /// Everything it writes, within `timeout`, [`AfterExit::AwaitPipes`].
    pub fn new(timeout: Duration) -> Collect<'a> {
        Collect {
            timeout,
            cancel: None,
            after_exit: AfterExit::AwaitPipes,
            tail: None,
        }
    }

    pub fn after_exit(mut self, after_exit: AfterExit) -> Collect<'a> {
        self.after_exit = after_exit;
        self
    }

    /// Stops it early (as [`End::Cancelled`]) once `cancel` says so; asked
    /// every few milliseconds.
    pub fn cancel_when(mut self, cancel: &'a dyn Fn() -> bool) -> Collect<'a> {
        self.cancel = Some(cancel);
        self
    }

    /// Keeps only the last `bytes` of each stream, so a flood costs bounded
    /// memory.
    pub fn tail(mut self, bytes: usize) -> Collect<'a> {
        self.tail = Some(bytes);
        self
    }
}

/// How the process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    Exited(ExitStatus),
    /// The deadline passed: it was killed with its group.
    TimedOut,
    /// The cancel said so: it was killed with its group.
    Cancelled,
}

/// What a process wrote, and how it ended.
#[derive(Debug)]
pub struct Output {
    pub end: End,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl Output {
    /// Its exit status, when it exited by itself.
    pub fn status(&self) -> Option<ExitStatus> {
        match self.end {
            End::Exited(s) => Some(s),
            End::TimedOut | End::Cancelled => None,
        }
    }

    /// Whether it exited with status 0.
    pub fn success(&self) -> bool {
        self.status().is_some_and(|s| s.success())
    }
}

type Chunk = (bool, std::io::Result<Vec<u8>>);

impl Child {
    /// Runs it to its end as `how` says: drains stdout and stderr (when they
    /// are pipes), waits for its exit, kills it with its group at the
    /// deadline or a cancel, and reaps it. Errors are ours (a pipe or wait
    /// failing); the process is killed and reaped before one returns.
    pub fn collect(mut self, how: &Collect<'_>) -> Result<Output, ProcessError> {
        let deadline = Instant::now() + how.timeout;
        let (tx, rx) = crossbeam_channel::bounded::<Chunk>(2);
        let mut pending = 0;
        let pipes = [
            (
                true,
                self.take_stdout()
                    .map(|p| Box::new(p) as Box<dyn Read + Send>),
            ),
            (
                false,
                self.take_stderr()
                    .map(|p| Box::new(p) as Box<dyn Read + Send>),
            ),
        ];
        for (is_stdout, pipe) in pipes {
            let Some(pipe) = pipe else { continue };
            let (tx, tail) = (tx.clone(), how.tail);
            // Readers are detached: after a kill they end with the pipe.
            let started = std::thread::Builder::new()
                .name("process-output".into())
                .spawn(move || {
                    let _ = tx.send((is_stdout, read_all(pipe, tail)));
                });
            if let Err(source) = started {
                return Err(self.fail_thread("read its output", source));
            }
            pending += 1;
        }
        drop(tx);
        let mut out = Output {
            end: End::TimedOut,
            stdout: Vec::new(),
            stderr: Vec::new(),
        };
        let polls = how.cancel.is_some() || how.after_exit == AfterExit::StopTheRest;
        let cancelled = || how.cancel.is_some_and(|c| c());
        let mut end = None;
        // Until the pipes close (or, when polling, it exits or is cancelled).
        while pending > 0 {
            let wake = if polls {
                deadline.min(Instant::now() + POLL)
            } else {
                deadline
            };
            match rx.recv_deadline(wake) {
                Ok(chunk) => {
                    pending -= 1;
                    if let Err(source) = out.keep(chunk) {
                        return Err(self.fail_io(source));
                    }
                }
                Err(RecvTimeoutError::Disconnected) => pending = 0,
                Err(RecvTimeoutError::Timeout) => {
                    if cancelled() {
                        end = Some(End::Cancelled);
                    } else if Instant::now() >= deadline {
                        end = Some(End::TimedOut);
                    } else if how.after_exit == AfterExit::StopTheRest {
                        match self.try_wait() {
                            Ok(Some(status)) => end = Some(End::Exited(status)),
                            Ok(None) => {}
                            Err(source) => return Err(self.fail_io(source)),
                        }
                    }
                    if end.is_some() {
                        break;
                    }
                }
            }
        }
        // The pipes are closed, so it is exiting: look often at first.
        let mut pause = Duration::from_micros(200);
        let end = loop {
            if let Some(end) = end {
                break end;
            }
            match self.try_wait() {
                Ok(Some(status)) => break End::Exited(status),
                Ok(None) => {}
                Err(source) => return Err(self.fail_io(source)),
            }
            if cancelled() {
                break End::Cancelled;
            }
            let now = Instant::now();
            if now >= deadline {
                break End::TimedOut;
            }
            std::thread::sleep(pause.min(deadline - now));
            pause = (pause * 2).min(POLL);
        };
        out.end = end;
        match end {
            End::TimedOut | End::Cancelled => {
                if let Err(source) = self.stop(Duration::ZERO) {
                    return Err(self.fail_io(source));
                }
            }
            End::Exited(_) if how.after_exit == AfterExit::StopTheRest => self.kill(),
            End::Exited(_) => {}
        }
        if how.after_exit == AfterExit::StopTheRest {
            let limit = Instant::now() + PIPE_DRAIN_LIMIT;
            while pending > 0 {
                let Ok(chunk) = rx.recv_deadline(limit) else {
                    break;
                };
                pending -= 1;
                // A read failing this late only loses output.
                let _ = out.keep(chunk);
            }
        }
        Ok(out)
    }

    fn fail_io(mut self, source: std::io::Error) -> ProcessError {
        self.kill();
        ProcessError::Io {
            program: self.program().to_string(),
            source,
        }
    }
}

impl Output {
    fn keep(&mut self, (is_stdout, read): Chunk) -> std::io::Result<()> {
        let bytes = read?;
        if is_stdout {
            self.stdout = bytes;
        } else {
            self.stderr = bytes;
        }
        Ok(())
    }
}

/// Reads `pipe` to its end, keeping at most the last `tail` bytes.
fn read_all(mut pipe: Box<dyn Read + Send>, tail: Option<usize>) -> std::io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    let Some(tail) = tail else {
        pipe.read_to_end(&mut buf)?;
        return Ok(buf);
    };
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = match pipe.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        buf.extend_from_slice(&chunk[..n]);
        // Trimmed once it holds twice the tail: each byte moves at most once.
        if buf.len() > tail.saturating_mul(2) {
            buf.drain(..buf.len() - tail);
        }
    }
    if buf.len() > tail {
        buf.drain(..buf.len() - tail);
    }
    Ok(buf)
}
