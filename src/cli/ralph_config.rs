//! The configuration step of `spectr ralph`: the command line and
//! spectr.yaml's `ralph:` section become one validated [`Settings`], in one
//! pure function ([`settle`]). Precedence: a value on the command line wins
//! over spectr.yaml's, which wins over the default; every default is
//! applied here and nowhere else. The caller does the I/O (reads
//! spectr.yaml, looks at the terminal, looks for an installed agent) and
//! passes the facts in, so every rule is a unit test.

use crate::agent::{AgentConfig, AgentError, AgentKind, provider};
use crate::cli::args::{self, OnExhaust, RalphArgs};
use crate::model::spectr_yaml::{self, ExhaustSetting, RalphConfig};
use crate::model::{Change, Project};
use crate::ralph::config::{self as run_config, ExhaustPolicy, RESULT_GRACE, RunConfig};
use clap::ValueEnum;
use miette::{NamedSource, SourceSpan};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// What the caller found out about the world, for [`settle`].
#[derive(Debug)]
pub struct Facts {
    /// Questions can be asked: stdin and stderr are a terminal.
    pub terminal: bool,
    /// The first installed agent CLI, used when neither the command line nor
    /// spectr.yaml names one (`provider::detect`).
    pub detected_agent: Result<AgentKind, AgentError>,
}

pub use crate::ralph::config::Settings;

/// Why the options do not make a run. Each names the option (or the
/// spectr.yaml key, with its file and line) and what is accepted.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum ConfigError {
    /// spectr.yaml is not valid YAML or has an unknown key.
    #[error(transparent)]
    #[diagnostic(transparent)]
    File(#[from] spectr_yaml::ConfigError),

    /// A value in spectr.yaml outside what its option accepts.
    #[error("{}:{line}: ralph.{key}: {why}", path.display())]
    #[diagnostic(help("fix the value in spectr.yaml, or give the option on the command line"))]
    OutOfRange {
        path: PathBuf,
        line: usize,
        key: &'static str,
        /// The accepted range, in words (the command line's message).
        why: String,
        #[source_code]
        src: Arc<NamedSource<String>>,
        #[label("here")]
        span: Option<SourceSpan>,
    },

    /// `ralph.agent` names no agent spectr knows.
    #[error("{}:{line}: ralph.agent: unknown agent '{name}'", path.display())]
    #[diagnostic(help("use one of {known}"))]
    UnknownAgent {
        path: PathBuf,
        line: usize,
        name: String,
        known: String,
        #[source_code]
        src: Arc<NamedSource<String>>,
        #[label("here")]
        span: Option<SourceSpan>,
    },

    /// A route of `ralph.routes` that cannot be followed.
    #[error("{}:{line}: ralph.routes, route {index}: {why}", path.display())]
    #[diagnostic(help(
        "a route is `- section: \"Tests\"` (or `id: \"2.*\"`, or `tag: \"#docs\"`) with `agent:`, and optionally `model:` and `agent_args: [...]`"
    ))]
    BadRoute {
        path: PathBuf,
        line: usize,
        /// From 1, in the file's order.
        index: usize,
        why: String,
        #[source_code]
        src: Arc<NamedSource<String>>,
        #[label("here")]
        span: Option<SourceSpan>,
    },

    /// An agent of `ralph.fallback` spectr cannot run as one.
    #[error("{}:{line}: ralph.fallback: '{name}' is not an agent spectr can fall back to", path.display())]
    #[diagnostic(help(
        "name agents as --agent does (claude, codex, gemini, opencode, copilot, qwen, pi, amp, cursor); `custom` cannot be a fallback"
    ))]
    BadFallback {
        path: PathBuf,
        line: usize,
        name: String,
        #[source_code]
        src: Arc<NamedSource<String>>,
        #[label("here")]
        span: Option<SourceSpan>,
    },

    /// `--agent custom` and no command line for it anywhere.
    #[error("--agent custom needs --agent-cmd")]
    #[diagnostic(help("give the command line, e.g. --agent-cmd 'my-agent --yes'"))]
    CustomWithoutCmd,

    /// `--agent acp` and no command line for it anywhere.
    #[error("--agent acp needs --agent-cmd, the ACP agent's command line")]
    #[diagnostic(help(
        "e.g. --agent acp --agent-cmd 'gemini --acp', or a preset: --agent gemini-acp, claude-acp, codex-acp, qwen-acp, opencode-acp"
    ))]
    AcpWithoutCmd,

    /// A named agent and a custom command: two agents.
    #[error("--agent {name} cannot be combined with --agent-cmd, which runs a custom agent")]
    #[diagnostic(help(
        "write --agent custom (or no --agent) to run the command, or drop the command to run {name}"
    ))]
    AgentWithCmd { name: String },

    /// No agent named, and none installed.
    #[error(transparent)]
    #[diagnostic(transparent)]
    NoAgent(AgentError),

    /// Remote lanes with nowhere to exchange their work.
    #[error("--lane-exec (ralph: lanes: exec) needs --lane-remote (ralph: lanes: remote)")]
    #[diagnostic(help(
        "give a git URL this machine and the lanes both reach, e.g. --lane-remote ssh://build1/srv/git/project.git"
    ))]
    LanesWithoutRemote,

    /// A template that never starts the worker.
    #[error("the lanes' exec template `{exec}` has no {{cmd}}")]
    #[diagnostic(help(
        "put {{cmd}} where the lane worker's command goes, e.g. `ssh build{{lane}} {{cmd}}`"
    ))]
    LaneExecWithoutCmd { exec: String },
}

