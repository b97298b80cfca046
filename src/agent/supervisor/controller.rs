//! The attempt's clock and decisions: timeouts, the result grace, stop
//! requests, TERM then KILL to the whole tree, and the end of the attempt
//! once the agent is reaped, its tree gone and its pipes drained.

use super::reader::{Msg, Stream};
use super::report::Tally;
use super::{
    AgentExit, Ending, PIPE_DRAIN_LIMIT, REASON_AFTER_RESULT, SuperviseOptions, SupervisorEvent,
};
use crate::agent::AgentEvent;
use crate::process::ProcessTree;
use crossbeam_channel::{Receiver, SendTimeoutError, Sender, never};
use nix::sys::signal::Signal;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

/// Poll interval while the tree is being stopped or checked after an exit.
const SHUTDOWN_POLL: Duration = Duration::from_millis(20);
/// How often the running tree is looked at, to keep track of children that
/// leave the agent's session (see [`ProcessTree`]).
const OBSERVE_EVERY: Duration = Duration::from_secs(1);

/// Owns the attempt's clock and decisions; the only sender of public events.
pub(super) struct Controller {
    opts: SuperviseOptions,
    prompt: String,
    started: Instant,
    tree: ProcessTree,
    public: Sender<SupervisorEvent>,
    consumer_gone: bool,

    last_output: Instant,
    /// Set when we decided to stop the agent (timeouts, stop requests).
    ending: Option<Ending>,
    term_sent: Option<Instant>,
    status: Option<ExitStatus>,
    wait_error: Option<String>,
    stdout_eof: bool,
    stderr_eof: bool,
    tree_gone: Option<Instant>,
    last_observed: Instant,

    /// What the exit report will say.
    tally: Tally,
    /// An ACP agent's conversation: its turn is cancelled before signals.
    acp: Option<std::sync::Arc<crate::agent::acp::AcpLink>>,
}

impl Controller {
    pub(super) fn new(
        tally: Tally,
        opts: SuperviseOptions,
        prompt: String,
        started: Instant,
        tree: ProcessTree,
        public: Sender<SupervisorEvent>,
    ) -> Controller {
        Controller {
            opts,
            prompt,
            started,
            tree,
            public,
            consumer_gone: false,
            last_output: started,
            ending: None,
            term_sent: None,
            status: None,
            wait_error: None,
            stdout_eof: false,
            stderr_eof: false,
            tree_gone: None,
            last_observed: started,
            tally,
            acp: None,
        }
    }

    /// An ACP agent's stop starts with `session/cancel` on `link`.
    pub(super) fn cancelling_with(
        mut self,
        link: Option<std::sync::Arc<crate::agent::acp::AcpLink>>,
    ) -> Controller {
        self.acp = link;
        self
    }

    pub(super) fn run(mut self, msgs: Receiver<Msg>, stops: Receiver<String>) {
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
                self.tally.batch(&events);
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
        // Said first; the signals follow whatever the agent does with it.
        if let Some(link) = &self.acp {
            link.cancel();
        }
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
                .tally
                .result_seen()
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
            self.tally
                .result_seen()
                .map(|at| at + self.opts.result_grace),
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
        self.tally.report(
            ending,
            self.started.elapsed(),
            &self.prompt,
            self.wait_error.as_deref(),
        )
    }
}
