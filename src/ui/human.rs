//! The human renderer: one line per loop event, agent output streamed as lines
//! prefixed with the task id, and (on a terminal) progress rows (see `progress`).

use crate::agent::AgentEvent;
use crate::agent::receipt::Receipt;
use crate::model::TaskStatus;
use crate::ralph::event::{
    CompletedVia, LoopEvent, NoticeLevel, Outcome, Reporter, RunEnd, Totals,
};
use crate::ui::agent_render;
// Text from files (ids, descriptions, reasons) goes through it.
use crate::ui::ansi;
use crate::ui::out::{self, Stdout};
use crate::ui::progress::Progress;
use console::style;
use std::collections::BTreeSet;
use std::time::Duration;

pub struct HumanReporter {
    color: bool,
    /// stdout is a terminal: a progress line is drawn once the run starts.
    terminal: bool,
    /// The overall progress row, and with parallel lanes one more row per
    /// running task, all drawn under the printed lines.
    progress: Option<Progress>,
    /// Shown under the header while keys are read from the terminal.
    key_legend: bool,
    /// The legend shown: the run's keys, or `spectr watch`'s.
    legend: &'static str,
    /// The tasks running now (several with `--jobs`).
    running: BTreeSet<String>,
    /// Why a task's next attempt runs though no try failed (a restart, a
    /// conflict to resolve): said in its header.
    again: std::collections::BTreeMap<String, &'static str>,
    /// Tasks that ran in a lane work tree.
    lane_tasks: BTreeSet<String>,
    /// The task whose question waits for an answer.
    asked: Option<String>,
    done: u64,
    out: Stdout,
    /// Scratch buffers reused for every agent event.
    rendered: String,
    block: String,
    /// The last task's painted `[id]` tag: agent events come in runs.
    tag_cache: Option<(crate::model::TaskId, String)>,
    /// `-v`: spectr's own bookkeeping too (transcript paths, work trees,
    /// checkpoint refs, status changes, merges, retries). Without it a task
    /// is its header, the agent's stream and one verdict line.
    verbose: bool,
    /// The run's budget and what was spent, kept up to date by the
    /// receipts, for the progress line.
    budget: Option<crate::ralph::budget::BudgetUse>,
    /// The progress line's text before the budget.
    message: String,
    /// The run's change, for the commands the end of a run names.
    change: String,
    /// The task commits this run made (`--commit task`), for the summary.
    commits: u64,
}

pub const KEY_LEGEND: &str =
    "keys: q/Ctrl+C quit · r restart task · s skip task · p pause after this task";

/// `spectr watch`'s keys: it only watches, so `q` leaves it.
pub const WATCH_LEGEND: &str = "keys: q/Ctrl+C detach (the run goes on) · r restart task · s skip task · p pause · x stop the run";

impl HumanReporter {
    /// `terminal`: stdout is a terminal (progress line, colour unless NO_COLOR).
    pub fn new(terminal: bool, key_legend: bool) -> HumanReporter {
        let color = terminal && console::colors_enabled();
        HumanReporter {
            color,
            terminal,
            progress: None,
            key_legend,
            legend: KEY_LEGEND,
            running: BTreeSet::new(),
            again: std::collections::BTreeMap::new(),
            lane_tasks: BTreeSet::new(),
            asked: None,
            done: 0,
            out: Stdout::for_stdout(),
            rendered: String::new(),
            block: String::new(),
            tag_cache: None,
            verbose: false,
            budget: None,
            message: String::new(),
            change: String::new(),
            commits: 0,
        }
    }

    /// `-v`: show spectr's bookkeeping lines as well.
    /// `spectr watch`: its keys' legend, when it reads keys.
    pub fn watch_legend(mut self, keys: bool) -> HumanReporter {
        self.key_legend = keys;
        self.legend = WATCH_LEGEND;
        self
    }

    pub fn verbose(mut self, verbose: bool) -> HumanReporter {
        self.verbose = verbose;
        self
    }

    /// A line shown only with `-v`.
    fn detail(&self, text: &str) {
        if self.verbose {
            self.line(&self.paint(text, |s| s.dim()));
        }
    }

    /// The progress line, drawn from the start of the run (not during the
    /// questions before it).
    fn start_progress(&mut self, len: u64) {
        if self.terminal && self.progress.is_none() {
            self.progress = Some(Progress::start(len));
        }
    }

    /// One progress row per task running in a lane (terminal only).
    fn start_lane_bar(&self, task: &str, text: String) {
        if let Some(p) = &self.progress {
            p.set_lane(task, text);
        }
    }

    fn end_lane_bar(&self, task: &str) {
        if let Some(p) = &self.progress {
            p.end_lane(task);
        }
    }

    /// A question was answered, or left unanswered when the run stopped.
    /// On a terminal the question is pinned under the progress rows by
    /// whoever asks it (see `progress::pin`), and the output goes on above
    /// it meanwhile: nothing is held. One left unanswered is taken down
    /// here, whatever became of its asker (a panic, a signal).
    fn question_answered(&mut self, answered: bool) {
        if answered || !self.terminal {
            return;
        }
        // The cursor it hid is shown and its line ended (by its guard, see
        // `ui::screen`; again is harmless).
        crate::ui::screen::restore();
        if let Some(p) = &self.progress {
            p.drop_question();
        }
    }

    fn line(&self, text: &str) {
        match &self.progress {
            Some(p) => p.print(text),
            None => self.out.line(text),
        }
    }

    /// Takes every progress line off the screen for good (the summary, the
    /// end).
    fn clear_bars(&mut self) {
        if let Some(p) = self.progress.take() {
            p.hide();
        }
    }

