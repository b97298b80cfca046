//! `spectr.yaml`: the optional project configuration `spectr accept` reads.
//!
//! Keys (upstream's names; unknown keys are ignored so upstream's other
//! settings don't break us):
//! - `append_tasks: {section, tasks: [...]}`: a section appended to every change;
//! - `refs_always_prepend: {tasks: [...]}` / `refs_always_append: {tasks: [...]}`:
//!   tasks put at the start (`N.0.i`) / end (`N.99.i`) of every split file;
//! - `ralph: {...}`: defaults for `spectr ralph` (its option names in
//!   snake_case; a flag on the command line wins). Unknown keys in this
//!   section are errors, since a typo would silently change a run.

use crate::model::project::bounded_ancestors;
use crate::model::values;
use miette::{NamedSource, SourceSpan};
use serde::Deserialize;
use std::path::{Path, PathBuf};

pub const FILE_NAME: &str = "spectr.yaml";

/// Upstream's section name for appended tasks when `section` is not given.
pub const DEFAULT_APPEND_SECTION: &str = "Automated Tasks";

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct SpectrConfig {
    #[serde(default)]
    pub append_tasks: Option<AppendTasks>,
    #[serde(default)]
    pub refs_always_prepend: Option<RefsTasks>,
    #[serde(default)]
    pub refs_always_append: Option<RefsTasks>,
    #[serde(default)]
    pub ralph: Option<RalphConfig>,
}

/// `ralph:` in spectr.yaml: defaults for `spectr ralph`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RalphConfig {
    pub agent: Option<String>,
    pub agent_cmd: Option<String>,
    #[serde(default)]
    pub agent_args: Vec<String>,
    pub model: Option<String>,
    pub max_turns: Option<u32>,
    pub max_budget_usd: Option<f64>,
    pub max_retries: Option<u32>,
    /// `--max-conflicts`: resolve attempts per task after merge conflicts.
    pub max_conflicts: Option<u32>,
    /// `--jobs`: tasks at once, one lane each.
    pub jobs: Option<usize>,
    #[serde(default, deserialize_with = "duration")]
    pub task_timeout: Option<std::time::Duration>,
    #[serde(default, deserialize_with = "duration")]
    pub idle_timeout: Option<std::time::Duration>,
    /// Seconds.
    pub command_timeout: Option<u64>,
    pub verify: Option<String>,
    /// `--lane-setup`: run in each new lane before its first task.
    pub lane_setup: Option<String>,
    #[serde(default, deserialize_with = "duration")]
    pub lane_setup_timeout: Option<std::time::Duration>,
    pub on_exhaust: Option<ExhaustSetting>,
    /// `--wait-for-answer`: without a terminal, a question waits for
    /// `spectr ralph answer`.
    pub wait_for_answer: Option<bool>,
    pub checkpoints: Option<bool>,
    /// `--commit`: what a run leaves on the user's branch.
    pub commit: Option<CommitMode>,
    /// `--branch`: the branch a run makes from HEAD and commits on.
    pub branch: Option<String>,
    /// A remote the run's branch is pushed to after every task commit.
    pub push: Option<String>,
    /// What completes an OpenSpec story (a `## N.` section of tasks.md).
    pub story_completion: Option<StoryCompletion>,
    /// `--budget-usd`, `--budget-tokens`: the whole run's budget.
    pub budget_usd: Option<f64>,
    pub budget_tokens: Option<u64>,
    /// `--notify`: a command run when a person is needed.
    pub notify: Option<String>,
    /// `--sandbox`: agents, verify and lane setup run in bubblewrap.
    pub sandbox: Option<bool>,
    /// More paths a sandboxed process may write (`~/` for the home folder).
    #[serde(default)]
    pub sandbox_writable: Vec<String>,
    /// `false`: sandboxed processes get no network.
    pub sandbox_network: Option<bool>,
    /// Lanes on other machines: `{exec, remote}`.
    pub lanes: Option<LanesConfig>,
    /// Which agent (and model, arguments) runs which tasks: the first
    /// route a task matches; the run's agent for the others.
    #[serde(default)]
    pub routes: Vec<RouteConfig>,
    /// Agents a task moves on to, in order, when its agent's limit resets
    /// further away than `max_rate_wait`.
    #[serde(default)]
    pub fallback: Vec<String>,
    #[serde(default, deserialize_with = "duration")]
    pub max_rate_wait: Option<std::time::Duration>,
    /// What an ACP agent may do when it asks.
    pub permissions: Option<PermissionsConfig>,
}