/// The command line (`args`) and spectr.yaml (`file`, as read) settled into
/// one [`Settings`]. Pure: no I/O, no environment.
pub fn settle(
    args: &RalphArgs,
    file: Option<&spectr_yaml::Source>,
    facts: Facts,
) -> Result<Settings, ConfigError> {
    let parsed = match file {
        Some(source) => spectr_yaml::parse(&source.path, &source.text)?.ralph,
        None => None,
    };
    let yaml = match (file, parsed) {
        (Some(source), Some(ralph)) => {
            check_bounds(&ralph, source)?;
            Some(ralph)
        }
        _ => None,
    };
    let mut c = yaml.unwrap_or_default();
    let route_configs = std::mem::take(&mut c.routes);
    let fallback_names = std::mem::take(&mut c.fallback);

    let (kind, custom_cmd, detected) = agent_choice(args, &c, file, facts.detected_agent)?;
    let agent_label = match (&kind, &custom_cmd) {
        (AgentKind::Custom, Some(cmd)) => format!("custom ({cmd})"),
        (AgentKind::Acp, Some(cmd)) => format!("ACP agent ({cmd})"),
        _ => provider::label(kind),
    };
    let task_timeout = args
        .task_timeout
        .or(c.task_timeout)
        .unwrap_or(run_config::DEFAULT_TASK_TIMEOUT);
    let on_exhaust = args.on_exhaust.or(c.on_exhaust.map(|e| match e {
        ExhaustSetting::Prompt => OnExhaust::Prompt,
        ExhaustSetting::Retry => OnExhaust::Retry,
        ExhaustSetting::Skip => OnExhaust::Skip,
        ExhaustSetting::Abort => OnExhaust::Abort,
    }));
    // Without a terminal nobody can answer the question, unless it may be
    // answered from elsewhere: abort instead.
    // The live page answers too.
    let wait_for_answer =
        args.wait_for_answer || args.serve.is_some() || c.wait_for_answer.unwrap_or(false);
    let on_exhaust = match on_exhaust {
        Some(OnExhaust::Prompt) | None if facts.terminal || wait_for_answer => {
            ExhaustPolicy::Prompt
        }
        Some(OnExhaust::Prompt) | None => ExhaustPolicy::Abort,
        Some(OnExhaust::Retry) => ExhaustPolicy::Retry,
        Some(OnExhaust::Skip) => ExhaustPolicy::Skip,
        Some(OnExhaust::Abort) => ExhaustPolicy::Abort,
    };
    let mut settings = Settings {
        agent: AgentConfig {
            kind,
            custom_cmd,
            extra_args: if args.agent_args.is_empty() {
                c.agent_args
            } else {
                args.agent_args.clone()
            },
            model: args.model.clone().or(c.model),
            max_turns: args.max_turns.or(c.max_turns),
            max_budget_usd: args.max_budget_usd.or(c.max_budget_usd),
            // Agents that can bound themselves get the task's limit too.
            time_limit: Some(task_timeout),
        },
        agent_label,
        agent_detected: detected,
        max_retries: args
            .max_retries
            .or(c.max_retries)
            .unwrap_or(run_config::DEFAULT_MAX_RETRIES),
        max_conflicts: args
            .max_conflicts
            .or(c.max_conflicts)
            .unwrap_or(run_config::DEFAULT_MAX_CONFLICTS),
        command_timeout: args
            .command_timeout
            .or(c.command_timeout)
            .map_or(run_config::DEFAULT_COMMAND_TIMEOUT, |s| {
                Duration::from_secs(s.max(1))
            }),
        task_timeout,
        idle_timeout: args.idle_timeout.or(c.idle_timeout),
        verify: args.verify.clone().or(c.verify),
        on_exhaust,
        wait_for_answer,
        // The file can turn checkpoints off; the flag only turns them off.
        checkpoints: !args.no_checkpoint && c.checkpoints != Some(false),
        commit: match args.commit {
            Some(args::CommitArg::Task) => crate::model::spectr_yaml::CommitMode::Task,
            Some(args::CommitArg::Off) => crate::model::spectr_yaml::CommitMode::Off,
            None => c.commit.unwrap_or_default(),
        },
        branch: args
            .branch
            .clone()
            .or_else(|| c.branch.clone())
            .filter(|b| !b.trim().is_empty()),
        push: c.push.clone().filter(|p| !p.trim().is_empty()),
        completion_grace: args.completion_grace,
        kill_grace: args.kill_grace,
        jobs: args.jobs.or(c.jobs).unwrap_or(run_config::DEFAULT_JOBS),
        story_completion: args
            .story_completion
            .or(c.story_completion)
            .unwrap_or_default(),
        // An empty command (`--lane-setup ''`) turns spectr.yaml's off.
        lane_setup: args
            .lane_setup
            .clone()
            .or(c.lane_setup)
            .filter(|c| !c.trim().is_empty()),
        lane_setup_timeout: args
            .lane_setup_timeout
            .or(c.lane_setup_timeout)
            .unwrap_or(run_config::LANE_SETUP_TIMEOUT),
        budget: crate::ralph::budget::Budget {
            usd: args.budget_usd.or(c.budget_usd),
            tokens: args.budget_tokens.or(c.budget_tokens),
        },
        notify: args
            .notify
            .clone()
            .or(c.notify)
            .filter(|c| !c.trim().is_empty()),
        // The flag turns it on; the file can too (and say what else it allows).
        sandbox_settings: crate::ralph::sandbox::SandboxSettings {
            enabled: args.sandbox || c.sandbox == Some(true),
            writable: c.sandbox_writable.iter().map(PathBuf::from).collect(),
            network: c.sandbox_network != Some(false),
        },
        lane_exec: remote_lanes(args, c.lanes.as_ref())?,
        routes: Vec::new(),
        fallback: Vec::new(),
        command_rules: command_rules(c.permissions.as_ref(), file)?,
        max_rate_wait: args
            .max_rate_wait
            .or(c.max_rate_wait)
            .unwrap_or(crate::ralph::routes::DEFAULT_MAX_RATE_WAIT),
    };
    settings.routes = routes(&route_configs, file, &settings.agent)?;
    settings.fallback = fallback(&fallback_names, file, &settings.agent)?;
    Ok(settings)
}