    /// Several lines, each ending with a newline.
    fn lines(&self, block: &str) {
        match &self.progress {
            // One redraw of the rows for the whole block, not one per line.
            Some(p) => {
                if !block.is_empty() {
                    p.print(block);
                }
            }
            None => self.out.text(block),
        }
    }

    fn paint(
        &self,
        text: &str,
        f: impl Fn(console::StyledObject<&str>) -> console::StyledObject<&str>,
    ) -> String {
        if self.color {
            f(style(text)).force_styling(true).to_string()
        } else {
            text.to_string()
        }
    }

    fn tag(&self, task: &impl std::fmt::Display) -> String {
        self.paint(&format!("[{task}]"), |s| s.cyan())
    }

    /// The one line that ends an attempt: its mark, its tag, `head`, the
    /// receipt (when an agent ran) and what decided the outcome.
    fn verdict(
        &self,
        ok: bool,
        task: &impl std::fmt::Display,
        head: &str,
        outcome: &Outcome,
        receipt: &Receipt,
    ) {
        let mark = if ok {
            self.paint("✓", |s| s.green())
        } else {
            self.paint("✗", |s| s.red())
        };
        let (decided, agent_said) = decided_by(outcome);
        let decided = crate::ui::ansi::clean(&decided);
        let stopped = matches!(outcome, Outcome::Stopped { .. });
        self.line(&format!(
            "{mark} {} {}",
            self.tag(task),
            agent_render::render_verdict(
                head, receipt, &decided, agent_said, ok, stopped, self.color
            )
        ));
    }

    /// An attempt ended: the progress row says what still runs when lanes
    /// run (a task of the user's tree keeps its name until the next one
    /// names itself).
    fn ended(&mut self, task: &str) {
        if self.lane_tasks.contains(task) || self.asked.is_some() {
            self.say_running();
        }
    }

    /// The progress row's message once the tasks running changed: a
    /// question waiting, how many lanes still run; nothing for a task of
    /// the user's tree that ended (the next one names itself).
    fn say_running(&mut self) {
        let lanes = self.running.iter().any(|t| self.lane_tasks.contains(t));
        let running = lanes.then(|| format!("{} running", self.running.len()));
        let message = match (&self.asked, running) {
            (Some(task), Some(r)) => format!("{task} waits for your answer · {r}"),
            (Some(task), None) => format!("{task} waits for your answer"),
            (None, Some(r)) => r,
            (None, None) => String::new(),
        };
        self.set_message(message);
    }

    fn set_message(&mut self, msg: String) {
        self.message = msg;
        if let Some(pb) = &self.progress {
            let shown = match &self.budget {
                Some(b) if self.message.is_empty() => b.short(),
                Some(b) => format!("{} · {}", self.message, b.short()),
                None => self.message.clone(),
            };
            pb.set_message(shown);
        }
    }

    /// An attempt's receipt counts against the budget on the progress line.
    fn spend(&mut self, receipt: &crate::agent::receipt::Receipt) {
        if let Some(b) = &mut self.budget {
            b.spent.add(receipt);
            let message = std::mem::take(&mut self.message);
            self.set_message(message);
        }
    }
}

use crate::text::count;

/// What decided an attempt's outcome, in words, for the end of its verdict
/// line: the tasks file, the agent's own word, or what overruled it (a
/// verify command, a merge conflict, a time limit); `true` when it was
/// overruled, so the line adds what the agent claimed and a failed verdict
/// never stands beside a bare `COMPLETE`.
fn decided_by(outcome: &Outcome) -> (String, bool) {
    match outcome {
        Outcome::Completed {
            via: CompletedVia::Status,
        } => ("marked completed in the tasks file".to_string(), false),
        Outcome::Completed {
            via: CompletedVia::Signal,
        } => ("the agent said COMPLETE".to_string(), false),
        // The agent's own FAILED (or its denied tools): its words suffice.
        Outcome::Failed { .. } | Outcome::Stopped { .. } => (outcome.describe(), false),
        _ => (outcome.describe(), true),
    }
}

/// The first line of a run.
/// A group of tasks by its top-level number: `tasks 2.x`; a group of one
/// task without sub-numbers (an OpenSpec story) is that task: `task 2`.
fn group(key: &str, single: bool) -> String {
    let key = crate::ui::ansi::clean(key);
    if single {
        format!("task {key}")
    } else {
        format!("tasks {key}.x")
    }
}

fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// A lane's number from its work tree's folder (`…/lane-2` -> `2`), the
/// name its refs carry too; the folder's name when it has no number.
fn lane_number(worktree: &str) -> String {
    let name = std::path::Path::new(worktree)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = crate::ui::ansi::clean(&name).into_owned();
    name.strip_prefix("lane-")
        .map_or(name.clone(), str::to_string)
}

/// What the run's first line says.
struct Header<'a> {
    change: &'a str,
    to_run: usize,
    total: usize,
    /// OpenSpec stories rather than spectr tasks.
    stories: bool,
    agent: &'a str,
    max_retries: u32,
    checkpoints: bool,
    /// `--sandbox`: the tool and its version.
    sandbox: Option<String>,
    resumed: bool,
}

fn run_header(h: &Header<'_>) -> String {
    let (one, many) = if h.stories {
        ("story", "stories")
    } else {
        ("task", "tasks")
    };
    format!(
        "spectr ralph {}: {} of {} to run · agent {} · max retries {} · checkpoints {}{}{}",
        h.change,
        h.to_run,
        count(h.total as u64, one, many),
        h.agent,
        h.max_retries,
        if h.checkpoints { "on" } else { "off" },
        h.sandbox
            .as_deref()
            .map_or_else(String::new, |s| format!(" · sandbox {s}")),
        if h.resumed { " · resumed" } else { "" },
    )
}

