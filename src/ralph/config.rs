//! Everything a run needs to know, settled before it starts.

use crate::agent::AgentConfig;
use crate::model::{Change, Project, TaskId};
use crate::ralph::paths;
/// The folder (inside the change folder) holding the lock and transcripts.
pub use crate::ralph::paths::STATE_DIR;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

/// How long an agent may linger after its final `result` line.
pub const RESULT_GRACE: Duration = Duration::from_secs(10);
/// How long a lane setup command may take, unless told otherwise.
pub const LANE_SETUP_TIMEOUT: Duration = Duration::from_secs(600);
// The defaults of the options a user may leave unset (on the command line
// and in spectr.yaml). Applied in one place, `cli::ralph_config::settle`;
// `spectr status` reads `DEFAULT_JOBS` to predict what a run starts.

/// `--max-retries`: retries after a task's first attempt.
pub const DEFAULT_MAX_RETRIES: u32 = 3;
/// Resolve attempts a task may have after merge conflicts: generous, as
/// a conflict is not the agent's failure and each resolve is short.
pub const DEFAULT_MAX_CONFLICTS: u32 = 10;
/// `--task-timeout`: one attempt's limit.
pub const DEFAULT_TASK_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// `--command-timeout`: one git command's limit.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(30);
/// `--jobs`: one task at a time.
pub const DEFAULT_JOBS: usize = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExhaustPolicy {
    Prompt,
    Retry,
    Skip,
    Abort,
}

#[derive(Debug, Clone)]
pub struct RunConfig {
    pub project: Project,
    pub change: Change,
    /// What the options settled (read through `Deref`: `cfg.max_retries`).
    /// Its `agent_label` has the version the preflight found.
    pub settings: Settings,
    /// Where the agent runs: the project root.
    pub workdir: PathBuf,
    pub selection: Option<BTreeSet<TaskId>>,
    /// Names this session's transcript folder: its start time, file-name safe.
    pub run_id: String,
    pub result_grace: Duration,
    /// `--sandbox`: the run's bubblewrap profile (built and tried once).
    pub sandbox: Option<std::sync::Arc<crate::ralph::sandbox::SandboxProfile>>,
    /// `ralph: lanes: exec` / `--lane-exec`: lanes run on other machines.
    pub remote_lanes: Option<RemoteLanes>,
}

/// Everything the options settle, before the change is known. With the
/// project, the change and the agent's label it is the [`RunConfig`]'s
/// (one type: the run reads its settings where the options put them).
#[derive(Debug, Clone)]
pub struct Settings {
    /// The agent and its limits (`time_limit` is the task timeout).
    pub agent: AgentConfig,
    /// e.g. `Claude Code (claude)` or `custom (my-agent --yes)`; the run adds
    /// the version the preflight finds.
    pub agent_label: String,
    /// Neither the command line nor spectr.yaml named the agent: it was
    /// detected, and the run says which one it uses.
    pub agent_detected: bool,
    pub max_retries: u32,
    pub max_conflicts: u32,
    pub command_timeout: Duration,
    pub task_timeout: Duration,
    pub idle_timeout: Option<Duration>,
    pub verify: Option<String>,
    pub on_exhaust: ExhaustPolicy,
    /// `--wait-for-answer`: with nobody at a terminal, a question stays
    /// open for an answer from elsewhere instead of aborting.
    pub wait_for_answer: bool,
    pub checkpoints: bool,
    pub commit: crate::model::spectr_yaml::CommitMode,
    pub branch: Option<String>,
    pub push: Option<String>,
    pub completion_grace: Duration,
    pub kill_grace: Duration,
    pub jobs: usize,
    pub story_completion: crate::model::spectr_yaml::StoryCompletion,
    pub lane_setup: Option<String>,
    pub lane_setup_timeout: Duration,
    pub budget: crate::ralph::budget::Budget,
    /// An empty command (`--notify ''`) turns spectr.yaml's off.
    pub notify: Option<String>,
    pub sandbox_settings: crate::ralph::sandbox::SandboxSettings,
    /// Lanes on other machines: the exec template and the git remote.
    pub lane_exec: Option<(String, String)>,
    /// `ralph: routes:`: tasks some other agent runs.
    pub routes: Vec<crate::ralph::routes::Route>,
    /// `ralph: fallback:`: agents a rate-limited task moves on to.
    pub fallback: Vec<crate::ralph::routes::Fallback>,
    /// `--max-rate-wait`.
    pub max_rate_wait: Duration,
    /// `ralph: permissions: commands:`: what an ACP agent may run.
    pub command_rules: crate::agent::acp::CommandRules,
}

