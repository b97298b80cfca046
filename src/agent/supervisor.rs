//! The supervisor: runs one agent process in a session of its own, drains its
//! output, enforces timeouts and stops the whole process tree for sure.
//!
//! Threads per attempt: one writes the prompt to stdin and closes it; one
//! reads stdout (transcript + parse), one reads stderr (transcript + lines);
//! one waits for the direct child; one controller owns the clock, the
//! decisions and the public event channel. The controller sends
//! [`SupervisorEvent::Exited`] only once the direct child is reaped, no
//! process of its tree is alive and both output pipes reached end of file
//! (or, if a process that escaped the tree still holds them, after
//! [`PIPE_DRAIN_LIMIT`]); then the channel closes.
//!
//! A spawn failure (binary missing, bad working directory) is not an `Err`
//! from [`start`]: it arrives as the single `Exited` event, with
//! [`Ending::SpawnFailed`], so every attempt ends the same way and gets a
//! receipt. `start` returns `Err` only for our own trouble (transcript file,
//! threads).

use crate::agent::lines::{LineSplitter, parse_block};
use crate::agent::parse::{LineParser, parser_for, stderr_parser_for};
use crate::agent::process::{self, ProcessTree, start_in_own_session};
use crate::agent::ratelimit::{self, rate_limit_in_result};
use crate::agent::{
    AgentError, AgentEvent, AgentKind, CommandSpec, CompletionSignal, FinalResult, RateLimit,
    signal,
};
use crossbeam_channel::{Receiver, SendTimeoutError, Sender, bounded, never, unbounded};
use nix::sys::signal::Signal;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct SuperviseOptions {
    pub attempt_timeout: Option<Duration>,
    pub idle_timeout: Option<Duration>,
    /// How long the agent may linger after its final `result` line.
    pub result_grace: Duration,
    /// Between TERM and KILL.
    pub kill_grace: Duration,
    pub transcript: PathBuf,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "how", rename_all = "snake_case")]
pub enum Ending {
    Exited {
        code: i32,
    },
    Signaled {
        signal: i32,
    },
    AttemptTimeout,
    IdleTimeout,
    /// Stopped on request (completion seen, user key, shutdown), or by the
    /// supervisor when the agent lingered after its final result (reason
    /// [`REASON_AFTER_RESULT`]).
    Stopped {
        reason: String,
    },
    SpawnFailed {
        error: String,
    },
}

/// The `Stopped` reason when an agent was still running `result_grace` after
/// its final `result` line (a known Claude hang): its work is done.
pub const REASON_AFTER_RESULT: &str = "still running after its final result";

/// How long to keep reading after the whole process tree is gone, for a
/// process that escaped unseen (see [`ProcessTree`]) but holds our pipes.
pub const PIPE_DRAIN_LIMIT: Duration = Duration::from_secs(2);

#[derive(Debug, Clone)]
pub struct AgentExit {
    pub ending: Ending,
    pub duration: Duration,
    pub result: Option<FinalResult>,
    /// The agent's own final answer (where completion signals are read).
    pub final_answer: Option<String>,
    pub signal: Option<CompletionSignal>,
    /// A rejected rate limit seen during the attempt.
    pub rate_limited: Option<RateLimit>,
    /// The last lines of stderr (colour codes removed), for failures that
    /// need a cause shown.
    pub stderr_tail: String,
    /// The agent's session id as its first event named it (kept even when
    /// the agent is stopped before its final result).
    pub session_id: Option<String>,
    /// The model its first event named.
    pub model: Option<String>,
}

// One `Exited` per attempt among many small events: boxing it would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum SupervisorEvent {
    /// What the agent said since the last batch, in order: one read's worth,
    /// so a chatty agent costs one hand-over per read, not per line.
    Agents(Vec<AgentEvent>),
    Exited(AgentExit),
}

/// A handle that can stop the agent from any thread.
#[derive(Debug, Clone)]
pub struct AgentHandle {
    pid: u32,
    stop: Option<Sender<String>>,
    /// Shares what the supervisor observed, so a force-quit reaches the
    /// children that left the agent's session too.
    tree: Option<ProcessTree>,
}

impl AgentHandle {
    /// Stops the agent's whole process tree (TERM, then KILL after the kill
    /// grace). Idempotent and never blocks: the first reason is the one the
    /// exit reports; after the agent has ended it does nothing.
    pub fn stop(&self, reason: &str) {
        if let Some(tx) = &self.stop {
            let _ = tx.send(reason.to_string());
        }
    }