/// `ralph: permissions:`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PermissionsConfig {
    pub commands: Option<CommandsConfig>,
}

/// `ralph: permissions: commands:`: glob patterns on a command line.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CommandsConfig {
    #[serde(default)]
    pub allow: Vec<String>,
    #[serde(default)]
    pub deny: Vec<String>,
}

/// One of `ralph: routes:`: the tasks it takes (one of `section`, `id`, a
/// glob such as `2.*`, or `tag`, a word of the description such as
/// `#docs`) and what runs them.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    pub section: Option<String>,
    pub id: Option<String>,
    pub tag: Option<String>,
    pub agent: Option<String>,
    pub model: Option<String>,
    #[serde(default)]
    pub agent_args: Vec<String>,
}

/// `ralph: lanes:` in spectr.yaml (`--lane-exec`, `--lane-remote`).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LanesConfig {
    /// `sh -c` template starting a lane worker: `{cmd}`, `{lane}`.
    pub exec: Option<String>,
    /// The git URL lanes exchange work through.
    pub remote: Option<String>,
}

/// What completes an OpenSpec story. An agent can tick boxes without
/// verifying anything, so by default only its completion signal (given
/// after verification) does; `boxes` completes a story once every box of
/// it is ticked, as older versions did. spectr's own tasks.jsonc always
/// completes on a task's status.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum StoryCompletion {
    /// `<promise>COMPLETE</promise>` in the agent's final answer.
    #[default]
    Signal,
    /// Every box of the story ticked.
    Boxes,
}

/// What a run leaves on the user's branch (`--commit`, `ralph: commit:`).
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum CommitMode {
    /// One commit per completed task, made by spectr.
    #[default]
    Task,
    /// No commit: the work stays uncommitted in the user's tree.
    Off,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ExhaustSetting {
    Prompt,
    Retry,
    Skip,
    Abort,
}

/// `90s`, `30m`, `1h`; a bare number is refused (see
/// [`values::parse_duration`]). A visitor, not an untagged enum, so the
/// error keeps the key's path (`ralph.task_timeout`).
fn duration<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<std::time::Duration>, D::Error> {
    struct Dur;
    impl serde::de::Visitor<'_> for Dur {
        type Value = Option<std::time::Duration>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str(values::DURATION_WORDS)
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Self::Value, E> {
            self.visit_str(&n.to_string())
        }
        fn visit_str<E: serde::de::Error>(self, t: &str) -> Result<Self::Value, E> {
            values::parse_duration(t).map(Some).map_err(E::custom)
        }
    }
    d.deserialize_any(Dur)
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct AppendTasks {
    #[serde(default)]
    pub section: Option<String>,
    #[serde(default)]
    pub tasks: Vec<String>,
}

impl AppendTasks {
    pub fn section_name(&self) -> &str {
        match self.section.as_deref().map(str::trim) {
            Some(s) if !s.is_empty() => s,
            _ => DEFAULT_APPEND_SECTION,
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct RefsTasks {
    #[serde(default)]
    pub tasks: Vec<String>,
}

impl SpectrConfig {
    /// Tasks appended as a final section (empty when not configured).
    pub fn append(&self) -> Option<&AppendTasks> {
        self.append_tasks.as_ref().filter(|a| !a.tasks.is_empty())
    }

    pub fn prepend_each(&self) -> &[String] {
        self.refs_always_prepend
            .as_ref()
            .map_or(&[], |r| r.tasks.as_slice())
    }

    pub fn append_each(&self) -> &[String] {
        self.refs_always_append
            .as_ref()
            .map_or(&[], |r| r.tasks.as_slice())
    }
}

/// `spectr.yaml` could not be read or is not valid.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum ConfigError {
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("{}:{line}:{column}: {message}", path.display())]
    #[diagnostic(help(
        "spectr.yaml takes `append_tasks: {{section: ..., tasks: [...]}}`, \
         `refs_always_prepend: {{tasks: [...]}}`, `refs_always_append: {{tasks: [...]}}` and \
         `ralph: {{agent, agent_cmd, agent_args, model, max_turns, max_budget_usd, max_retries, jobs, \
         task_timeout, idle_timeout, command_timeout, verify, lane_setup, lane_setup_timeout, lanes, \
         on_exhaust, wait_for_answer, checkpoints, commit (task or off), branch, push, story_completion (signal or boxes), budget_usd, budget_tokens, \
         notify, sandbox, sandbox_writable, sandbox_network, routes: [{{section | id | tag, agent, model, agent_args}}], fallback: [agents], max_rate_wait, permissions: {{commands: {{allow, deny}}}}}}`"
    ))]
    Invalid {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
        #[source_code]
        src: std::sync::Arc<NamedSource<String>>,
        #[label("here")]
        span: Option<SourceSpan>,
    },
}

