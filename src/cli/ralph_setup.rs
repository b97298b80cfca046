//! What `spectr ralph` settles before a run: defaults from spectr.yaml's
//! `ralph:` section (a flag on the command line wins), the change when none
//! is named, and the settings line of the plan.

use crate::agent::AgentKind;
use crate::cli::args::{OnExhaust, RalphArgs};
use crate::model::Project;
use crate::model::spectr_yaml::{self, ExhaustSetting};
use clap::ValueEnum;
use miette::miette;
use std::time::Duration;

pub const DEFAULT_MAX_RETRIES: u32 = 3;
pub const DEFAULT_TASK_TIMEOUT: Duration = Duration::from_secs(30 * 60);
pub const DEFAULT_COMMAND_TIMEOUT_SECS: u64 = 30;

/// Fills the options not given on the command line from spectr.yaml.
pub fn apply_config(args: &mut RalphArgs, project: &Project) -> Result<(), miette::Report> {
    let (path, config) = spectr_yaml::load(&project.root)?;
    let Some(c) = config.ralph else {
        return Ok(());
    };
    let path = path.map(|p| p.display().to_string()).unwrap_or_default();
    check_bounds(&c).map_err(|(key, why)| {
        miette!(
            help = "fix the value in spectr.yaml, or give the option on the command line",
            "{path}: ralph.{key}: {why}"
        )
    })?;
    // The agent is one choice: a flag for it replaces the file's whole choice.
    if args.agent.is_none() && args.agent_cmd.is_none() {
        if let Some(name) = &c.agent {
            args.agent = Some(AgentKind::from_str(name, true).map_err(|_| {
                let names: Vec<String> = AgentKind::value_variants()
                    .iter()
                    .filter_map(|k| k.to_possible_value().map(|v| v.get_name().to_string()))
                    .collect();
                miette!(
                    help = format!("use one of {}", names.join(", ")),
                    "{path}: ralph.agent: unknown agent '{name}'"
                )
            })?);
        }
        args.agent_cmd = c.agent_cmd.clone();
    } else if args.agent == Some(AgentKind::Custom) && args.agent_cmd.is_none() {
        // `--agent custom` asks for the custom agent the file describes.
        args.agent_cmd = c.agent_cmd.clone();
    }
    if args.agent_args.is_empty() {
        args.agent_args = c.agent_args.clone();
    }
    fill(&mut args.model, c.model);
    fill(&mut args.max_turns, c.max_turns);
    fill(&mut args.max_budget_usd, c.max_budget_usd);
    fill(&mut args.max_retries, c.max_retries);
    fill(&mut args.jobs, c.jobs);
    fill(&mut args.task_timeout, c.task_timeout);
    fill(&mut args.idle_timeout, c.idle_timeout);
    fill(&mut args.command_timeout, c.command_timeout);
    fill(&mut args.verify, c.verify);
    fill(&mut args.story_completion, c.story_completion);
    fill(&mut args.lane_setup, c.lane_setup);
    fill(&mut args.lane_setup_timeout, c.lane_setup_timeout);
    fill(
        &mut args.on_exhaust,
        c.on_exhaust.map(|e| match e {
            ExhaustSetting::Prompt => OnExhaust::Prompt,
            ExhaustSetting::Retry => OnExhaust::Retry,
            ExhaustSetting::Skip => OnExhaust::Skip,
            ExhaustSetting::Abort => OnExhaust::Abort,
        }),
    );
    if c.checkpoints == Some(false) {
        args.no_checkpoint = true;
    }
    Ok(())
}

/// The command line's bounds hold for the file's values too.
fn check_bounds(c: &spectr_yaml::RalphConfig) -> Result<(), (&'static str, String)> {
    use crate::cli::args::{
        check_timeout, parse_budget, parse_command_timeout, parse_max_retries, parse_max_turns,
    };
    let number = |key, value: Option<String>, check: fn(&str) -> Result<(), String>| match value {
        Some(v) => check(&v).map_err(|why| (key, why)),
        None => Ok(()),
    };
    number("max_retries", c.max_retries.map(|n| n.to_string()), |s| {
        parse_max_retries(s).map(drop)
    })?;
    number("jobs", c.jobs.map(|n| n.to_string()), |s| {
        crate::cli::args::parse_jobs(s).map(drop)
    })?;
    number("max_turns", c.max_turns.map(|n| n.to_string()), |s| {
        parse_max_turns(s).map(drop)
    })?;
    number(
        "max_budget_usd",
        c.max_budget_usd.map(|n| n.to_string()),
        |s| parse_budget(s).map(drop),
    )?;
    number(
        "command_timeout",
        c.command_timeout.map(|n| n.to_string()),
        |s| parse_command_timeout(s).map(drop),
    )?;
    for (key, value) in [
        ("task_timeout", c.task_timeout),
        ("idle_timeout", c.idle_timeout),
        ("lane_setup_timeout", c.lane_setup_timeout),
    ] {
        if let Some(d) = value {
            check_timeout(d).map_err(|why| (key, why))?;
        }
    }
    Ok(())
}