impl std::ops::Deref for RunConfig {
    type Target = Settings;

    fn deref(&self) -> &Settings {
        &self.settings
    }
}

impl std::ops::DerefMut for RunConfig {
    fn deref_mut(&mut self) -> &mut Settings {
        &mut self.settings
    }
}

impl RunConfig {
    /// The agent that runs `task`, and its label when it is not the run's
    /// own: fallback `fallback` when the run moved the task to one, else its
    /// route's, else the run's.
    pub fn agent_for(
        &self,
        task: Option<&crate::model::Task>,
        fallback: Option<usize>,
    ) -> (&AgentConfig, Option<&str>) {
        if let Some(f) = fallback.and_then(|i| self.fallback.get(i)) {
            return (&f.agent, Some(f.label.as_str()));
        }
        match task.and_then(|t| crate::ralph::routes::route_for(&self.routes, t)) {
            Some(route) => (&route.agent, Some(route.label.as_str())),
            None => (&self.agent, None),
        }
    }

    /// The label of the agent a task runs on when the run has not moved it
    /// (its route's, else the run's).
    pub fn primary_label(&self, task: &crate::model::Task) -> String {
        crate::ralph::routes::route_for(&self.routes, task)
            .map_or_else(|| self.agent_label.clone(), |r| r.label.clone())
    }

    /// `<change>/.ralph`: session, lock, transcripts, prompt files.
    pub fn state_dir(&self) -> PathBuf {
        paths::state_dir(&self.change.dir)
    }

    pub fn session_path(&self) -> PathBuf {
        paths::session_path(&self.change.dir)
    }

    /// One folder per session (named by its start), so a fresh run never
    /// overwrites an earlier run's transcripts.
    pub fn transcripts_dir(&self) -> PathBuf {
        self.state_dir().join("transcripts").join(&self.run_id)
    }

    pub fn transcript_path(&self, task: &TaskId, attempt: u32) -> PathBuf {
        // Escaped: a task id is text from a file, never a path.
        let task = crate::checkpoint::escape_component(task.as_str());
        self.transcripts_dir()
            .join(format!("{task}-attempt-{attempt}.log"))
    }

    /// The attempt's own folder, beside its transcript: files the agent is
    /// told to write or read for this attempt only (copilot's usage file, a
    /// prompt file). Made when a command needs it.
    pub fn attempt_dir(&self, task: &TaskId, attempt: u32) -> PathBuf {
        let task = crate::checkpoint::escape_component(task.as_str());
        self.transcripts_dir()
            .join(format!("{task}-attempt-{attempt}"))
    }

    /// Paths the loop owns: never checkpointed, never reverted: the state
    /// folder (which holds the session's old place too) and the session file.
    pub fn owned_paths(&self) -> Vec<PathBuf> {
        vec![self.state_dir(), self.session_path()]
    }
}

/// The run's remote lanes: where and how they run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteLanes {
    /// `sh -c` template: `{cmd}` is the worker's command line, `{lane}` the
    /// lane's number.
    pub exec: String,
    /// The git URL both sides reach.
    pub remote: String,
    /// `spectr ralph`'s options a worker settles its run from.
    pub args: Vec<String>,
    /// The worker's command line (`spectr lane-worker`).
    pub worker: String,
}

impl RemoteLanes {
    /// The template with its placeholders filled in for lane `lane`.
    pub fn command(&self, lane: usize) -> String {
        self.exec
            .replace("{cmd}", &self.worker)
            .replace("{lane}", &lane.to_string())
    }
}