/// `--lane-exec` / `--lane-remote` over `ralph: lanes:`; an empty template
/// (`--lane-exec ''`) turns the file's off. Both or neither.
fn remote_lanes(
    args: &RalphArgs,
    file: Option<&spectr_yaml::LanesConfig>,
) -> Result<Option<(String, String)>, ConfigError> {
    let exec = args
        .lane_exec
        .clone()
        .or_else(|| file.and_then(|l| l.exec.clone()))
        .filter(|e| !e.trim().is_empty());
    let remote = args
        .lane_remote
        .clone()
        .or_else(|| file.and_then(|l| l.remote.clone()))
        .filter(|r| !r.trim().is_empty());
    match (exec, remote) {
        (Some(exec), Some(remote)) if exec.contains("{cmd}") => Ok(Some((exec, remote))),
        (Some(exec), Some(_)) => Err(ConfigError::LaneExecWithoutCmd { exec }),
        (Some(_), None) => Err(ConfigError::LanesWithoutRemote),
        (None, _) => Ok(None),
    }
}

impl Settings {
    /// The agent's label with the version its preflight found, if any.
    pub fn label_with(&self, version: Option<&str>) -> String {
        match version {
            Some(version) => format!("{} {version}", self.agent_label),
            None => self.agent_label.clone(),
        }
    }

    /// `--max-turns` or `--max-budget-usd` was given (either place).
    pub fn has_claude_limits(&self) -> bool {
        self.agent.max_turns.is_some() || self.agent.max_budget_usd.is_some()
    }

    /// The run's configuration, once the change is known. `agent_label` is
    /// [`Settings::agent_label`] with what the preflight found added.
    pub fn into_run_config(
        self,
        project: Project,
        change: Change,
        agent_label: String,
    ) -> RunConfig {
        let mut settings = self;
        settings.agent_label = agent_label;
        RunConfig {
            workdir: project.root.clone(),
            project,
            change,
            settings,
            selection: None,
            run_id: String::new(),
            result_grace: RESULT_GRACE,
            sandbox: None,
            remote_lanes: None,
        }
    }
}

/// The agent is one choice: a flag for it (`--agent`, `--agent-cmd`)
/// replaces the file's whole choice, except that `--agent custom` alone
/// asks for the custom command the file describes. Returns the kind, its
/// command and whether it was detected.
fn agent_choice(
    args: &RalphArgs,
    c: &RalphConfig,
    file: Option<&spectr_yaml::Source>,
    detected: Result<AgentKind, AgentError>,
) -> Result<(AgentKind, Option<String>, bool), ConfigError> {
    let (agent, cmd) = if args.agent.is_none() && args.agent_cmd.is_none() {
        let agent = match (&c.agent, file) {
            (Some(name), Some(source)) => Some(agent_named(name, source)?),
            _ => None,
        };
        (agent, c.agent_cmd.clone())
    } else if args.agent.is_some_and(AgentKind::takes_agent_cmd) && args.agent_cmd.is_none() {
        (args.agent, c.agent_cmd.clone())
    } else {
        (args.agent, args.agent_cmd.clone())
    };
    match (agent, cmd) {
        (Some(AgentKind::Custom), None) => Err(ConfigError::CustomWithoutCmd),
        (Some(AgentKind::Acp), None) => Err(ConfigError::AcpWithoutCmd),
        (Some(AgentKind::Acp), Some(cmd)) => Ok((AgentKind::Acp, Some(cmd), false)),
        (Some(AgentKind::Custom) | None, Some(cmd)) => Ok((AgentKind::Custom, Some(cmd), false)),
        // The name as typed (`cursor`), not the program (`cursor-agent`).
        (Some(kind), Some(_)) => Err(ConfigError::AgentWithCmd {
            name: kind.to_possible_value().map_or_else(
                || provider::binary(kind).to_string(),
                |v| v.get_name().to_string(),
            ),
        }),
        (Some(kind), None) => Ok((kind, None, false)),
        (None, None) => detected
            .map(|kind| (kind, None, true))
            .map_err(ConfigError::NoAgent),
    }
}

