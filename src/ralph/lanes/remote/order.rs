//! What a coordinator and a lane worker say to each other: one work order
//! on the worker's stdin, then control lines; the run's NDJSON events on the
//! worker's stdout, ending with one `lane_result` line.

use crate::agent::receipt::Receipt;
use crate::model::TaskId;
use crate::ralph::event::Outcome;
use serde::{Deserialize, Serialize};

/// The order's format; a worker refuses another.
pub const ORDER_VERSION: u32 = 1;

/// One attempt to run on the far side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Order {
    pub version: u32,
    /// The git remote, as the worker reaches it.
    pub remote: String,
    /// This attempt's refs on the remote (`<prefix>/base` is pushed before
    /// the worker starts; it pushes `<prefix>/result` and `<prefix>/failed`).
    pub prefix: String,
    /// The change's folder, relative to the repository's top.
    pub change_dir: String,
    pub change: String,
    /// `spectr ralph`'s options for the run (no change id, no lane options):
    /// the worker settles its configuration from them and the project's
    /// spectr.yaml, as the coordinator did.
    pub args: Vec<String>,
    pub task: TaskId,
    pub attempt: u32,
    pub max_attempts: u32,
    pub retry_reason: Option<String>,
    pub position: (usize, usize),
    /// A resolve attempt: the files holding conflict markers in the base,
    /// and how to label them for the agent.
    pub resolve: Option<ResolveOrder>,
    /// The change's learnings so far (the prompt shows them).
    pub learnings: String,
}

/// A resolve attempt's start: its previous work is in the base again. The
/// project's tree and the previous work's are pushed too
/// (`<prefix>/project`, `<prefix>/previous`), for `git show` in the clone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResolveOrder {
    /// Files holding git's conflict markers, labelled with these trees'
    /// ids: the worker labels them in words.
    pub marked: Vec<String>,
    /// Conflicted files without markers (one side's whole version).
    pub unmarked: Vec<String>,
    pub ours_label: String,
    pub theirs_label: String,
}

impl ResolveOrder {
    pub fn files(&self) -> crate::ralph::attempt::ResolveFiles {
        crate::ralph::attempt::ResolveFiles {
            marked: self.marked.clone(),
            unmarked: self.unmarked.clone(),
        }
    }
}

/// A control line on the worker's stdin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ControlLine {
    Quit,
    Restart,
    Skip,
}

/// The worker's last line: how the attempt ended and where its work is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaneResult {
    /// Always `lane_result`: tells this line from the run's events.
    pub event: String,
    pub task: TaskId,
    pub attempt: u32,
    pub outcome: Outcome,
    pub receipt: Receipt,
    /// The work tree when the attempt ended (reverted when it failed), as a
    /// commit on top of the lane's HEAD, pushed to `<prefix>/result`.
    pub result: Option<String>,
    /// A failed attempt's work, pushed to `<prefix>/failed`.
    pub failed: Option<String>,
    /// Learnings the attempt added.
    pub learnings: Vec<String>,
    /// Set when the worker itself could not do its job (no agent CLI, a
    /// remote it cannot push to): every attempt would fail alike.
    pub worker_error: Option<String>,
}

pub const RESULT_EVENT: &str = "lane_result";

impl LaneResult {
    /// Parses a line of the worker's stdout that is its result.
    pub fn parse(line: &str) -> Option<LaneResult> {
        if !line.contains(RESULT_EVENT) {
            return None;
        }
        serde_json::from_str::<LaneResult>(line)
            .ok()
            .filter(|r| r.event == RESULT_EVENT)
    }
}

/// The worker's first line, as soon as it runs (before it clones): the
/// coordinator counts the attempt's limits from it, not from the moment
/// its engine was asked (a cluster may queue the job for long).
pub const STARTED_EVENT: &str = "lane_worker_started";

/// [`STARTED_EVENT`]'s line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerStarted {
    pub event: String,
    pub host: Option<String>,
    pub pid: u32,
}

impl WorkerStarted {
    pub fn now() -> WorkerStarted {
        WorkerStarted {
            event: STARTED_EVENT.into(),
            host: nix::unistd::gethostname()
                .ok()
                .and_then(|h| h.into_string().ok()),
            pid: std::process::id(),
        }
    }

    pub fn parse(line: &str) -> Option<WorkerStarted> {
        serde_json::from_str::<WorkerStarted>(line)
            .ok()
            .filter(|s| s.event == STARTED_EVENT)
    }
}