pub fn totals_line(t: &Totals) -> String {
    let mut parts = vec![
        format!("{} completed", t.completed),
        format!("{} failed", t.failed),
        format!("{} skipped", t.skipped),
        format!("{} remaining", t.remaining),
        count(t.attempts as u64, "attempt", "attempts"),
        agent_render::format_duration(Duration::from_millis(t.duration_ms)),
    ];
    if t.conflicts > 0 {
        // Not failures: each cost one resolve attempt, no retry.
        parts.insert(
            5,
            format!(
                "{} ({})",
                count(t.conflicts as u64, "merge conflict", "merge conflicts"),
                count(
                    t.resolve_attempts as u64,
                    "resolve attempt",
                    "resolve attempts"
                )
            ),
        );
    }
    // What no attempt reported is not shown (never a guessed 0).
    if let Some(turns) = t.turns {
        parts.push(count(turns, "turn", "turns"));
    }
    if t.input_tokens.is_some() || t.output_tokens.is_some() {
        parts.push(format!(
            "{} in / {} out",
            agent_render::format_tokens(t.input_tokens.unwrap_or(0)),
            agent_render::format_tokens(t.output_tokens.unwrap_or(0))
        ));
    }
    parts.push(agent_render::format_cost(t.cost_usd));
    parts.join(" · ")
}