    /// The agent's process id (also its session and process-group id); 0 when
    /// it never started.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// A handle that controls nothing (for a run that never started, and for
    /// tests of code that takes a handle).
    pub fn inert() -> AgentHandle {
        AgentHandle {
            pid: 0,
            stop: None,
            tree: None,
        }
    }

    /// The agent's start time (clock ticks after boot), with [`Self::pid`]
    /// its identity; `None` when it never started.
    pub fn start_time(&self) -> Option<u64> {
        self.tree.as_ref().and_then(ProcessTree::leader_start)
    }

    /// SIGKILL to the agent's whole tree at once, without waiting: the
    /// force-quit path. Does nothing once the tree is gone.
    pub fn kill_now(&self) {
        if let Some(tree) = &self.tree {
            tree.clone().signal(Signal::SIGKILL);
        }
    }
}

#[derive(Debug)]
pub struct RunningAgent {
    pub events: Receiver<SupervisorEvent>,
    pub handle: AgentHandle,
}

/// Batches (one read of the agent's output each, at most `READ_CHUNK` bytes)
/// waiting for the consumer; past this the supervisor stops reading the agent
/// (which then blocks on its own writes) instead of growing memory: at most
/// about (4 + 8) reads' worth wait, whatever the agent writes.
const PUBLIC_CAPACITY: usize = 4;
const INTERNAL_CAPACITY: usize = 8;
/// One read of stdout takes what the (widened) pipe holds: a flooding agent
/// then costs a few large reads instead of many that contend with its writes
/// for the pipe. The buffer's pages are touched only as far as reads fill it.
const READ_CHUNK: usize = 1024 * 1024;
/// stderr carries a few lines; its reader keeps a small buffer.
const STDERR_READ_CHUNK: usize = 64 * 1024;
/// A "line" longer than this is cut and passed on as it is, so one endless
/// line cannot take all memory.
const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;
const STDERR_TAIL_LINES: usize = 20;
/// Plain-text agents: how many final stdout lines make up the final answer.
const TEXT_ANSWER_LINES: usize = 40;
/// Poll interval while the tree is being stopped or checked after an exit.
const SHUTDOWN_POLL: Duration = Duration::from_millis(20);
/// How often the running tree is looked at, to keep track of children that
/// leave the agent's session (see [`ProcessTree`]).
const OBSERVE_EVERY: Duration = Duration::from_secs(1);

/// Starts `spec` under supervision. See the module docs for the guarantees.
pub fn start(
    spec: CommandSpec,
    kind: AgentKind,
    opts: SuperviseOptions,
) -> Result<RunningAgent, AgentError> {
    let transcript = open_transcript(&opts.transcript)?;
    let (public_tx, public_rx) = bounded(PUBLIC_CAPACITY);

    let mut cmd = Command::new(&spec.program);
    cmd.args(&spec.args)
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(if spec.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    process::work_in(&mut cmd, &spec.cwd);
    start_in_own_session(&mut cmd);
    let started = Instant::now();
    let child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => {
            let error = spawn_error(&spec, &e);
            if let Ok(mut f) = transcript.lock() {
                let _ = writeln!(f, "spectr: {error}");
            }
            let exit = AgentExit {
                ending: Ending::SpawnFailed {
                    error: error.clone(),
                },
                duration: started.elapsed(),
                result: None,
                final_answer: None,
                signal: None,
                rate_limited: None,
                stderr_tail: error,
                session_id: None,
                model: None,
            };
            // The receiver is ours and the channel empty: this cannot block.
            let _ = public_tx.send(SupervisorEvent::Exited(exit));
            return Ok(RunningAgent {
                events: public_rx,
                handle: AgentHandle::inert(),
            });
        }
    };

    let pid = child.id();
    let mut tree = ProcessTree::new(pid).saving_to(process::members_file(&opts.transcript));
    match spawn_threads(
        child,
        &spec,
        kind,
        &opts,
        transcript,
        public_tx,
        started,
        tree.clone(),
    ) {
        Ok(stop_tx) => Ok(RunningAgent {
            events: public_rx,
            handle: AgentHandle {
                pid,
                stop: Some(stop_tx),
                tree: Some(tree),
            },
        }),
        Err(e) => {
            // Whatever started must not outlive the failure.
            tree.signal(Signal::SIGKILL);
            Err(e)
        }
    }
}