/// `ralph.routes`, settled: each route's tasks and agent (the run's own
/// limits, and its model and arguments when it is the same agent).
fn routes(
    configs: &[spectr_yaml::RouteConfig],
    file: Option<&spectr_yaml::Source>,
    run: &AgentConfig,
) -> Result<Vec<crate::ralph::routes::Route>, ConfigError> {
    use crate::ralph::routes::{Match, Route};
    let Some(source) = file else {
        return Ok(Vec::new());
    };
    configs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let bad = |why: String| {
                let (line, src, span) = located(source, "routes");
                ConfigError::BadRoute {
                    path: source.path.clone(),
                    line,
                    index: i + 1,
                    why,
                    src,
                    span,
                }
            };
            let takes = match (&r.section, &r.id, &r.tag) {
                (Some(s), None, None) => Match::Section(s.clone()),
                (None, Some(g), None) => Match::Id(
                    globset::Glob::new(g)
                        .map_err(|e| bad(format!("id {g:?} is not a glob: {e}")))?
                        .compile_matcher(),
                ),
                (None, None, Some(t)) if !t.trim().is_empty() => Match::Tag(t.trim().to_owned()),
                _ => return Err(bad("give exactly one of section, id or tag".into())),
            };
            let kind = match &r.agent {
                Some(name) => AgentKind::from_str(name, true).map_err(|_| {
                    bad(format!(
                        "unknown agent '{name}' (use one of {})",
                        agent_names(|k| !k.takes_agent_cmd())
                    ))
                })?,
                None => run.kind,
            };
            let same = kind == run.kind;
            if kind.takes_agent_cmd() && !same {
                return Err(bad(
                    "`custom` and `acp` are routed only when they are the run's agent (its --agent-cmd)"
                        .into(),
                ));
            }
            let agent = AgentConfig {
                kind,
                custom_cmd: if same { run.custom_cmd.clone() } else { None },
                extra_args: if r.agent_args.is_empty() && same {
                    run.extra_args.clone()
                } else {
                    r.agent_args.clone()
                },
                model: r
                    .model
                    .clone()
                    .or_else(|| if same { run.model.clone() } else { None }),
                max_turns: run.max_turns,
                max_budget_usd: run.max_budget_usd,
                time_limit: run.time_limit,
            };
            let label = match &agent.model {
                Some(model) => format!("{} · {model}", provider::label(kind)),
                None => provider::label(kind),
            };
            Ok(Route {
                takes,
                agent,
                label,
            })
        })
        .collect()
}

/// `ralph.permissions.commands`, settled: each pattern a glob.
fn command_rules(
    permissions: Option<&spectr_yaml::PermissionsConfig>,
    file: Option<&spectr_yaml::Source>,
) -> Result<crate::agent::acp::CommandRules, ConfigError> {
    let configured = permissions.is_some();
    let (Some(commands), Some(source)) = (permissions.and_then(|p| p.commands.as_ref()), file)
    else {
        return Ok(crate::agent::acp::CommandRules {
            configured,
            ..Default::default()
        });
    };
    let globs = |patterns: &[String]| {
        patterns
            .iter()
            .map(|p| {
                globset::Glob::new(p)
                    .map(|g| g.compile_matcher())
                    .map_err(|e| {
                        let (line, src, span) = located(source, "permissions");
                        ConfigError::OutOfRange {
                            path: source.path.clone(),
                            line,
                            key: "permissions",
                            why: format!("commands: {p:?} is not a glob pattern: {e}"),
                            src,
                            span,
                        }
                    })
            })
            .collect::<Result<Vec<_>, _>>()
    };
    Ok(crate::agent::acp::CommandRules {
        allow: globs(&commands.allow)?,
        deny: globs(&commands.deny)?,
        configured,
    })
}

/// `ralph.fallback`, settled: each agent with the run's limits (none of
/// its model or arguments, which are the run's agent's).
fn fallback(
    names: &[String],
    file: Option<&spectr_yaml::Source>,
    run: &AgentConfig,
) -> Result<Vec<crate::ralph::routes::Fallback>, ConfigError> {
    let Some(source) = file else {
        return Ok(Vec::new());
    };
    names
        .iter()
        .map(|name| {
            let kind = AgentKind::from_str(name, true)
                .ok()
                .filter(|k| !k.takes_agent_cmd())
                .ok_or_else(|| {
                    let (line, src, span) = located(source, "fallback");
                    ConfigError::BadFallback {
                        path: source.path.clone(),
                        line,
                        name: name.clone(),
                        src,
                        span,
                    }
                })?;
            let agent = AgentConfig {
                kind,
                custom_cmd: None,
                extra_args: Vec::new(),
                model: None,
                max_turns: run.max_turns,
                max_budget_usd: run.max_budget_usd,
                time_limit: run.time_limit,
            };
            Ok(crate::ralph::routes::Fallback {
                agent,
                label: provider::label(kind),
            })
        })
        .collect()
}

/// The names `--agent` takes for the kinds `keep` keeps, comma-separated.
fn agent_names(keep: impl Fn(AgentKind) -> bool) -> String {
    let names: Vec<String> = AgentKind::value_variants()
        .iter()
        .filter(|k| keep(**k))
        .filter_map(|k| k.to_possible_value().map(|v| v.get_name().to_string()))
        .collect();
    names.join(", ")
}

fn agent_named(name: &str, source: &spectr_yaml::Source) -> Result<AgentKind, ConfigError> {
    AgentKind::from_str(name, true).map_err(|_| {
        let (line, src, span) = located(source, "agent");
        ConfigError::UnknownAgent {
            path: source.path.clone(),
            line,
            name: name.to_string(),
            known: agent_names(|_| true),
            src,
            span,
        }
    })
}

