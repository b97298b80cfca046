//! What an attempt's exit report says, gathered from the agent's events as
//! they pass: its final result and answer, a rate limit, the last lines of
//! stderr, the session id and model.

use super::{AgentExit, Ending};
use crate::agent::ratelimit::{self, rate_limit_in_result};
use crate::agent::{AgentEvent, AgentKind, FinalResult, RateLimit, signal};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::{Duration, Instant};

const STDERR_TAIL_LINES: usize = 20;
/// Plain-text agents: how many final stdout lines make up the final answer.
const TEXT_ANSWER_LINES: usize = 40;

/// Keeps what the exit report needs from the agent's events.
pub(super) struct Tally {
    kind: AgentKind,
    /// When the final `result` line came (the controller's clock starts
    /// the result grace then).
    result_seen: Option<Instant>,
    result: Option<FinalResult>,
    last_text: Option<String>,
    text_tail: VecDeque<String>,
    stderr_tail: VecDeque<String>,
    /// The last stderr line that names an error: a crash's stack trace can
    /// push it out of the tail.
    stderr_error: Option<String>,
    rate_limited: Option<RateLimit>,
    session_id: Option<String>,
    model: Option<String>,
    /// Where the agent writes its usage at exit (copilot), read then.
    usage_file: Option<PathBuf>,
}

impl Tally {
    pub(super) fn new(kind: AgentKind, usage_file: Option<PathBuf>) -> Tally {
        Tally {
            kind,
            result_seen: None,
            result: None,
            last_text: None,
            text_tail: VecDeque::new(),
            stderr_tail: VecDeque::new(),
            stderr_error: None,
            rate_limited: None,
            session_id: None,
            model: None,
            usage_file,
        }
    }

    pub(super) fn result_seen(&self) -> Option<Instant> {
        self.result_seen
    }

    /// Takes in one read's worth of events.
    pub(super) fn batch(&mut self, events: &[AgentEvent]) {
        for event in events {
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
    }

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
                let line = crate::agent::parse::one_line(&crate::text::strip(line), 500);
                if crate::agent::receipt::is_error_line(&line) {
                    self.stderr_error = Some(line.clone());
                }
                self.stderr_tail.push_back(line);
            }
            _ => {}
        }
    }

    /// The exit report, once the agent has exited (a usage file it writes
    /// at exit is complete by then).
    pub(super) fn report(
        &mut self,
        ending: Ending,
        duration: Duration,
        prompt: &str,
        wait_error: Option<&str>,
    ) -> AgentExit {
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
            .and_then(|a| signal::detect(a, prompt));
        // A limit that was hit but then passed (the attempt succeeded) is news,
        // not a reason to wait.
        let rate_limited = match &self.result {
            Some(r) if !r.is_error => None,
            _ => self.rate_limited.clone(),
        };
        if let (Some(result), Some(file)) = (&mut self.result, &self.usage_file)
            && let Some((usage, model)) = crate::agent::parse::copilot::read_usage_file(file)
        {
            result.usage.get_or_insert(usage);
            if result.model.is_none() {
                result.model = model;
            }
        }
        let mut stderr_tail: Vec<String> = self.stderr_tail.iter().cloned().collect();
        // Pushed out by what followed it (a long stack trace): kept first.
        if let Some(error) = &self.stderr_error
            && !stderr_tail.contains(error)
        {
            stderr_tail.insert(0, error.clone());
        }
        if let Some(e) = wait_error {
            stderr_tail.push(format!("spectr: waiting for the agent failed: {e}"));
        }
        AgentExit {
            ending,
            duration,
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