fn open_transcript(path: &Path) -> Result<Arc<Mutex<File>>, AgentError> {
    let err = |source| AgentError::Transcript {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    let file = File::create(path).map_err(err)?;
    Ok(Arc::new(Mutex::new(file)))
}

/// Why the agent could not start, naming what is missing.
fn spawn_error(spec: &CommandSpec, e: &std::io::Error) -> String {
    if !spec.cwd.is_dir() {
        return format!(
            "cannot start {}: working directory {} does not exist",
            spec.program.display(),
            spec.cwd.display()
        );
    }
    if e.kind() == std::io::ErrorKind::NotFound {
        return format!("cannot start {}: program not found", spec.program.display());
    }
    format!("cannot start {}: {e}", spec.program.display())
}

#[allow(clippy::too_many_arguments)]
fn spawn_threads(
    mut child: Child,
    spec: &CommandSpec,
    kind: AgentKind,
    opts: &SuperviseOptions,
    transcript: Arc<Mutex<File>>,
    public_tx: Sender<SupervisorEvent>,
    started: Instant,
    tree: ProcessTree,
) -> Result<Sender<String>, AgentError> {
    let thread_err = |what| move |source| AgentError::Thread { what, source };
    let (msg_tx, msg_rx) = bounded::<Msg>(INTERNAL_CAPACITY);
    let (stop_tx, stop_rx) = unbounded::<String>();
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());

    // The waiter owns the Child: its pid cannot be reused before it is reaped.
    let tx = msg_tx.clone();
    std::thread::Builder::new()
        .name("agent-wait".into())
        .spawn(move || {
            let msg = match child.wait() {
                Ok(status) => Msg::Exited(status),
                Err(e) => Msg::WaitFailed(e.to_string()),
            };
            let _ = tx.send(msg);
        })
        .map_err(thread_err("process waiter"))?;
    if let (Some(mut stdin), Some(text)) = (stdin, spec.stdin.clone()) {
        std::thread::Builder::new()
            .name("agent-stdin".into())
            .spawn(move || {
                // EPIPE when the agent exits without reading: nothing to do.
                let _ = stdin.write_all(text.as_bytes());
            })
            .map_err(thread_err("stdin writer"))?;
    }
    if let Some(stdout) = stdout {
        widen_pipe(&stdout);
        let (tx, t) = (msg_tx.clone(), transcript.clone());
        let parser = parser_for(kind);
        std::thread::Builder::new()
            .name("agent-stdout".into())
            .spawn(move || read_stream(stdout, Stream::Stdout, parser, &t, &tx, READ_CHUNK))
            .map_err(thread_err("stdout reader"))?;
    }
    if let Some(stderr) = stderr {
        let (tx, t) = (msg_tx, transcript);
        std::thread::Builder::new()
            .name("agent-stderr".into())
            .spawn(move || {
                let lines = stderr_parser_for(kind);
                read_stream(stderr, Stream::Stderr, lines, &t, &tx, STDERR_READ_CHUNK)
            })
            .map_err(thread_err("stderr reader"))?;
    }

    let mut controller = Controller::new(
        kind,
        opts.clone(),
        spec.prompt.clone(),
        started,
        tree,
        public_tx,
    );
    controller.usage_file = spec.usage_file.clone();
    std::thread::Builder::new()
        .name("agent-supervisor".into())
        .spawn(move || controller.run(msg_rx, stop_rx))
        .map_err(thread_err("controller"))?;
    Ok(stop_tx)
}