fn fill<T>(slot: &mut Option<T>, from_file: Option<T>) {
    if slot.is_none() {
        *slot = from_file;
    }
}

/// The change to run when no id was given: chosen on a terminal, else an
/// input error listing the ids.
pub fn choose_change(project: &Project, terminal: bool) -> Result<String, miette::Report> {
    let changes = project.active_changes()?;
    if changes.is_empty() {
        return Err(miette!(
            help = format!(
                "create one under {} (with a proposal.md)",
                project.changes_dir().display()
            ),
            "there is no active change to run"
        ));
    }
    let ids: Vec<&str> = changes.iter().map(|c| c.id.as_str()).collect();
    if !terminal {
        return Err(miette!(
            help = "name one: spectr ralph <change-id>",
            "no change id given, and no terminal to choose one on; active changes: {}",
            ids.join(", ")
        ));
    }
    let width = ids.iter().map(|i| i.chars().count()).max().unwrap_or(0);
    let items: Vec<String> = changes
        .iter()
        .map(|c| {
            let counts = match crate::cli::list::count_tasks(c, &mut Vec::new()) {
                Ok(n) => format!("{}/{} tasks", n.completed, n.total),
                Err(_) => "(tasks file has errors)".to_string(),
            };
            format!("{:<width$}  {counts}", c.id)
        })
        .collect();
    match crate::ui::prompts::choose_change(&items) {
        Ok(Some(i)) => ids
            .get(i)
            .map(|s| s.to_string())
            .ok_or_else(|| miette!("no change chosen")),
        Ok(None) => Err(miette!("no change chosen; nothing was run")),
        Err(e) => Err(miette!("no change chosen ({e}); nothing was run")),
    }
}

/// The settings part of the plan: agent, retries, checkpoints, verification.
pub fn settings_line(
    agent: &str,
    max_retries: u32,
    checkpoints: bool,
    verify: Option<&str>,
    jobs: usize,
    lane_setup: Option<&str>,
) -> String {
    let mut lanes = match jobs {
        1 => String::new(),
        0 => " · jobs: one per lane (up to the CPUs)".to_string(),
        n => format!(" · jobs: up to {n} lanes at once"),
    };
    if let Some(cmd) = lane_setup.filter(|_| jobs != 1) {
        lanes.push_str(&format!(" · lane setup `{cmd}`"));
    }
    format!(
        "Agent {agent} · max retries {max_retries} · checkpoints {} · verify {}{lanes}",
        if checkpoints { "on" } else { "off" },
        verify.map_or("off".to_string(), |v| format!("`{v}`"))
    )
}

/// Everything the run needs, settled from the flags (already merged with
/// `spectr.yaml`) in one step.
pub fn run_config(
    args: &RalphArgs,
    project: crate::model::Project,
    change: crate::model::Change,
    agent: crate::agent::AgentConfig,
    agent_label: String,
    stdin_terminal: bool,
) -> crate::ralph::config::RunConfig {
    use crate::ralph::config::{ExhaustPolicy, RESULT_GRACE, RunConfig};
    // Without a terminal nobody can answer the question: abort instead.
    let on_exhaust = match args.on_exhaust {
        Some(OnExhaust::Prompt) | None if stdin_terminal => ExhaustPolicy::Prompt,
        Some(OnExhaust::Prompt) | None => ExhaustPolicy::Abort,
        Some(OnExhaust::Retry) => ExhaustPolicy::Retry,
        Some(OnExhaust::Skip) => ExhaustPolicy::Skip,
        Some(OnExhaust::Abort) => ExhaustPolicy::Abort,
    };
    let task_timeout = args.task_timeout.unwrap_or(DEFAULT_TASK_TIMEOUT);
    RunConfig {
        workdir: project.root.clone(),
        project,
        change,
        // Agents that can bound themselves get the task's limit too.
        agent: crate::agent::AgentConfig {
            time_limit: Some(task_timeout),
            ..agent
        },
        agent_label,
        max_retries: args.max_retries.unwrap_or(DEFAULT_MAX_RETRIES),
        command_timeout: std::time::Duration::from_secs(
            args.command_timeout
                .unwrap_or(DEFAULT_COMMAND_TIMEOUT_SECS)
                .max(1),
        ),
        task_timeout,
        idle_timeout: args.idle_timeout,
        verify: args.verify.clone(),
        on_exhaust,
        checkpoints: !args.no_checkpoint,
        selection: None,
        completion_grace: args.completion_grace,
        run_id: String::new(),
        kill_grace: args.kill_grace,
        result_grace: RESULT_GRACE,
        jobs: args.jobs.unwrap_or(1),
        story_completion: args.story_completion.unwrap_or_default(),
        // An empty command (`--lane-setup ''`) turns spectr.yaml's off.
        lane_setup: args.lane_setup.clone().filter(|c| !c.trim().is_empty()),
        lane_setup_timeout: args
            .lane_setup_timeout
            .unwrap_or(crate::ralph::config::LANE_SETUP_TIMEOUT),
    }
}