/// The command line's bounds hold for the file's values too, even for a
/// value a flag replaces: a wrong file is wrong for the next run as well.
fn check_bounds(c: &RalphConfig, source: &spectr_yaml::Source) -> Result<(), ConfigError> {
    let number = |key, value: Option<String>, check: fn(&str) -> Result<(), String>| match value {
        Some(v) => check(&v).map_err(|why| out_of_range(source, key, why)),
        None => Ok(()),
    };
    number("max_retries", c.max_retries.map(|n| n.to_string()), |s| {
        args::parse_max_retries(s).map(drop)
    })?;
    number(
        "max_conflicts",
        c.max_conflicts.map(|n| n.to_string()),
        |s| args::parse_max_conflicts(s).map(drop),
    )?;
    number("jobs", c.jobs.map(|n| n.to_string()), |s| {
        args::parse_jobs(s).map(drop)
    })?;
    number("max_turns", c.max_turns.map(|n| n.to_string()), |s| {
        args::parse_max_turns(s).map(drop)
    })?;
    number(
        "max_budget_usd",
        c.max_budget_usd.map(|n| n.to_string()),
        |s| args::parse_budget(s).map(drop),
    )?;
    number("budget_usd", c.budget_usd.map(|n| n.to_string()), |s| {
        args::parse_budget(s).map(drop)
    })?;
    number(
        "budget_tokens",
        c.budget_tokens.map(|n| n.to_string()),
        |s| args::parse_budget_tokens(s).map(drop),
    )?;
    number(
        "command_timeout",
        c.command_timeout.map(|n| n.to_string()),
        |s| args::parse_command_timeout(s).map(drop),
    )?;
    for (key, value) in [
        ("task_timeout", c.task_timeout),
        ("idle_timeout", c.idle_timeout),
        ("lane_setup_timeout", c.lane_setup_timeout),
    ] {
        if let Some(d) = value {
            args::check_timeout(d).map_err(|why| out_of_range(source, key, why))?;
        }
    }
    Ok(())
}

fn out_of_range(source: &spectr_yaml::Source, key: &'static str, why: String) -> ConfigError {
    let (line, src, span) = located(source, key);
    ConfigError::OutOfRange {
        path: source.path.clone(),
        line,
        key,
        why,
        src,
        span,
    }
}

type Located = (usize, Arc<NamedSource<String>>, Option<SourceSpan>);