/// The nearest `spectr.yaml` in `start` or above it, up to the git root.
pub fn find(start: &Path) -> Option<PathBuf> {
    bounded_ancestors(start)
        .into_iter()
        .map(|d| d.join(FILE_NAME))
        .find(|p| p.is_file())
}

/// The nearest `spectr.yaml` as it was read: its path and its text (kept
/// so an error about one of its values can name the value's line).
#[derive(Debug, Clone, PartialEq)]
pub struct Source {
    pub path: PathBuf,
    pub text: String,
}

/// Reads the nearest `spectr.yaml` (see [`find`]); `None` when there is none.
pub fn read(start: &Path) -> Result<Option<Source>, ConfigError> {
    let Some(path) = find(start) else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(&path).map_err(|source| ConfigError::Io {
        path: path.clone(),
        source,
    })?;
    Ok(Some(Source { path, text }))
}

/// Loads the nearest `spectr.yaml` (see [`find`]); the default (empty)
/// configuration when there is none.
pub fn load(start: &Path) -> Result<(Option<PathBuf>, SpectrConfig), ConfigError> {
    let Some(source) = read(start)? else {
        return Ok((None, SpectrConfig::default()));
    };
    let config = parse(&source.path, &source.text)?;
    Ok((Some(source.path), config))
}

/// Where `section.key` is written in `text`: its 1-based line and the byte
/// offset of the key. Serde keeps no positions for values it accepted, so
/// this reads the block layout spectr.yaml is written in; a flow mapping
/// (`ralph: {jobs: 9}`) or a key not found gives the section's line, and a
/// section not found gives `None`.
pub fn key_position(text: &str, section: &str, key: &str) -> Option<(usize, usize)> {
    let names = |line: &str, name: &str| {
        line.strip_prefix(name)
            .is_some_and(|rest| rest.trim_start().starts_with(':'))
    };
    let mut offset = 0;
    let mut found: Option<(usize, usize)> = None;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let start = offset;
        offset += line.len();
        let body = line.trim_end();
        let Some(section_at) = found else {
            if names(body, section) {
                found = Some((i + 1, start));
            }
            continue;
        };
        let indented = body.starts_with([' ', '\t']);
        let content = body.trim_start();
        if content.is_empty() || content.starts_with('#') {
            continue;
        }
        if !indented {
            return Some(section_at);
        }
        if names(content, key) {
            return Some((i + 1, start + (body.len() - content.len())));
        }
    }
    found
}

/// Parses `text` (the content of `path`). An empty file is the default.
pub fn parse(path: &Path, text: &str) -> Result<SpectrConfig, ConfigError> {
    if text.trim().is_empty() {
        return Ok(SpectrConfig::default());
    }
    serde_yaml_ng::from_str::<Option<SpectrConfig>>(text)
        .map(Option::unwrap_or_default)
        .map_err(|e| {
            let loc = e.location();
            let (line, column) = loc.as_ref().map_or((1, 1), |l| (l.line(), l.column()));
            ConfigError::Invalid {
                path: path.to_path_buf(),
                line,
                column,
                message: plain(&e.to_string()),
                src: std::sync::Arc::new(NamedSource::new(
                    path.display().to_string(),
                    crate::model::error::shown(text, true),
                )),
                span: loc.map(|l| {
                    SourceSpan::from(l.index().min(text.len())..l.index().min(text.len()))
                }),
            }
        })
}

/// serde's message in the user's words: `ralph.jobs: must be a whole
/// number from 0 to 64, not `-1`` for `ralph.jobs: invalid type: integer
/// `-1`, expected usize at line 2 column 9` (the position is shown apart).
fn plain(message: &str) -> String {
    let message = match message.rfind(" at line ") {
        Some(at) => &message[..at],
        None => message,
    };
    let Some((path, rest)) = message.split_once(": ") else {
        return message.to_string();
    };
    let wrong = rest
        .strip_prefix("invalid type: ")
        .or_else(|| rest.strip_prefix("invalid value: "));
    let Some((found, expected)) = wrong.and_then(|w| w.split_once(", expected ")) else {
        return message.to_string();
    };
    let key = path.strip_prefix("ralph.").unwrap_or("");
    let wants = values::ralph_expects(key).unwrap_or_else(|| type_words(expected));
    format!("{path}: must be {wants}, not {}", found_words(found))
}