/// Asks for a larger pipe from the agent's stdout: with the default 64 KiB,
/// a chatty agent and its reader take turns blocking every few lines, and
/// the thread switches cost a fifth of the reading. Best effort: a smaller
/// pipe still works.
fn widen_pipe(pipe: &impl std::os::fd::AsFd) {
    #[cfg(target_os = "linux")]
    {
        use nix::fcntl::{FcntlArg, fcntl};
        // Any user may ask for up to 1 MiB (`/proc/sys/fs/pipe-max-size`).
        let _ = fcntl(pipe, FcntlArg::F_SETPIPE_SZ(1024 * 1024));
    }
    #[cfg(not(target_os = "linux"))]
    let _ = pipe;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stream {
    Stdout,
    Stderr,
}

enum Msg {
    /// What one read produced (possibly no whole line yet: still activity).
    Output(Vec<AgentEvent>),
    Eof(Stream),
    Exited(ExitStatus),
    WaitFailed(String),
}

/// Reads `pipe` to its end: every byte to the transcript (whole lines at a
/// time, so stdout and stderr never interleave inside a line), every line to
/// the parser, each read's events to the controller.
fn read_stream(
    mut pipe: impl Read,
    stream: Stream,
    mut parser: Box<dyn LineParser>,
    transcript: &Mutex<File>,
    tx: &Sender<Msg>,
    chunk: usize,
) {
    let mut buf = vec![0u8; chunk];
    let mut lines = LineSplitter::new(MAX_LINE_BYTES);
    let mut transcript_ok = true;
    let mut last_count = 0;
    let write = |bytes: &[u8], ok: &mut bool| {
        if *ok && let Ok(mut f) = transcript.lock() {
            *ok = f.write_all(bytes).is_ok();
        }
    };
    loop {
        let n = match pipe.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        // Sized like the last read's: a flood's reads are alike.
        let mut events = Vec::with_capacity(last_count);
        lines.feed(&buf[..n], |block| {
            write(block, &mut transcript_ok);
            parse_block(block, &mut *parser, &mut events);
        });
        last_count = events.len();
        if tx.send(Msg::Output(events)).is_err() {
            return;
        }
    }
    let mut events = Vec::new();
    let rest = lines.finish();
    write(&rest, &mut transcript_ok);
    parse_block(&rest, &mut *parser, &mut events);
    parser.finish(&mut events);
    if !transcript_ok {
        let what = if stream == Stream::Stdout {
            "stdout"
        } else {
            "stderr"
        };
        events.push(AgentEvent::Stderr {
            line: format!("spectr: could not write the agent's {what} to the transcript"),
        });
    }
    let _ = tx.send(Msg::Output(events));
    let _ = tx.send(Msg::Eof(stream));
}

/// Owns the attempt's clock and decisions; the only sender of public events.
struct Controller {
    kind: AgentKind,
    opts: SuperviseOptions,
    prompt: String,
    started: Instant,
    tree: ProcessTree,
    public: Sender<SupervisorEvent>,
    consumer_gone: bool,

    last_output: Instant,
    result_seen: Option<Instant>,
    /// Set when we decided to stop the agent (timeouts, stop requests).
    ending: Option<Ending>,
    term_sent: Option<Instant>,
    status: Option<ExitStatus>,
    wait_error: Option<String>,
    stdout_eof: bool,
    stderr_eof: bool,
    tree_gone: Option<Instant>,
    last_observed: Instant,

    result: Option<FinalResult>,
    last_text: Option<String>,
    text_tail: VecDeque<String>,
    stderr_tail: VecDeque<String>,
    rate_limited: Option<RateLimit>,
    session_id: Option<String>,
    model: Option<String>,
    /// Where the agent writes its usage at exit (copilot), read then.
    usage_file: Option<PathBuf>,
}

impl Controller {
    fn new(
        kind: AgentKind,
        opts: SuperviseOptions,
        prompt: String,
        started: Instant,
        tree: ProcessTree,
        public: Sender<SupervisorEvent>,
    ) -> Controller {
        Controller {
            kind,
            opts,
            prompt,
            started,
            tree,
            public,
            consumer_gone: false,
            last_output: started,
            result_seen: None,
            ending: None,
            term_sent: None,
            status: None,
            wait_error: None,
            stdout_eof: false,
            stderr_eof: false,
            tree_gone: None,
            last_observed: started,
            result: None,
            last_text: None,
            text_tail: VecDeque::new(),
            stderr_tail: VecDeque::new(),
            rate_limited: None,
            session_id: None,
            model: None,
            usage_file: None,
        }
    }

    fn run(mut self, msgs: Receiver<Msg>, stops: Receiver<String>) {
        let mut msgs = msgs;
        let mut stops = stops;
        loop {
            let wait = self.next_wake(Instant::now());
            crossbeam_channel::select! {
                recv(msgs) -> m => match m {
                    Ok(m) => self.handle(m, &stops),
                    // Every reader and the waiter are gone.
                    Err(_) => msgs = never(),
                },
                recv(stops) -> s => match s {
                    Ok(reason) => self.request_stop(Ending::Stopped { reason }),
                    // Every handle dropped: no more requests can come.
                    Err(_) => stops = never(),
                },
                default(wait) => {}
            }
            let now = Instant::now();
            self.tick(now);
            if self.done(now) {
                break;
            }
        }
        let exit = self.exit();
        if !self.consumer_gone {
            let _ = self.public.send(SupervisorEvent::Exited(exit));
        }
    }

    fn handle(&mut self, msg: Msg, stops: &Receiver<String>) {
        match msg {
            Msg::Output(events) => {
                self.last_output = Instant::now();
                for event in &events {
                    self.tally(event);
                }
                // Only a batch's last text can be the last one: one copy per
                // batch, not one per message.
                if let Some(text) = events.iter().rev().find_map(|e| match e {
                    AgentEvent::Text { text } => Some(text),
                    _ => None,
                }) {
                    self.last_text = Some(text.clone());
                }
                if !events.is_empty() {
                    self.forward(events, stops);
                }
            }
            Msg::Eof(Stream::Stdout) => self.stdout_eof = true,
            Msg::Eof(Stream::Stderr) => self.stderr_eof = true,
            Msg::Exited(status) => self.status = Some(status),
            Msg::WaitFailed(e) => {
                // Cannot happen for a child we own; treat it as gone, killed.
                self.wait_error = Some(e);
                self.status = Some(ExitStatus::from_raw(Signal::SIGKILL as i32));
            }
        }
    }

    /// Keeps what the exit report needs from each event (the last text is
    /// taken per batch, in `handle`).
    fn tally(&mut self, event: &AgentEvent) {
        match event {
            AgentEvent::Result { result } => {
                self.result_seen.get_or_insert_with(Instant::now);
                if let Some(limit) = rate_limit_in_result(result) {
                    self.rate_limited = Some(ratelimit::merge(self.rate_limited.take(), limit));
                }
                self.result = Some(result.clone());
            }
            AgentEvent::Init { session_id, model } => {
                if self.session_id.is_none() {
                    self.session_id.clone_from(session_id);
                }
                if self.model.is_none() {
                    self.model.clone_from(model);
                }
            }
            AgentEvent::Raw { line } if is_text_agent(self.kind) => {
                if self.text_tail.len() == TEXT_ANSWER_LINES {
                    self.text_tail.pop_front();
                }
                self.text_tail.push_back(line.clone());
            }
            AgentEvent::RateLimit { limit } if limit.status == "rejected" => {
                self.rate_limited = Some(ratelimit::merge(self.rate_limited.take(), limit.clone()))
            }
            AgentEvent::Stderr { line } => {
                if self.stderr_tail.len() == STDERR_TAIL_LINES {
                    self.stderr_tail.pop_front();
                }
                // Colour codes would leave fragments like `[31m` in failure details.
                let line = crate::text::strip(line);
                self.stderr_tail
                    .push_back(crate::agent::parse::one_line(&line, 500));
            }
            _ => {}
        }
    }

    /// Passes an event on, waiting (with the clock still running) while the
    /// consumer is behind.
    fn forward(&mut self, events: Vec<AgentEvent>, stops: &Receiver<String>) {
        let mut pending = SupervisorEvent::Agents(events);
        loop {
            if self.consumer_gone {
                return;
            }
            match self
                .public
                .send_timeout(pending, Duration::from_millis(100))
            {
                Ok(()) => return,
                Err(SendTimeoutError::Timeout(back)) => {
                    pending = back;
                    if let Ok(reason) = stops.try_recv() {
                        self.request_stop(Ending::Stopped { reason });
                    }
                    self.tick(Instant::now());
                }
                Err(SendTimeoutError::Disconnected(_)) => {
                    self.consumer_gone = true;
                    self.request_stop(Ending::Stopped {
                        reason: "nobody reads the agent's events".to_string(),
                    });
                    return;
                }
            }
        }
    }

    /// Starts stopping the tree for `ending` unless the agent already ended.
    fn request_stop(&mut self, ending: Ending) {
        if self.ending.is_some() || self.status.is_some() {
            return;
        }
        self.ending = Some(ending);
        self.terminate();
    }

    fn terminate(&mut self) {
        if self.term_sent.is_none() {
            self.term_sent = Some(Instant::now());
            self.tree.signal(Signal::SIGTERM);
        }
    }

    fn tick(&mut self, now: Instant) {
        if self.ending.is_none() && self.status.is_none() {
            if self
                .opts
                .attempt_timeout
                .is_some_and(|t| now >= self.started + t)
            {
                self.request_stop(Ending::AttemptTimeout);
            } else if self
                .opts
                .idle_timeout
                .is_some_and(|t| now >= self.last_output + t)
            {
                self.request_stop(Ending::IdleTimeout);
            } else if self
                .result_seen
                .is_some_and(|at| now >= at + self.opts.result_grace)
            {
                self.request_stop(Ending::Stopped {
                    reason: REASON_AFTER_RESULT.to_string(),
                });
            }
        }
        if self.status.is_none()
            && self.term_sent.is_none()
            && now >= self.last_observed + OBSERVE_EVERY
        {
            self.tree.observe();
            self.last_observed = now;
        }
        if self.tree_gone.is_some() {
            return;
        }
        if let Some(term) = self.term_sent
            && now >= term + self.opts.kill_grace
        {
            // Repeated every poll: a member may fork between two sweeps.
            self.tree.signal(Signal::SIGKILL);
        }
        if self.status.is_some() {
            if !self.tree.is_alive() {
                self.tree_gone = Some(now);
            } else {
                // The direct child is gone; whatever it left behind goes too.
                self.terminate();
            }
        }
    }

    fn done(&self, now: Instant) -> bool {
        match self.tree_gone {
            Some(gone) => (self.stdout_eof && self.stderr_eof) || now >= gone + PIPE_DRAIN_LIMIT,
            None => false,
        }
    }

    fn next_wake(&self, now: Instant) -> Duration {
        if self.status.is_some() || self.term_sent.is_some() {
            return SHUTDOWN_POLL;
        }
        let deadlines = [
            self.opts.attempt_timeout.map(|t| self.started + t),
            self.opts.idle_timeout.map(|t| self.last_output + t),
            self.result_seen.map(|at| at + self.opts.result_grace),
        ];
        let next = deadlines.into_iter().flatten().min();
        let wait = next.map_or(Duration::from_secs(1), |at| {
            at.saturating_duration_since(now)
        });
        wait.clamp(Duration::from_millis(1), Duration::from_secs(1))
    }

    fn exit(&mut self) -> AgentExit {
        let ending = self.ending.clone().unwrap_or_else(|| match self.status {
            Some(s) => match (s.code(), s.signal()) {
                (Some(code), _) => Ending::Exited { code },
                (None, Some(signal)) => Ending::Signaled { signal },
                (None, None) => Ending::Exited { code: -1 },
            },
            None => Ending::Exited { code: -1 },
        });
        let final_answer = self
            .result
            .as_ref()
            .map(|r| r.text.clone())
            .filter(|t| !t.trim().is_empty())
            .or_else(|| self.last_text.clone())
            .or_else(|| {
                let lines: Vec<&str> = self.text_tail.iter().map(String::as_str).collect();
                Some(lines.join("\n")).filter(|t| !t.trim().is_empty())
            });
        let signal = final_answer
            .as_deref()
            .and_then(|a| signal::detect(a, &self.prompt));
        // A limit that was hit but then passed (the attempt succeeded) is news,
        // not a reason to wait.
        let rate_limited = match &self.result {
            Some(r) if !r.is_error => None,
            _ => self.rate_limited.clone(),
        };
        // The agent has exited: a usage file it writes at exit is complete.
        if let (Some(result), Some(file)) = (&mut self.result, &self.usage_file)
            && let Some((usage, model)) = crate::agent::parse::copilot::read_usage_file(file)
        {
            result.usage.get_or_insert(usage);
            if result.model.is_none() {
                result.model = model;
            }
        }
        let mut stderr_tail: Vec<String> = self.stderr_tail.iter().cloned().collect();
        if let Some(e) = &self.wait_error {
            stderr_tail.push(format!("spectr: waiting for the agent failed: {e}"));
        }
        AgentExit {
            ending,
            duration: self.started.elapsed(),
            result: self.result.clone(),
            final_answer,
            signal,
            rate_limited,
            stderr_tail: stderr_tail.join("\n"),
            session_id: self.session_id.clone(),
            model: self.model.clone(),
        }
    }
}

fn is_text_agent(kind: AgentKind) -> bool {
    matches!(kind, AgentKind::Amp | AgentKind::Custom)
}