/// The end of a run that stopped short: what the session file holds and so
/// what running the same command again will do. Only what is true: a file
/// that could not be written is not called saved.
fn session_lines(
    end: RunEnd,
    file: &crate::ralph::event::SessionFile,
    change: &str,
) -> Vec<String> {
    let ids = |v: &[crate::model::TaskId]| {
        v.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut lines = Vec::new();
    if file.saved && end == RunEnd::Aborted && !file.out_of_retries.is_empty() {
        // The same command would stop on them again at once (with no
        // terminal, nothing is asked): say what changes the outcome.
        let (them, has) = match file.out_of_retries.as_slice() {
            [one] => (format!("task {one}"), "has"),
            many => (format!("tasks {}", ids(many)), "have"),
        };
        let first = &file.out_of_retries[0];
        lines.push(format!(
            "The session is saved, but the same command would stop on {them} again: it {has} used its retries (from a terminal, the run asks what to do)."
        ));
        lines.push(format!(
            "To go on: add --on-exhaust retry (more attempts) or --on-exhaust skip (the rest without it); mark it yourself once its work is done (spectr task done {first} --change {change}); or start over with --fresh."
        ));
    } else if file.saved {
        lines.push(match end {
            RunEnd::Incomplete => "The session is saved. Skipped tasks stay skipped when it resumes; run with --fresh to try them again.".to_string(),
            RunEnd::Budget => "The session is saved: run the same command with a larger budget to resume.".to_string(),
            _ => "The session is saved: run the same command again to resume.".to_string(),
        });
    } else {
        let why = file.error.as_deref().unwrap_or("unknown error");
        lines.push(match &file.saved_at {
            Some(at) => format!(
                "The session file could not be written ({why}): {} still holds the run as it was at {at}.",
                file.path
            ),
            None => format!(
                "The session file could not be written ({why}): there is none for this run, so the tasks file is all a new run goes by."
            ),
        });
        let again = match file.runs_again.as_slice() {
            [] => "no completed task runs again".to_string(),
            [one] => format!("{one} will run again (its completion was recorded in neither file)"),
            many => format!(
                "{} will run again (their completion was recorded in neither file)",
                ids(many)
            ),
        };
        lines.push(format!(
            "Once it can be written, run the same command again: {again}."
        ));
    }
    if !file.status_to_write.is_empty() {
        lines.push(format!(
            "Completed in the session but not in the tasks file: {} (a resume writes the status and does not run them again).",
            ids(&file.status_to_write)
        ));
    }
    lines
}

impl Reporter for HumanReporter {
    /// Each group of events is rendered by a function of its own.
    fn report(&mut self, event: &LoopEvent) {
        match event {
            LoopEvent::RunStarted { .. } | LoopEvent::Plan { .. } | LoopEvent::Notice { .. } => {
                self.render_opening(event)
            }
            LoopEvent::TaskStarted { .. }
            | LoopEvent::Checkpoint { .. }
            | LoopEvent::AgentStarted { .. } => self.render_task_start(event),
            LoopEvent::AgentEvent { .. } => self.render_agent_output(event),
            LoopEvent::TaskCompleted { .. } | LoopEvent::TaskFailed { .. } => {
                self.render_attempt_end(event)
            }
            LoopEvent::TaskCommitted { .. }
            | LoopEvent::MergeStarted { .. }
            | LoopEvent::HeadMoved { .. }
            | LoopEvent::RemoteAttempt { .. }
            | LoopEvent::Merged { .. }
            | LoopEvent::Reverted { .. }
            | LoopEvent::Resolving { .. } => self.render_tree_changes(event),
            LoopEvent::StatusChanged { .. }
            | LoopEvent::Retry { .. }
            | LoopEvent::RateLimitWait { .. }
            | LoopEvent::AgentFallback { .. }
            | LoopEvent::AttemptQueued { .. }
            | LoopEvent::AttemptRunning { .. }
            | LoopEvent::TaskSkipped { .. }
            | LoopEvent::Learning { .. }
            | LoopEvent::Paused
            | LoopEvent::Resumed
            | LoopEvent::BudgetReached { .. }
            | LoopEvent::ConflictLimit { .. }
            | LoopEvent::Error { .. } => self.render_run_notes(event),
            LoopEvent::Summary { .. } => self.render_summary(event),
            // Pinned under the progress rows by its asker; the progress
            // row says who waits for it.
            LoopEvent::Question { task, .. } => {
                self.asked = Some(task.to_string());
                self.say_running();
            }
            LoopEvent::Answered { answer, .. } => {
                self.asked = None;
                self.say_running();
                self.question_answered(answer != "none")
            }
        }
    }
}

impl HumanReporter {
    /// The run's first lines: its header (and the key legend, the budget), the
    /// lanes' plan, and notices.
    fn render_opening(&mut self, event: &LoopEvent) {
        match event {
            LoopEvent::RunStarted {
                change,
                agent,
                tasks_total,
                tasks_to_run,
                max_retries,
                checkpoints,
                resumed,
                budget,
                sandbox,
                stories,
                ..
            } => {
                self.budget = *budget;
                self.change.clone_from(change);
                let head = run_header(&Header {
                    change,
                    to_run: tasks_to_run.len(),
                    total: *tasks_total,
                    stories: *stories,
                    agent,
                    max_retries: *max_retries,
                    checkpoints: *checkpoints,
                    sandbox: sandbox
                        .as_ref()
                        .map(|s| format!("on ({} {})", s.tool, s.version)),
                    resumed: *resumed,
                });
                self.line(&self.paint(&head, |s| s.bold()));
                if self.key_legend {
                    self.line(&self.paint(self.legend, |s| s.dim()));
                }
                self.start_progress(tasks_to_run.len() as u64);
                if let Some(b) = budget {
                    self.line(&format!("Budget: {}", b.short()));
                    self.set_message(String::new());
                }
            }
            LoopEvent::Plan { lanes } => {
                // A group is a top-level number's tasks (1.x), run in order;
                // "lane" is kept for the work trees the groups run in.
                self.line(&format!(
                    "Plan ({} independent group{} of tasks):",
                    lanes.len(),
                    if lanes.len() == 1 { "" } else { "s" }
                ));
                for lane in lanes {
                    let after = if lane.after_all_others {
                        " (runs after every other group)"
                    } else {
                        ""
                    };
                    let single = lane.tasks.iter().all(|t| !t.task.as_str().contains('.'));
                    self.line(&format!("  {}{after}:", group(&lane.lane, single)));
                    for t in &lane.tasks {
                        // One row per task, whatever the description holds.
                        let used = 4 + 12 + 1 + t.task.as_str().chars().count().max(8) + 1;
                        let mut what = crate::text::task_title(&t.section, &t.description);
                        if let Some(agent) = &t.agent {
                            what = format!("[{agent}] {what}");
                        }
                        self.line(&format!(
                            "    {:<12} {:<8} {}",
                            t.action,
                            t.task,
                            ansi::fit(&what, used, self.terminal)
                        ));
                    }
                }
            }
            LoopEvent::Notice { level, message } => {
                let message = ansi::clean(message);
                let text = match level {
                    NoticeLevel::Info => message.into_owned(),
                    NoticeLevel::Warn => self.paint(&format!("warning: {message}"), |s| s.yellow()),
                };
                self.line(&text);
            }
            // Routed by `report` to the function of its group.
            _ => {}
        }
    }

    /// A task's attempt starting: its header line and (with `-v`) its
    /// transcript, work tree and checkpoint.
    fn render_task_start(&mut self, event: &LoopEvent) {
        match event {
            LoopEvent::TaskStarted {
                task,
                section,
                description,
                attempt,
                max_attempts,
                transcript,
                index,
                count,
                lane,
                worktree,
            } => {
                self.running.insert(task.to_string());
                // One prefixed line: the first line of a multi-line description,
                // cut to the terminal's width (the full text is in --json).
                let in_lane = match (lane, worktree) {
                    // The lane is its work tree (`lane-2`), as its refs
                    // (`@lane-2`) and paths name it.
                    (Some(_), Some(w)) => format!(" · lane {}", lane_number(w)),
                    // Lanes taking turns: this one runs in the user's tree.
                    (Some(_), None) => " · in your tree (the lanes take turns)".to_string(),
                    _ => String::new(),
                };
                // The attempt's number counts agent runs (as refs and
                // transcripts do); the limit is the run header's; a run that
                // is not a try says what it is.
                let mut kind: Vec<&str> = self.again.remove(task.as_str()).into_iter().collect();
                // Said once retries were used: with none allowed, every
                // first attempt is the last.
                if max_attempts <= attempt && *attempt > 1 {
                    kind.push("last try");
                }
                let attempt_words = if kind.is_empty() {
                    format!("attempt {attempt}")
                } else {
                    format!("attempt {attempt} · {}", kind.join(", "))
                };
                let full = format!(" ({attempt_words}) · task {index} of {count}{in_lane}");
                let short = format!(" ({attempt_words}){in_lane}");
                // A story (OpenSpec) by its title and steps.
                let what = crate::text::task_what(section, description);
                let title = crate::text::task_title(section, description);
                let used = task.as_str().chars().count() + 3;
                let head =
                    ansi::fit_with_tail(&what, &[&full, &short], used, ansi::width(self.terminal));
                self.line(&format!(
                    "{} {}",
                    self.tag(task),
                    self.paint(&head, |s| s.bold())
                ));
                self.detail(&format!("  transcript: {transcript}"));
                match worktree {
                    Some(w) => {
                        self.lane_tasks.insert(task.to_string());
                        self.detail(&format!("  work tree: {w}"));
                        self.start_lane_bar(
                            task.as_str(),
                            format!("{task} {title} ({attempt_words})"),
                        );
                        self.say_running();
                    }
                    None => {
                        // In the user's tree (also a lane's task run there
                        // while the lanes take turns).
                        self.lane_tasks.remove(task.as_str());
                        self.set_message(format!("{task} {title} ({attempt_words})"));
                    }
                }
            }
            LoopEvent::Checkpoint {
                task, checkpoint, ..
            } => {
                let short: String = checkpoint.commit.chars().take(10).collect();
                self.detail(&format!(
                    "[{task}] checkpoint {} ({short})",
                    checkpoint.refname
                ));
            }
            // Said when a route chose another agent than the run's.
            LoopEvent::AgentStarted {
                task,
                agent: Some(agent),
                ..
            } => {
                let tag = self.tag(task);
                self.line(&format!("{tag}   · agent {}", ansi::clean(agent)));
            }
            LoopEvent::AgentStarted { .. } => {}
            // Routed by `report` to the function of its group.
            _ => {}
        }
    }

    /// The agent's stream, each line prefixed with the task's tag.
    fn render_agent_output(&mut self, event: &LoopEvent) {
        match event {
            // The agent's result repeats what the verdict line's receipt
            // says; an error result's words are kept.
            LoopEvent::AgentEvent {
                agent: AgentEvent::Result { result },
                ..
            } if !result.is_error => {}
            LoopEvent::AgentEvent { task, agent, .. } => {
                // The hot path of a chatty agent: render into reused buffers
                // and hand the lines over in one piece.
                let mut rendered = std::mem::take(&mut self.rendered);
                let mut block = std::mem::take(&mut self.block);
                rendered.clear();
                block.clear();
                let tag = match self.tag_cache.take() {
                    Some((id, tag)) if id == *task => (id, tag),
                    // The tag and the space after it, the prefix of every line.
                    _ => (task.clone(), format!("{} ", self.tag(task))),
                };
                let (tag_id, tag) = tag;
                if let AgentEvent::Text { text } = agent {
                    agent_render::write_text(&mut block, &tag, text, self.color);
                } else {
                    agent_render::write_event(&mut rendered, agent, self.color);
                    for l in rendered.lines() {
                        block.push_str(&tag);
                        block.push_str(l);
                        block.push('\n');
                    }
                }
                self.lines(&block);
                self.rendered = rendered;
                self.block = block;
                self.tag_cache = Some((tag_id, tag));
            }
            // Routed by `report` to the function of its group.
            _ => {}
        }
    }

    /// An attempt's end: its verdict line, and the progress rows updated.
    fn render_attempt_end(&mut self, event: &LoopEvent) {
        match event {
            LoopEvent::TaskCompleted {
                task,
                outcome,
                receipt,
                ..
            } => {
                self.running.remove(task.as_str());
                self.end_lane_bar(task.as_str());
                self.ended(task.as_str());
                self.done += 1;
                if let Some(p) = &self.progress {
                    p.set_position(self.done);
                }
                self.spend(receipt);
                self.verdict(true, task, "completed", outcome, receipt);
            }
            LoopEvent::TaskFailed {
                task,
                attempt,
                outcome,
                receipt,
            } => {
                self.running.remove(task.as_str());
                self.end_lane_bar(task.as_str());
                self.ended(task.as_str());
                self.spend(receipt);
                let again = match outcome {
                    Outcome::Stopped {
                        action: crate::ralph::event::StopAction::Restart,
                    } => Some("restarted"),
                    Outcome::Conflict { .. } => Some("resolving a conflict"),
                    Outcome::RateLimited { .. } => Some("after a rate limit"),
                    _ => None,
                };
                if let Some(why) = again {
                    self.again.insert(task.to_string(), why);
                }
                self.verdict(false, task, &format!("attempt {attempt}"), outcome, receipt);
            }
            // Routed by `report` to the function of its group.
            _ => {}
        }
    }

    /// What happened to the work in a tree: commits, merges back, reverts,
    /// conflicts being resolved, remote lanes.
    fn render_tree_changes(&mut self, event: &LoopEvent) {
        match event {
            LoopEvent::TaskCommitted {
                task,
                commit,
                files,
                left_out,
                found,
                ..
            } => {
                match commit {
                    Some(c) => {
                        self.commits += u64::from(!*found);
                        let short = &c[..c.len().min(10)];
                        let how = if *found {
                            " (made before the last run stopped)".to_string()
                        } else {
                            format!(" · {}", count(files.len() as u64, "file", "files"))
                        };
                        self.line(&format!(
                            "{} {} committed {short}{how}",
                            self.paint("●", |s| s.green()),
                            self.tag(task)
                        ));
                    }
                    None => self.detail(&format!("[{task}] nothing to commit")),
                }
                if !left_out.is_empty() {
                    self.line(&self.paint(
                        &format!(
                            "warning: [{task}] left out of its commit, where it overlaps your uncommitted work: {} (in your tree, uncommitted)",
                            ansi::clean(&left_out.join(", "))
                        ),
                        |s| s.yellow(),
                    ));
                }
            }
            // Recorded for a resume; the revert that undoes it is shown.
            LoopEvent::MergeStarted { .. } | LoopEvent::HeadMoved { .. } => {}
            LoopEvent::RemoteAttempt {
                task,
                remote,
                prefix,
                ..
            } => self.detail(&format!(
                "⇄ [{task}] handed to a remote lane by way of {} ({prefix}/base)",
                ansi::clean(remote)
            )),
            LoopEvent::Merged { task, files, .. } => {
                let shown: Vec<String> = files
                    .iter()
                    .take(5)
                    .map(|f| ansi::clean(f).into_owned())
                    .collect();
                let more = if files.len() > shown.len() {
                    format!(", and {} more", files.len() - shown.len())
                } else {
                    String::new()
                };
                let what = if files.is_empty() {
                    "nothing to merge (no file changed)".to_string()
                } else {
                    format!("merged into your work tree: {}{more}", shown.join(", "))
                };
                self.detail(&format!("⇄ [{task}] {what}"));
            }
            LoopEvent::Reverted {
                task,
                failed_ref,
                files_restored,
                files_removed,
                ..
            } => {
                let tree = if self.lane_tasks.contains(task.as_str()) {
                    "lane work tree"
                } else {
                    "tree"
                };
                self.line(&format!(
                    "↺ {} {tree} restored to its checkpoint ({} restored, {} removed); the attempt's work is kept at {failed_ref}",
                    self.tag(task),
                    count(*files_restored as u64, "file", "files"),
                    count(*files_removed as u64, "file", "files"),
                ));
            }
            LoopEvent::Resolving {
                task,
                files,
                unmarked,
                ..
            } => {
                let what = match (files.is_empty(), unmarked.is_empty()) {
                    (true, true) => "its previous work applied cleanly this time".to_string(),
                    (false, true) => format!(
                        "its previous work is applied again, with conflict markers in {} for the agent to resolve",
                        ansi::clean(&files.join(", "))
                    ),
                    (true, false) => format!(
                        "its previous work is applied again; {} conflicted as whole files (no markers) for the agent to resolve",
                        ansi::clean(&unmarked.join(", "))
                    ),
                    (false, false) => format!(
                        "its previous work is applied again, with conflict markers in {}, and {} conflicted as whole files (no markers), for the agent to resolve",
                        ansi::clean(&files.join(", ")),
                        ansi::clean(&unmarked.join(", "))
                    ),
                };
                self.line(&format!("⇄ {} {what}", self.tag(task)));
            }
            // Routed by `report` to the function of its group.
            _ => {}
        }
    }

    /// What the run says between attempts: status edits, retries, waits,
    /// skips, learnings, pauses, the budget, conflict limits and errors.
    fn render_run_notes(&mut self, event: &LoopEvent) {
        match event {
            LoopEvent::StatusChanged { task, status } => {
                let note = if self.running.contains(task.as_str()) {
                    ""
                } else {
                    " (edited in tasks file)"
                };
                // The running task's own status is the verdict's business;
                // another task's, edited meanwhile, is news.
                if !note.is_empty() {
                    self.line(&format!("{} status -> {status}{note}", self.tag(task)));
                } else if *status != TaskStatus::InProgress {
                    self.detail(&format!("[{task}] status -> {status}"));
                }
            }
            LoopEvent::Retry {
                task,
                next_attempt,
                max_attempts,
                reason,
            } => {
                // The first paragraph: a conflict's reason goes on with git's
                // messages and a diff, which are for the agent's prompt.
                let why = reason
                    .as_deref()
                    .map(|r| match r.split_once("\n\n") {
                        Some((first, _)) => format!(" with the reason: {} …", ansi::clean(first)),
                        None => format!(" with the reason: {}", ansi::clean(r)),
                    })
                    .unwrap_or_default();
                // The verdict said why and the next header says which attempt.
                let last = if max_attempts <= next_attempt {
                    " · last try"
                } else {
                    ""
                };
                self.detail(&format!(
                    "↻ [{task}] retrying (attempt {next_attempt}{last}){why}"
                ));
            }
            LoopEvent::AttemptQueued { task, lane, .. } => {
                self.line(&self.paint(
                    &format!(
                        "⏳ [{task}] queued by lane {lane}'s engine: its worker has not started (the wait counts against none of its limits)"
                    ),
                    |s| s.yellow(),
                ));
            }
            LoopEvent::AttemptRunning {
                task,
                queued_ms,
                host,
                ..
            } => {
                let on = host
                    .as_deref()
                    .map(|h| format!(" on {}", ansi::clean(h)))
                    .unwrap_or_default();
                self.line(&format!(
                    "▶ [{task}] started{on} after {} in the queue",
                    humantime::format_duration(Duration::from_secs(queued_ms / 1000))
                ));
            }
            LoopEvent::AgentFallback {
                task,
                from,
                to,
                until,
            } => {
                let until = until
                    .map(|t| format!(" until {}", agent_render::format_epoch(t)))
                    .unwrap_or_default();
                self.line(&self.paint(
                    &format!(
                        "⇄ [{task}] {} is at its limit{until}: this attempt runs on {}",
                        ansi::clean(from),
                        ansi::clean(to)
                    ),
                    |s| s.yellow(),
                ));
            }
            LoopEvent::RateLimitWait {
                task,
                resets_at,
                wait_secs,
            } => {
                let until = resets_at
                    .map(|t| format!(" until {}", agent_render::format_epoch(t)))
                    .unwrap_or_default();
                self.line(&self.paint(
                    &format!(
                        "⏸ [{task}] rate limited: waiting {}{until}, then retrying (not counted as an attempt; q quits)",
                        humantime::format_duration(Duration::from_secs(*wait_secs))
                    ),
                    |s| s.yellow(),
                ));
                self.set_message(format!("{task} waiting for the rate limit to reset"));
            }
            LoopEvent::TaskSkipped {
                task,
                reason,
                dependents,
            } => {
                let deps = if dependents.is_empty() {
                    String::new()
                } else {
                    let ids: Vec<String> = dependents.iter().map(ToString::to_string).collect();
                    format!("; also skipping its dependents: {}", ids.join(", "))
                };
                self.line(&self.paint(
                    &format!("warning: [{task}] skipped: {}{deps}", ansi::clean(reason)),
                    |s| s.yellow(),
                ));
            }
            LoopEvent::Learning { task, text } => {
                let mut lines = text.lines();
                let first = lines.next().unwrap_or_default();
                self.line(&format!("{} learning: {first}", self.tag(task)));
                for l in lines {
                    self.line(&format!("{}   {l}", self.tag(task)));
                }
            }
            LoopEvent::Paused => {
                self.line(&self.paint("Paused - press 'p' to resume", |s| s.yellow().bold()));
                self.set_message("paused".into());
            }
            LoopEvent::Resumed => self.line("Resumed"),
            LoopEvent::BudgetReached { budget, spent } => {
                let line = crate::ralph::budget::BudgetUse {
                    budget: *budget,
                    spent: *spent,
                }
                .reached_line();
                self.line(&self.paint(&line, |s| s.yellow().bold()));
                self.set_message("budget reached: finishing the running attempts".into());
            }
            LoopEvent::ConflictLimit {
                task,
                files,
                conflicts,
                max_conflicts,
                then,
            } => {
                let then = match then.as_str() {
                    "ask" => "you are asked what to do",
                    "retry" => "trying again (--on-exhaust retry)",
                    "skip" => "skipping it (--on-exhaust skip)",
                    "abort" => "stopping the run (--on-exhaust abort)",
                    _ => "",
                };
                let line = format!(
                    "warning: {} its work conflicted {} when merged back{} (--max-conflicts {max_conflicts}); {then}",
                    self.tag(task),
                    crate::text::count(u64::from(*conflicts), "time", "times"),
                    if files.is_empty() {
                        String::new()
                    } else {
                        format!(" in {}", ansi::clean(&files.join(", ")))
                    },
                );
                self.line(&self.paint(&line, |s| s.yellow()));
            }
            LoopEvent::Error { message, .. } => {
                let message = ansi::clean(message);
                self.line(&self.paint(&format!("error: {message}"), |s| s.red().bold()));
            }
            // Routed by `report` to the function of its group.
            _ => {}
        }
    }

    /// The end of the run: its verdict, totals, commits, transcripts, lanes,
    /// kept refs and what the session file holds.
    fn render_summary(&mut self, event: &LoopEvent) {
        let LoopEvent::Summary {
            end,
            totals,
            transcripts,
            checkpoint_refs,
            lanes,
            hot_files,
            session,
            budget,
        } = event
        else {
            // Routed by `report` to the function of its group.
            return;
        };
        self.clear_bars();
        let verdict = match end {
            RunEnd::Complete => self.paint("All selected tasks completed.", |s| s.green().bold()),
            RunEnd::Incomplete => self.paint(
                "Stopped: nothing left that can run (some tasks were skipped).",
                |s| s.yellow().bold(),
            ),
            RunEnd::Aborted => self.paint("Run aborted.", |s| s.red().bold()),
            RunEnd::Interrupted => self.paint("Run interrupted.", |s| s.yellow().bold()),
            RunEnd::Budget => {
                self.paint("Stopped: the run's budget is spent.", |s| s.yellow().bold())
            }
        };
        self.line(&verdict);
        self.line(&format!("Summary: {}", totals_line(totals)));
        if self.commits > 0 {
            self.line(&format!(
                "Commits: {} on your branch, one per task (review: git log --stat -{}; undo one: git revert <commit>)",
                self.commits, self.commits
            ));
        }
        if let Some(b) = budget {
            self.line(&format!("Budget: {}", b.short()));
        }
        self.line(&format!("Transcripts: {transcripts}"));
        for lane in lanes {
            let ids = |v: &[crate::model::TaskId]| {
                v.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let mut parts = Vec::new();
            if !lane.merged.is_empty() {
                parts.push(format!("merged {}", ids(&lane.merged)));
            }
            if !lane.in_place.is_empty() {
                parts.push(format!("ran {} in your tree", ids(&lane.in_place)));
            }
            if !lane.conflicted.is_empty() {
                parts.push(format!(
                    "merge conflicts in {} (resolved by another attempt)",
                    ids(&lane.conflicted)
                ));
            }
            if parts.is_empty() {
                parts.push("nothing merged".into());
            }
            self.line(&format!(
                "{}: {}",
                capitalized(&group(
                    &lane.lane,
                    !lane
                        .merged
                        .iter()
                        .chain(&lane.conflicted)
                        .chain(&lane.in_place)
                        .any(|t| t.as_str().contains('.'))
                )),
                parts.join("; ")
            ));
        }
        for hot in hot_files {
            self.line(&format!(
                "{}: {} between tasks {}.x and {}.x (a `merge=union` rule in .gitattributes, or splitting the work, would avoid them)",
                ansi::clean(&hot.file),
                count(u64::from(hot.conflicts), "conflict", "conflicts"),
                ansi::clean(&hot.lanes.0),
                ansi::clean(&hot.lanes.1)
            ));
        }
        if !checkpoint_refs.is_empty() {
            self.line(
                "Earlier attempts' work (failed, restarted or stopped) is kept at (inspect with `git show <ref> --stat`):",
            );
            for r in checkpoint_refs {
                self.line(&format!("  {r}"));
            }
        }
        if let Some(file) = session {
            for line in session_lines(*end, file, &self.change) {
                self.line(&ansi::clean(&line));
            }
        }
    }
}

impl Drop for HumanReporter {
    fn drop(&mut self) {
        self.clear_bars();
        out::flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::TaskId;
    use crate::ralph::event::SessionFile;

    fn ids(v: &[&str]) -> Vec<TaskId> {
        v.iter().map(|s| TaskId::from(*s)).collect()
    }

    #[test]
    fn counts_of_one_are_singular() {
        let mut h = Header {
            change: "c",
            to_run: 1,
            total: 1,
            stories: false,
            agent: "claude",
            max_retries: 0,
            checkpoints: true,
            sandbox: None,
            resumed: false,
        };
        let one = run_header(&h);
        assert!(one.contains(": 1 of 1 task to run ·"), "{one}");
        assert!(!one.contains("sandbox"), "{one}");
        h.total = 3;
        let many = run_header(&h);
        assert!(many.contains(": 1 of 3 tasks to run ·"), "{many}");
        // OpenSpec stories are counted as stories; the sandbox is named.
        h.stories = true;
        h.sandbox = Some("on (bwrap 0.11.0)".into());
        let stories = run_header(&h);
        assert!(stories.contains(": 1 of 3 stories to run ·"), "{stories}");
        assert!(
            stories.contains(" · sandbox on (bwrap 0.11.0)"),
            "{stories}"
        );
        let totals = Totals {
            completed: 1,
            attempts: 1,
            turns: Some(1),
            ..Totals::default()
        };
        let line = totals_line(&totals);
        assert!(
            line.contains("1 attempt ·") && line.contains("1 turn"),
            "{line}"
        );
    }

    fn started(task: &str, lane: bool) -> LoopEvent {
        LoopEvent::TaskStarted {
            task: TaskId::from(task),
            section: "S".into(),
            description: "d".into(),
            attempt: 1,
            max_attempts: 2,
            transcript: "t".into(),
            index: 1,
            count: 3,
            lane: lane.then(|| task[..1].to_string()),
            worktree: lane.then(|| format!("/lanes/{task}")),
        }
    }

    #[test]
    fn the_progress_row_says_what_still_runs_and_who_waits_for_an_answer() {
        let mut h = HumanReporter::new(false, false);
        h.report(&started("1.1", true));
        h.report(&started("2.1", true));
        h.report(&started("3.1", true));
        assert_eq!(h.message, "3 running");
        h.report(&LoopEvent::TaskFailed {
            task: TaskId::from("1.1"),
            attempt: 1,
            outcome: Outcome::Failed {
                reason: "no".into(),
            },
            receipt: crate::agent::receipt::Receipt::none(),
        });
        assert_eq!(h.message, "2 running");
        h.report(&LoopEvent::Question {
            task: TaskId::from("1.1"),
            reason: "out of retries".into(),
        });
        assert_eq!(h.message, "1.1 waits for your answer · 2 running");
        h.report(&LoopEvent::Answered {
            task: TaskId::from("1.1"),
            answer: "skip".into(),
        });
        assert_eq!(h.message, "2 running");
        // A task of the user's tree names itself until its question.
        let mut one = HumanReporter::new(false, false);
        one.report(&started("1.1", false));
        assert!(one.message.starts_with("1.1 "), "{}", one.message);
        one.report(&LoopEvent::TaskFailed {
            task: TaskId::from("1.1"),
            attempt: 1,
            outcome: Outcome::Failed {
                reason: "no".into(),
            },
            receipt: crate::agent::receipt::Receipt::none(),
        });
        assert!(one.message.starts_with("1.1 "), "{}", one.message);
        one.report(&LoopEvent::Question {
            task: TaskId::from("1.1"),
            reason: "out of retries".into(),
        });
        assert_eq!(one.message, "1.1 waits for your answer");
    }

    #[test]
    fn a_saved_session_says_so_and_names_statuses_a_resume_writes() {
        let file = SessionFile {
            path: "s.json".into(),
            saved: true,
            status_to_write: ids(&["1.3"]),
            ..SessionFile::default()
        };
        let lines = session_lines(RunEnd::Aborted, &file, "c");
        assert_eq!(
            lines[0],
            "The session is saved: run the same command again to resume."
        );
        assert!(lines[1].contains("1.3") && lines[1].contains("does not run them again"));
    }

    #[test]
    fn an_unsaved_session_is_never_called_saved() {
        let file = SessionFile {
            path: "s.json".into(),
            saved: false,
            error: Some("No space left on device (os error 28)".into()),
            saved_at: Some("2025-01-01T10:00:00Z".into()),
            runs_again: ids(&["1.3", "1.4"]),
            ..SessionFile::default()
        };
        let text = session_lines(RunEnd::Aborted, &file, "c").join("\n");
        assert!(!text.contains("is saved"), "{text}");
        assert!(
            text.contains("could not be written (No space left on device (os error 28)): s.json still holds the run as it was at 2025-01-01T10:00:00Z."),
            "{text}"
        );
        assert!(text.contains("1.3, 1.4 will run again"), "{text}");
        let none = SessionFile {
            saved_at: None,
            runs_again: Vec::new(),
            ..file
        };
        let text = session_lines(RunEnd::Interrupted, &none, "c").join("\n");
        assert!(text.contains("there is none for this run"), "{text}");
        assert!(text.contains("no completed task runs again"), "{text}");
    }
}