/// The line of `ralph.<key>` in the file (1 when it cannot be told), and
/// the file's text for miette to point at it.
fn located(source: &spectr_yaml::Source, key: &str) -> Located {
    let at = spectr_yaml::key_position(&source.text, "ralph", key);
    let src = Arc::new(NamedSource::new(
        source.path.display().to_string(),
        crate::model::error::shown(&source.text, true),
    ));
    let line = at.map_or(1, |(line, _)| line);
    let span = at.map(|(_, offset)| SourceSpan::from(offset..offset + key.len()));
    (line, src, span)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::args::{Cli, Command};
    use crate::model::spectr_yaml::StoryCompletion;
    use clap::Parser;
    use std::path::Path;

    fn args(extra: &[&str]) -> RalphArgs {
        let mut argv = vec!["spectr", "ralph", "c"];
        argv.extend_from_slice(extra);
        match Cli::try_parse_from(argv).map(|cli| cli.command) {
            Ok(Command::Ralph(a)) => *a,
            other => panic!("not a ralph command line: {other:?}"),
        }
    }

    fn yaml(text: &str) -> spectr_yaml::Source {
        spectr_yaml::Source {
            path: Path::new("/p/spectr.yaml").to_path_buf(),
            text: text.to_string(),
        }
    }

    fn facts() -> Facts {
        Facts {
            terminal: true,
            detected_agent: Ok(AgentKind::Codex),
        }
    }

    fn settled(flags: &[&str], file: Option<&str>) -> Settings {
        let file = file.map(yaml);
        match settle(&args(flags), file.as_ref(), facts()) {
            Ok(s) => s,
            Err(e) => panic!("refused {flags:?} / {file:?}: {e}"),
        }
    }

    fn refused(flags: &[&str], file: Option<&str>) -> ConfigError {
        let file = file.map(yaml);
        match settle(&args(flags), file.as_ref(), facts()) {
            Ok(s) => panic!("accepted {flags:?} / {file:?}: {s:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn defaults_without_flags_or_file() {
        for file in [None, Some(""), Some("append_tasks:\n  tasks: [a]\n")] {
            let s = settled(&[], file);
            assert_eq!(s.max_retries, 3);
            assert_eq!(s.max_conflicts, 10);
            assert_eq!(s.jobs, 1);
            assert_eq!(s.task_timeout, Duration::from_secs(1800));
            assert_eq!(s.agent.time_limit, Some(Duration::from_secs(1800)));
            assert_eq!(s.command_timeout, Duration::from_secs(30));
            assert_eq!(s.lane_setup_timeout, Duration::from_secs(600));
            assert_eq!(s.idle_timeout, None);
            assert_eq!(s.verify, None);
            assert_eq!(s.lane_setup, None);
            assert!(s.checkpoints);
            assert_eq!(s.story_completion, StoryCompletion::Signal);
            assert_eq!(s.on_exhaust, ExhaustPolicy::Prompt);
            assert_eq!(s.completion_grace, Duration::from_secs(5));
            assert_eq!(s.kill_grace, Duration::from_secs(3));
            // No agent named: the detected one, and the run says so.
            assert_eq!(s.agent.kind, AgentKind::Codex);
            assert!(s.agent_detected);
            assert_eq!(s.agent_label, provider::label(AgentKind::Codex));
            assert!(!s.has_claude_limits());
        }
    }

    const FILE: &str = "ralph:\n  agent: gemini\n  agent_args: [--from-file]\n  model: file-model\n  max_turns: 7\n  max_budget_usd: 1.5\n  max_retries: 1\n  max_conflicts: 4\n  jobs: 2\n  task_timeout: 90s\n  idle_timeout: 2m\n  command_timeout: 40\n  verify: file-verify\n  lane_setup: file-setup\n  lane_setup_timeout: 15m\n  on_exhaust: skip\n  checkpoints: false\n  story_completion: boxes\n";

    #[test]
    fn spectr_yaml_fills_every_option_the_command_line_leaves_out() {
        let s = settled(&[], Some(FILE));
        assert_eq!(s.agent.kind, AgentKind::Gemini);
        assert!(!s.agent_detected);
        assert_eq!(s.agent.extra_args, ["--from-file"]);
        assert_eq!(s.agent.model.as_deref(), Some("file-model"));
        assert_eq!(s.agent.max_turns, Some(7));
        assert_eq!(s.agent.max_budget_usd, Some(1.5));
        assert!(s.has_claude_limits());
        assert_eq!(s.max_retries, 1);
        assert_eq!(s.max_conflicts, 4);
        assert_eq!(s.jobs, 2);
        assert_eq!(s.task_timeout, Duration::from_secs(90));
        assert_eq!(s.agent.time_limit, Some(Duration::from_secs(90)));
        assert_eq!(s.idle_timeout, Some(Duration::from_secs(120)));
        assert_eq!(s.command_timeout, Duration::from_secs(40));
        assert_eq!(s.verify.as_deref(), Some("file-verify"));
        assert_eq!(s.lane_setup.as_deref(), Some("file-setup"));
        assert_eq!(s.lane_setup_timeout, Duration::from_secs(900));
        assert_eq!(s.on_exhaust, ExhaustPolicy::Skip);
        assert!(!s.checkpoints);
        assert_eq!(s.story_completion, StoryCompletion::Boxes);
    }

    #[test]
    fn the_command_line_wins_over_spectr_yaml_for_every_option() {
        let s = settled(
            &[
                "--agent",
                "claude",
                "--agent-arg",
                "--from-flag",
                "--model",
                "flag-model",
                "--max-turns",
                "9",
                "--max-budget-usd",
                "3",
                "--max-retries",
                "0",
                "--max-conflicts",
                "2",
                "--jobs",
                "4",
                "--task-timeout",
                "10m",
                "--idle-timeout",
                "30s",
                "--command-timeout",
                "50",
                "--verify",
                "flag-verify",
                "--lane-setup",
                "flag-setup",
                "--lane-setup-timeout",
                "1m",
                "--on-exhaust",
                "retry",
            ],
            Some(FILE),
        );
        assert_eq!(s.agent.kind, AgentKind::Claude);
        assert_eq!(s.agent_label, provider::label(AgentKind::Claude));
        assert_eq!(s.agent.extra_args, ["--from-flag"]);
        assert_eq!(s.agent.model.as_deref(), Some("flag-model"));
        assert_eq!(s.agent.max_turns, Some(9));
        assert_eq!(s.agent.max_budget_usd, Some(3.0));
        assert_eq!(s.max_retries, 0);
        assert_eq!(s.max_conflicts, 2);
        assert_eq!(s.jobs, 4);
        assert_eq!(s.task_timeout, Duration::from_secs(600));
        assert_eq!(s.agent.time_limit, Some(Duration::from_secs(600)));
        assert_eq!(s.idle_timeout, Some(Duration::from_secs(30)));
        assert_eq!(s.command_timeout, Duration::from_secs(50));
        assert_eq!(s.verify.as_deref(), Some("flag-verify"));
        assert_eq!(s.lane_setup.as_deref(), Some("flag-setup"));
        assert_eq!(s.lane_setup_timeout, Duration::from_secs(60));
        assert_eq!(s.on_exhaust, ExhaustPolicy::Retry);
        // `story_completion` has no flag: a value set by the caller wins.
        let mut a = args(&[]);
        a.story_completion = Some(StoryCompletion::Signal);
        let file = yaml(FILE);
        let s = settle(&a, Some(&file), facts()).unwrap();
        assert_eq!(s.story_completion, StoryCompletion::Signal);
    }

    #[test]
    fn the_sandbox_is_on_by_the_flag_or_the_file() {
        let off = settled(&[], None).sandbox_settings;
        assert!(!off.enabled);
        assert!(off.network, "the network is on by default");
        assert!(settled(&["--sandbox"], None).sandbox_settings.enabled);
        let file = "ralph:\n  sandbox: true\n  sandbox_writable: [~/.npm, /opt/cache]\n  sandbox_network: false\n";
        let s = settled(&[], Some(file)).sandbox_settings;
        assert!(s.enabled);
        assert!(!s.network);
        assert_eq!(
            s.writable,
            [PathBuf::from("~/.npm"), PathBuf::from("/opt/cache")]
        );
        // The file's `sandbox: false` does not undo the flag.
        assert!(
            settled(&["--sandbox"], Some("ralph:\n  sandbox: false\n"))
                .sandbox_settings
                .enabled
        );
    }

    #[test]
    fn flags_turn_off_what_the_file_turns_on() {
        let file = "ralph:\n  lane_setup: npm ci\n  checkpoints: true\n";
        // An empty lane setup turns the file's off.
        assert_eq!(settled(&["--lane-setup", ""], Some(file)).lane_setup, None);
        assert_eq!(
            settled(&["--lane-setup", "  "], Some(file)).lane_setup,
            None
        );
        assert!(!settled(&["--no-checkpoint"], Some(file)).checkpoints);
        assert!(settled(&[], Some(file)).checkpoints);
        // `--jobs 0` (one per lane) is a value, not "unset".
        assert_eq!(
            settled(&["--jobs", "0"], Some("ralph:\n  jobs: 3\n")).jobs,
            0
        );
    }

    #[test]
    fn the_agent_is_one_choice() {
        let cmd_file = "ralph:\n  agent_cmd: file-agent --yes\n";
        // The file's custom command, alone or asked for by `--agent custom`.
        for flags in [&[][..], &["--agent", "custom"][..]] {
            let s = settled(flags, Some(cmd_file));
            assert_eq!(s.agent.kind, AgentKind::Custom, "{flags:?}");
            assert_eq!(s.agent.custom_cmd.as_deref(), Some("file-agent --yes"));
            assert_eq!(s.agent_label, "custom (file-agent --yes)");
            assert!(!s.agent_detected);
        }
        // A named agent on the command line replaces the file's command.
        let s = settled(&["--agent", "claude"], Some(cmd_file));
        assert_eq!(
            (s.agent.kind, s.agent.custom_cmd),
            (AgentKind::Claude, None)
        );
        // --agent-cmd replaces the file's named agent, and implies custom.
        let s = settled(&["--agent-cmd", "mine"], Some("ralph:\n  agent: gemini\n"));
        assert_eq!(s.agent.kind, AgentKind::Custom);
        assert_eq!(s.agent.custom_cmd.as_deref(), Some("mine"));
        let s = settled(
            &["--agent", "custom", "--agent-cmd", "mine"],
            Some(cmd_file),
        );
        assert_eq!(s.agent.custom_cmd.as_deref(), Some("mine"));
        // Names are case-blind in the file.
        assert_eq!(
            settled(&[], Some("ralph:\n  agent: Claude\n")).agent.kind,
            AgentKind::Claude
        );
    }

    #[test]
    fn agent_conflicts_are_refused_by_name() {
        let e = refused(&["--agent", "custom"], None);
        assert!(matches!(e, ConfigError::CustomWithoutCmd), "{e:?}");
        assert_eq!(e.to_string(), "--agent custom needs --agent-cmd");
        let e = refused(&["--agent", "cursor", "--agent-cmd", "x"], None);
        assert_eq!(
            e.to_string(),
            "--agent cursor cannot be combined with --agent-cmd, which runs a custom agent"
        );
        // The same two in the file are the same conflict.
        let e = refused(&[], Some("ralph:\n  agent: codex\n  agent_cmd: x\n"));
        assert!(
            matches!(&e, ConfigError::AgentWithCmd { name } if name == "codex"),
            "{e:?}"
        );
    }

    #[test]
    fn an_unknown_agent_in_the_file_names_its_line_and_the_known_ones() {
        let e = refused(&[], Some("ralph:\n  verify: x\n  agent: clod\n"));
        assert_eq!(
            e.to_string(),
            "/p/spectr.yaml:3: ralph.agent: unknown agent 'clod'"
        );
        let help = miette::Diagnostic::help(&e).map(|h| h.to_string()).unwrap();
        assert!(help.contains("claude") && help.contains("custom"), "{help}");
        // A flag for the agent replaces the file's choice: its name is not read.
        assert_eq!(
            settled(&["--agent", "claude"], Some("ralph:\n  agent: clod\n"))
                .agent
                .kind,
            AgentKind::Claude
        );
    }

    #[test]
    fn the_budget_and_notify_come_from_the_flag_then_the_file() {
        let file = "ralph:\n  budget_usd: 2.5\n  budget_tokens: 100000\n  notify: cat >> f\n";
        let s = settled(&[], Some(file));
        assert_eq!(s.budget.usd, Some(2.5));
        assert_eq!(s.budget.tokens, Some(100_000));
        assert_eq!(s.notify.as_deref(), Some("cat >> f"));
        let s = settled(&["--budget-usd", "1", "--notify", ""], Some(file));
        assert_eq!(s.budget.usd, Some(1.0));
        assert_eq!(s.budget.tokens, Some(100_000));
        assert_eq!(s.notify, None, "--notify '' turns the file's off");
        let s = settled(&[], None);
        assert!(!s.budget.is_set() && s.notify.is_none());
    }

    #[test]
    fn no_agent_named_and_none_installed_is_the_detection_error() {
        let no_agent = || Facts {
            terminal: true,
            detected_agent: Err(AgentError::NoneInstalled {
                looked_for: "claude".into(),
                install: String::new(),
            }),
        };
        let e = settle(&args(&[]), None, no_agent()).unwrap_err();
        assert!(matches!(e, ConfigError::NoAgent(_)), "{e:?}");
        assert!(e.to_string().contains("no coding-agent CLI found"), "{e}");
        // Not looked at when an agent is named.
        assert!(settle(&args(&["--agent", "pi"]), None, no_agent()).is_ok());
    }

    #[test]
    fn out_of_range_values_in_the_file_name_key_file_line_and_range() {
        for (key, value, says) in [
            (
                "max_retries",
                "1001",
                "must be a whole number from 0 to 1000",
            ),
            ("jobs", "65", "must be a whole number from 0 to 64"),
            (
                "max_conflicts",
                "1001",
                "must be a whole number from 0 to 1000",
            ),
            ("max_turns", "0", "must be a whole number from 1 to 10000"),
            ("max_budget_usd", "0", "must be a USD amount above 0"),
            ("budget_usd", "0", "must be a USD amount above 0"),
            ("budget_tokens", "0", "must be a whole number from 1 to"),
            (
                "command_timeout",
                "0",
                "must be a whole number from 1 to 604800",
            ),
            ("task_timeout", "8d", "must be from 1s to 7d"),
            ("idle_timeout", "0s", "must be from 1s to 7d"),
            ("lane_setup_timeout", "604801s", "must be from 1s to 7d"),
        ] {
            let text = format!("# defaults\nralph:\n  verify: x\n  {key}: {value}\n");
            // Refused even when a flag would replace it.
            let flags_for_all = ["--max-retries", "1", "--max-conflicts", "1", "--jobs", "1"];
            for flags in [&[][..], &flags_for_all[..]] {
                let e = refused(flags, Some(&text));
                let ConfigError::OutOfRange { key: k, line, .. } = &e else {
                    panic!("{key}: {e:?}");
                };
                assert_eq!((*k, *line), (key, 4));
                let msg = e.to_string();
                assert!(
                    msg.starts_with(&format!("/p/spectr.yaml:4: ralph.{key}: {says}")),
                    "{msg}"
                );
                let help = miette::Diagnostic::help(&e).map(|h| h.to_string()).unwrap();
                assert!(help.contains("command line"), "{help}");
            }
        }
    }

    #[test]
    fn the_bounds_themselves_are_accepted_from_the_file() {
        let s = settled(
            &[],
            Some(
                "ralph:\n  max_retries: 1000\n  max_conflicts: 1000\n  jobs: 64\n  command_timeout: 604800\n  task_timeout: 7d\n  idle_timeout: 1s\n",
            ),
        );
        assert_eq!((s.max_retries, s.max_conflicts, s.jobs), (1000, 1000, 64));
        // 0: the first conflict goes to --on-exhaust.
        assert_eq!(
            settled(&[], Some("ralph:\n  max_conflicts: 0\n")).max_conflicts,
            0
        );
        assert_eq!(s.command_timeout, args::MAX_WAIT);
        assert_eq!(s.task_timeout, args::MAX_WAIT);
        assert_eq!(s.idle_timeout, Some(Duration::from_secs(1)));
    }

    #[test]
    fn max_conflicts_on_the_command_line_is_bounded_like_max_retries() {
        assert_eq!(settled(&["--max-conflicts", "0"], None).max_conflicts, 0);
        assert_eq!(
            settled(&["--max-conflicts", "1000"], None).max_conflicts,
            1000
        );
        for bad in ["1001", "many"] {
            let e = Cli::try_parse_from(["spectr", "ralph", "c", "--max-conflicts", bad])
                .map(|_| ())
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("must be a whole number from 0 to 1000"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn a_file_that_does_not_parse_is_its_parse_error() {
        let e = refused(&[], Some("ralph:\n  max_retrys: 1\n"));
        assert!(matches!(e, ConfigError::File(_)), "{e:?}");
        assert!(e.to_string().starts_with("/p/spectr.yaml:2:"), "{e}");
    }

    #[test]
    fn without_a_terminal_a_question_waits_for_an_answer_when_asked_to() {
        let facts = || Facts {
            terminal: false,
            ..facts()
        };
        let s = settle(&args(&["--wait-for-answer"]), None, facts()).unwrap();
        assert_eq!(
            (s.on_exhaust, s.wait_for_answer),
            (ExhaustPolicy::Prompt, true)
        );
        let file = yaml("ralph:\n  wait_for_answer: true\n");
        let s = settle(&args(&[]), Some(&file), facts()).unwrap();
        assert_eq!(
            (s.on_exhaust, s.wait_for_answer),
            (ExhaustPolicy::Prompt, true)
        );
        // A policy that needs nobody stays what it is.
        let skip = ["--wait-for-answer", "--on-exhaust", "skip"];
        let s = settle(&args(&skip), None, facts()).unwrap();
        assert_eq!(s.on_exhaust, ExhaustPolicy::Skip);
    }

    #[test]
    fn without_a_terminal_a_question_on_exhaustion_becomes_abort() {
        let bare = |flags: &[&str]| {
            let facts = Facts {
                terminal: false,
                detected_agent: Ok(AgentKind::Claude),
            };
            settle(&args(flags), None, facts).unwrap().on_exhaust
        };
        assert_eq!(bare(&[]), ExhaustPolicy::Abort);
        assert_eq!(bare(&["--on-exhaust", "prompt"]), ExhaustPolicy::Abort);
        assert_eq!(bare(&["--on-exhaust", "skip"]), ExhaustPolicy::Skip);
        assert_eq!(
            settled(&["--on-exhaust", "abort"], None).on_exhaust,
            ExhaustPolicy::Abort
        );
    }

    #[test]
    fn the_run_config_carries_the_settings() {
        let s = settled(&["--jobs", "3", "--max-retries", "2"], None);
        let dir = Path::new("/p");
        let project = Project {
            root: dir.to_path_buf(),
            spec_dir: dir.join("spectr"),
        };
        let change = Change {
            id: "c".into(),
            dir: dir.join("spectr/changes/c"),
        };
        let cfg = s.into_run_config(project, change, "Codex 1.2".into());
        assert_eq!((cfg.jobs, cfg.max_retries), (3, 2));
        assert_eq!(cfg.workdir, dir);
        assert_eq!(cfg.agent_label, "Codex 1.2");
        assert_eq!(cfg.result_grace, RESULT_GRACE);
        assert!(cfg.selection.is_none() && cfg.run_id.is_empty());
    }
}