/// serde's name for a type (`u32`, `a boolean`) in plain words.
fn type_words(expected: &str) -> String {
    match expected {
        "u8" | "u16" | "u32" | "u64" | "usize" => "a whole number",
        "i8" | "i16" | "i32" | "i64" | "isize" => "a whole number",
        "f32" | "f64" => "a number",
        "a boolean" => "true or false",
        "a string" => "text",
        "a sequence" => "a list",
        e if e.starts_with("struct ") || e == "a map" => "a map of keys and values",
        e => e,
    }
    .to_string()
}

/// serde's description of the value found (`string "x"`, `sequence`).
fn found_words(found: &str) -> String {
    let quoted = found
        .strip_prefix("string \"")
        .and_then(|s| s.strip_suffix('"'));
    if let Some(text) = quoted {
        return format!("`{text}`");
    }
    if let Some(at) = found.find('`') {
        return found[at..].to_string();
    }
    match found {
        "sequence" => "a list",
        "map" => "a map",
        "unit value" => "empty",
        f => f,
    }
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_upstream_keys() {
        let yaml = "append_tasks:\n  section: Final\n  tasks:\n    - \"Run the tests\"\n    - |\n      Say done\nrefs_always_prepend:\n  tasks: [\"Read the design\"]\nother_key: 1\n";
        let c = parse(Path::new("spectr.yaml"), yaml).unwrap();
        let a = c.append().unwrap();
        assert_eq!(a.section_name(), "Final");
        assert_eq!(a.tasks, ["Run the tests", "Say done\n"]);
        assert_eq!(c.prepend_each(), ["Read the design"]);
        assert!(c.append_each().is_empty());
    }

    #[test]
    fn defaults() {
        let c = parse(Path::new("spectr.yaml"), "").unwrap();
        assert_eq!(c, SpectrConfig::default());
        let c = parse(Path::new("spectr.yaml"), "append_tasks:\n  tasks: [a]\n").unwrap();
        assert_eq!(c.append().unwrap().section_name(), DEFAULT_APPEND_SECTION);
        let c = parse(Path::new("spectr.yaml"), "append_tasks:\n  tasks: []\n").unwrap();
        assert!(c.append().is_none());
    }

    #[test]
    fn ralph_section() {
        let yaml = "ralph:\n  verify: cargo test\n  max_retries: 1\n  task_timeout: 90s\n  idle_timeout: 600s\n  on_exhaust: skip\n  checkpoints: false\n  agent_args: [--x]\n  lane_setup: npm ci\n  lane_setup_timeout: 15m\n";
        let r = parse(Path::new("spectr.yaml"), yaml)
            .unwrap()
            .ralph
            .unwrap();
        assert_eq!(r.verify.as_deref(), Some("cargo test"));
        assert_eq!(r.max_retries, Some(1));
        assert_eq!(r.task_timeout, Some(std::time::Duration::from_secs(90)));
        assert_eq!(r.idle_timeout, Some(std::time::Duration::from_secs(600)));
        assert_eq!(r.on_exhaust, Some(ExhaustSetting::Skip));
        assert_eq!(r.checkpoints, Some(false));
        assert_eq!(r.agent_args, ["--x"]);
        assert_eq!(r.lane_setup.as_deref(), Some("npm ci"));
        assert_eq!(
            r.lane_setup_timeout,
            Some(std::time::Duration::from_secs(900))
        );
        let err = parse(Path::new("/p/spectr.yaml"), "ralph:\n  max_retrys: 1\n").unwrap_err();
        assert!(err.to_string().starts_with("/p/spectr.yaml:2:"), "{err}");
        let err = parse(
            Path::new("/p/spectr.yaml"),
            "ralph:\n  task_timeout: soon\n",
        )
        .unwrap_err();
        assert!(err.to_string().contains("/p/spectr.yaml:2:"), "{err}");
    }

    #[test]
    fn story_completion_is_signal_or_boxes() {
        let r = |yaml: &str| parse(Path::new("/p/spectr.yaml"), yaml).map(|c| c.ralph.unwrap());
        assert_eq!(r("ralph:\n  verify: x\n").unwrap().story_completion, None);
        assert_eq!(
            r("ralph:\n  story_completion: signal\n")
                .unwrap()
                .story_completion,
            Some(StoryCompletion::Signal)
        );
        assert_eq!(
            r("ralph:\n  story_completion: boxes\n")
                .unwrap()
                .story_completion,
            Some(StoryCompletion::Boxes)
        );
        let err = r("ralph:\n  story_completion: ticks\n")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("/p/spectr.yaml:2:"), "{err}");
        assert!(err.contains("`signal`") && err.contains("`boxes`"), "{err}");
    }

    #[test]
    fn key_position_finds_the_line_of_a_ralph_key() {
        let text = "# top\nappend_tasks:\n  tasks: [a]\nralph:\n  # jobs: 1\n  verify: x\n  jobs: 99\nother:\n  jobs: 2\n";
        let (line, at) = key_position(text, "ralph", "jobs").unwrap();
        assert_eq!(line, 7);
        assert!(text[at..].starts_with("jobs: 99"), "{}", &text[at..]);
        // Not in the section (only in `other:`): the section's own line.
        assert_eq!(key_position(text, "ralph", "model").map(|p| p.0), Some(4));
        assert_eq!(key_position(text, "refs_always_append", "x"), None);
        let flow = "ralph: {jobs: 99}\n";
        assert_eq!(key_position(flow, "ralph", "jobs"), Some((1, 0)));
        // `jobs_x` is another key, not `jobs`.
        let text = "ralph:\n  jobs_x: 1\n  jobs : 3\n";
        assert_eq!(key_position(text, "ralph", "jobs").map(|p| p.0), Some(3));
    }

    #[test]
    fn errors_name_line() {
        let err = parse(Path::new("/p/spectr.yaml"), "append_tasks:\n  tasks: 5\n").unwrap_err();
        let msg = err.to_string();
        assert!(msg.starts_with("/p/spectr.yaml:2:"), "{msg}");
    }

    fn message(yaml: &str) -> String {
        parse(Path::new("/p/spectr.yaml"), yaml)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn wrong_values_are_told_in_plain_words() {
        for (yaml, says) in [
            (
                "ralph:\n  max_retries: many\n",
                "/p/spectr.yaml:2:16: ralph.max_retries: must be a whole number from 0 to 1000, not `many`",
            ),
            (
                "ralph:\n  max_retries: 4294967296\n",
                "ralph.max_retries: must be a whole number from 0 to 1000, not `4294967296`",
            ),
            (
                "ralph:\n  max_conflicts: plenty\n",
                "ralph.max_conflicts: must be a whole number from 0 to 1000, not `plenty`",
            ),
            (
                "ralph:\n  jobs: -1\n",
                "ralph.jobs: must be a whole number from 0 to 64, not `-1`",
            ),
            (
                "ralph:\n  max_turns: 2.5\n",
                "ralph.max_turns: must be a whole number from 1 to 10000, not `2.5`",
            ),
            (
                "ralph:\n  max_budget_usd: lots\n",
                "ralph.max_budget_usd: must be a USD amount above 0, such as 2.50, not `lots`",
            ),
            (
                "ralph:\n  command_timeout: 30s\n",
                "ralph.command_timeout: must be a whole number of seconds from 1 to 604800, not `30s`",
            ),
            (
                "ralph:\n  checkpoints: maybe\n",
                "ralph.checkpoints: must be true or false, not `maybe`",
            ),
            (
                "ralph:\n  verify: [a]\n",
                "ralph.verify: must be text, not a list",
            ),
            (
                "append_tasks:\n  tasks: 5\n",
                "append_tasks.tasks: must be a list, not `5`",
            ),
            (
                "ralph:\n  task_timeout: soon\n",
                "/p/spectr.yaml:2:17: ralph.task_timeout: `soon` is not a duration: write a number and a unit, such as 90s, 30m or 1h",
            ),
            (
                "ralph:\n  idle_timeout: 600\n",
                "ralph.idle_timeout: `600` needs a unit: 600s, 600m or 600h",
            ),
            (
                "ralph:\n  lane_setup_timeout: [1]\n",
                "ralph.lane_setup_timeout: must be a duration such as 90s, 30m or 1h, not a list",
            ),
        ] {
            let msg = message(yaml);
            assert!(msg.contains(says), "{yaml}: {msg}");
            for jargon in [
                "u32",
                "u64",
                "usize",
                "f64",
                "a boolean",
                "expected",
                " at line ",
            ] {
                assert!(!msg.contains(jargon), "{yaml}: {msg}");
            }
        }
    }
}
