//! The exact command line that runs each agent CLI headless on a prompt.
//!
//! Permission choices (an unattended loop cannot answer prompts):
//! - claude: `--dangerously-skip-permissions`, except as root without
//!   `IS_SANDBOX=1`, where Claude refuses that flag and exits at once; there we
//!   use `--permission-mode acceptEdits` (file edits allowed; shell commands
//!   outside its allow-list are denied and show up as permission denials).
//! - codex: `--sandbox workspace-write`; gemini: `--yolo`; amp:
//!   `--dangerously-allow-all`; cursor: `--force`; copilot: `--allow-all`;
//!   qwen: `--yolo` (without them copilot denies every write and qwen does
//!   not even offer its write tools, and both still exit 0); pi has no
//!   permission system.
//!
//! Passing any permission flag of your own with `--agent-arg` replaces ours.
//! With `ralph: permissions:` in spectr.yaml, claude and copilot get the
//! policy in their own flags instead ([`super::permissions`]).
//!
//! Other choices that make each CLI work unattended:
//! - codex: `--skip-git-repo-check` (codex refuses to run outside a git
//!   repository without it, and spectr runs there, without checkpoints).
//! - gemini: `--skip-trust` and `GEMINI_CLI_TRUST_WORKSPACE=true`: since
//!   0.61.0 gemini ignores `--yolo` and exits 55 in a folder it was not told
//!   to trust.
//! - copilot, pi and qwen get the prompt on stdin, always: none takes a
//!   200 KB argument (Linux caps one at 128 KiB), pi reads an argument
//!   starting with `-` as an option even after `--` and one starting with
//!   `@` as a file, qwen drops a prompt that follows `--`.
//! - copilot: `--usage-output-file` in the attempt's own folder, its only
//!   report of tokens. qwen: `--max-wall-time` set to the task timeout, so
//!   its own back-off (it retries a 429 for many minutes) is bounded too.
//! - opencode and cursor take the prompt as an argument: it goes after `--`,
//!   so a prompt starting with `-` (front matter, a list) is not read as an
//!   option. A prompt too long for an argument goes to opencode on stdin,
//!   which `opencode run` appends whole to its message (`--file` would pass it
//!   through opencode's Read tool, which returns at most 2000 lines / 50 KB).

use super::AgentConfig;
use super::host::{Host, resolve, resolve_custom};
use super::permissions::NativePolicy;
use crate::agent::kind::AgentKind;
use crate::agent::{AgentError, shellwords};
use std::path::{Path, PathBuf};

/// A fully built command: what the supervisor starts.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandSpec {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    /// Written to the agent's stdin, which is then closed. `None`: stdin is
    /// empty (closed at once).
    pub stdin: Option<String>,
    /// The prompt this command carries (on stdin, as an argument or in a
    /// file): the supervisor ignores echoes of it when reading signals.
    pub prompt: String,
    /// The session id assigned to the agent up front (Claude's `--session-id`).
    pub session_id: Option<String>,
    /// A file the agent writes its usage to when it exits (copilot's
    /// `--usage-output-file`): read once it has, for the receipt.
    pub usage_file: Option<PathBuf>,
}

impl CommandSpec {
    /// The command line for logs: program and arguments, quoted where needed,
    /// with a long prompt argument shortened.
    pub fn command_line(&self) -> String {
        let mut words = vec![quote(&self.program.display().to_string())];
        for arg in &self.args {
            if arg.len() > 80 && arg == &self.prompt {
                words.push("'<prompt>'".to_string());
            } else {
                words.push(quote(arg));
            }
        }
        words.join(" ")
    }
}

fn quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%{}".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// Prompts longer than this are not passed as an argument (Linux caps one
/// argument at 128 KiB): they go to a file the agent is told to read.
pub(super) const MAX_PROMPT_ARG_BYTES: usize = 100 * 1024;

/// Builds the command that runs `cfg`'s agent on `prompt` in `cwd`. Files
/// of this attempt (a prompt file when the prompt cannot go on stdin,
/// copilot's usage file) go in `attempt_dir`, the attempt's own folder.
pub fn build_command(
    cfg: &AgentConfig,
    prompt: &str,
    cwd: &Path,
    attempt_dir: &Path,
) -> Result<CommandSpec, AgentError> {
    let policy = NATIVE_POLICY.get().and_then(Option::as_ref);
    let mut spec = build_command_with(&Host::current(), cfg, policy, prompt, cwd, attempt_dir)?;
    spec.env
        .extend(AGENT_ENV.get().into_iter().flatten().cloned());
    Ok(spec)
}

/// Variables every agent of this process gets, set once by the run (the
/// change, so `spectr task done` inside the agent finds it).
static AGENT_ENV: std::sync::OnceLock<Vec<(String, String)>> = std::sync::OnceLock::new();

/// Sets [`AGENT_ENV`]; only the first call counts (one run per process).
pub fn set_agent_env(vars: Vec<(String, String)>) {
    let _ = AGENT_ENV.set(vars);
}

/// `ralph: permissions:` for the CLIs whose own flags carry it
/// ([`super::permissions`]); `None`: spectr.yaml does not say it.
static NATIVE_POLICY: std::sync::OnceLock<Option<NativePolicy>> = std::sync::OnceLock::new();

/// Sets [`NATIVE_POLICY`]; only the first call counts (one run per process).
pub fn set_native_policy(policy: Option<NativePolicy>) {
    let _ = NATIVE_POLICY.set(policy);
}

/// The value the user gave `flag` (`--flag value` or `--flag=value`).
fn user_value<'a>(cfg: &'a AgentConfig, flag: &str) -> Option<&'a str> {
    let args = &cfg.extra_args;
    args.iter().enumerate().find_map(|(i, a)| {
        if a == flag {
            args.get(i + 1).map(String::as_str)
        } else {
            a.strip_prefix(flag).and_then(|rest| rest.strip_prefix('='))
        }
    })
}

/// Whether the user passed one of `flags` (as `--flag` or `--flag=value`).
fn user_has(cfg: &AgentConfig, flags: &[&str]) -> bool {
    cfg.extra_args.iter().any(|a| {
        flags
            .iter()
            .any(|f| a == f || a.strip_prefix(f).is_some_and(|rest| rest.starts_with('=')))
    })
}

#[cfg(test)]
pub(crate) fn build_command_in(
    host: &Host,
    cfg: &AgentConfig,
    prompt: &str,
    cwd: &Path,
    attempt_dir: &Path,
) -> Result<CommandSpec, AgentError> {
    build_command_with(host, cfg, None, prompt, cwd, attempt_dir)
}

/// [`build_command_in`] under `ralph: permissions:` (`policy`).
pub(crate) fn build_command_with(
    host: &Host,
    cfg: &AgentConfig,
    policy: Option<&NativePolicy>,
    prompt: &str,
    cwd: &Path,
    attempt_dir: &Path,
) -> Result<CommandSpec, AgentError> {
    let mut spec = CommandSpec {
        program: PathBuf::new(),
        args: Vec::new(),
        env: Vec::new(),
        cwd: cwd.to_path_buf(),
        stdin: Some(prompt.to_string()),
        prompt: prompt.to_string(),
        session_id: None,
        usage_file: None,
    };
    let at = Place {
        prompt,
        cwd,
        attempt_dir,
        policy,
    };
    match cfg.kind {
        AgentKind::Claude => claude(host, cfg, &at, &mut spec)?,
        AgentKind::Codex => codex(host, cfg, &at, &mut spec)?,
        AgentKind::Gemini => gemini(host, cfg, &at, &mut spec)?,
        AgentKind::Opencode => opencode(host, cfg, &at, &mut spec)?,
        AgentKind::Amp => amp(host, cfg, &at, &mut spec)?,
        AgentKind::Cursor => cursor(host, cfg, &at, &mut spec)?,
        AgentKind::Copilot => copilot(host, cfg, &at, &mut spec)?,
        AgentKind::Pi => pi(host, cfg, &at, &mut spec)?,
        AgentKind::Qwen => qwen(host, cfg, &at, &mut spec)?,
        AgentKind::Custom => custom(host, cfg, &at, &mut spec)?,
        AgentKind::Acp => {
            custom(host, cfg, &at, &mut spec)?;
            acp(&mut spec);
        }
        AgentKind::ClaudeAcp
        | AgentKind::CodexAcp
        | AgentKind::GeminiAcp
        | AgentKind::QwenAcp
        | AgentKind::OpencodeAcp => {
            acp_preset(host, cfg, &mut spec)?;
            acp(&mut spec);
        }
    }
    Ok(spec)
}

/// An ACP agent gets its prompt in the conversation (`session/prompt`),
/// not on stdin.
fn acp(spec: &mut CommandSpec) {
    spec.stdin = None;
}

/// The ACP presets: each CLI's own ACP mode, or its adapter.
fn acp_preset(host: &Host, cfg: &AgentConfig, spec: &mut CommandSpec) -> Result<(), AgentError> {
    spec.program = resolve(host, cfg.kind)?;
    let mode: &[&str] = match cfg.kind {
        AgentKind::GeminiAcp | AgentKind::QwenAcp => &["--acp"],
        AgentKind::OpencodeAcp => &["acp"],
        _ => &[],
    };
    push(&mut spec.args, mode);
    if cfg.kind == AgentKind::GeminiAcp {
        // As for `gemini`: an untrusted folder is refused before a word.
        if !user_has(cfg, &["--skip-trust"]) {
            push(&mut spec.args, &["--skip-trust"]);
        }
        spec.env
            .push(("GEMINI_CLI_TRUST_WORKSPACE".into(), "true".into()));
    }
    spec.args.extend(cfg.extra_args.iter().cloned());
    Ok(())
}

/// Where an attempt's agent runs: what every agent's command is built from.
struct Place<'a> {
    prompt: &'a str,
    cwd: &'a Path,
    attempt_dir: &'a Path,
    /// `ralph: permissions:`, for the CLIs whose flags carry it.
    policy: Option<&'a NativePolicy>,
}

fn push(args: &mut Vec<String>, words: &[&str]) {
    args.extend(words.iter().map(|w| w.to_string()));
}

/// Claude Code: stream-json on stdout, the prompt on stdin, a session id of ours.
fn claude(
    host: &Host,
    cfg: &AgentConfig,
    at: &Place<'_>,
    spec: &mut CommandSpec,
) -> Result<(), AgentError> {
    let args = &mut spec.args;
    spec.program = resolve(host, cfg.kind)?;
    // stream-json needs --verbose; the at.prompt goes on stdin because a
    // large -p argument can stall Claude before it prints anything.
    push(args, &["-p", "--output-format", "stream-json", "--verbose"]);
    if !user_has(
        cfg,
        &[
            "--dangerously-skip-permissions",
            "--permission-mode",
            "--allow-dangerously-skip-permissions",
        ],
    ) {
        if let Some(policy) = at.policy {
            // Refused calls are answered, never waited on (`dontAsk`), as
            // root too.
            args.extend(super::permissions::claude_args(policy, at.cwd).0);
        } else if !host.is_root || host.is_sandbox {
            push(args, &["--dangerously-skip-permissions"]);
        } else {
            push(args, &["--permission-mode", "acceptEdits"]);
        }
    }
    if !user_has(cfg, &["--session-id", "--resume", "-r", "--continue", "-c"]) {
        let id = uuid::Uuid::new_v4().to_string();
        push(args, &["--session-id", &id]);
        spec.session_id = Some(id);
    }
    if let Some(model) = &cfg.model {
        push(args, &["--model", model]);
    }
    if let Some(turns) = cfg.max_turns {
        push(args, &["--max-turns", &turns.to_string()]);
    }
    if let Some(budget) = cfg.max_budget_usd {
        push(args, &["--max-budget-usd", &budget.to_string()]);
    }
    args.extend(cfg.extra_args.iter().cloned());
    Ok(())
}

/// Codex: `exec --json`, sandboxed to the workspace unless told otherwise, the prompt on stdin.
fn codex(
    host: &Host,
    cfg: &AgentConfig,
    _at: &Place<'_>,
    spec: &mut CommandSpec,
) -> Result<(), AgentError> {
    let args = &mut spec.args;
    spec.program = resolve(host, cfg.kind)?;
    push(args, &["exec", "--json"]);
    if let Some(model) = &cfg.model {
        push(args, &["--model", model]);
    }
    if !user_has(
        cfg,
        &[
            "--sandbox",
            "-s",
            "--dangerously-bypass-approvals-and-sandbox",
            "--full-auto",
        ],
    ) {
        push(args, &["--sandbox", "workspace-write"]);
    }
    push(args, &["--skip-git-repo-check"]);
    args.extend(cfg.extra_args.iter().cloned());
    // `-` last: read the at.prompt from stdin (else codex waits for an argument).
    push(args, &["-"]);
    Ok(())
}

/// Gemini CLI: stream-json, `--yolo` and a trusted workspace (else it exits at once).
fn gemini(
    host: &Host,
    cfg: &AgentConfig,
    _at: &Place<'_>,
    spec: &mut CommandSpec,
) -> Result<(), AgentError> {
    let args = &mut spec.args;
    spec.program = resolve(host, cfg.kind)?;
    push(args, &["--output-format", "stream-json"]);
    if let Some(model) = &cfg.model {
        push(args, &["--model", model]);
    }
    if !user_has(cfg, &["--yolo", "-y", "--approval-mode"]) {
        push(args, &["--yolo"]);
    }
    // Without trust, gemini overrides --yolo and exits 55 at once.
    if !user_has(cfg, &["--skip-trust"]) {
        push(args, &["--skip-trust"]);
    }
    spec.env
        .push(("GEMINI_CLI_TRUST_WORKSPACE".into(), "true".into()));
    args.extend(cfg.extra_args.iter().cloned());
    Ok(())
}

/// OpenCode: `run --format json`, the prompt as its argument, or on stdin when long.
fn opencode(
    host: &Host,
    cfg: &AgentConfig,
    at: &Place<'_>,
    spec: &mut CommandSpec,
) -> Result<(), AgentError> {
    let args = &mut spec.args;
    spec.program = resolve(host, cfg.kind)?;
    push(args, &["run", "--format", "json"]);
    if let Some(model) = &cfg.model {
        push(args, &["--model", model]);
    }
    args.extend(cfg.extra_args.iter().cloned());
    if at.prompt.len() > MAX_PROMPT_ARG_BYTES {
        // On stdin, whole: `opencode run` appends piped input to its
        // message. (`--file` is read through opencode's Read tool,
        // which stops at 2000 lines / 50 KB.)
        spec.stdin = Some(at.prompt.to_string());
    } else {
        spec.stdin = None;
        push(args, &["--", at.prompt]);
    }
    Ok(())
}

/// Amp: `-x` with every tool allowed, the prompt on stdin.
fn amp(
    host: &Host,
    cfg: &AgentConfig,
    _at: &Place<'_>,
    spec: &mut CommandSpec,
) -> Result<(), AgentError> {
    let args = &mut spec.args;
    spec.program = resolve(host, cfg.kind)?;
    if !user_has(cfg, &["--dangerously-allow-all"]) {
        push(args, &["--dangerously-allow-all"]);
    }
    push(args, &["-x"]);
    args.extend(cfg.extra_args.iter().cloned());
    Ok(())
}

/// Cursor Agent: stream-json, `--force`, the prompt as its argument (a file it is told to read when long).
fn cursor(
    host: &Host,
    cfg: &AgentConfig,
    at: &Place<'_>,
    spec: &mut CommandSpec,
) -> Result<(), AgentError> {
    let args = &mut spec.args;
    spec.program = resolve(host, cfg.kind)?;
    push(args, &["--print", "--output-format", "stream-json"]);
    if !user_has(cfg, &["--force", "-f"]) {
        push(args, &["--force"]);
    }
    if let Some(model) = &cfg.model {
        push(args, &["--model", model]);
    }
    args.extend(cfg.extra_args.iter().cloned());
    spec.stdin = None;
    if at.prompt.len() > MAX_PROMPT_ARG_BYTES {
        let file = write_prompt_file(at.attempt_dir, at.prompt)?;
        push(
            args,
            &[
                "--",
                &format!(
                    "Read the file {}: it holds your full instructions. Follow them.",
                    file.display()
                ),
            ],
        );
    } else {
        push(args, &["--", at.prompt]);
    }
    Ok(())
}

/// GitHub Copilot CLI: JSON, every tool allowed, its token report in a file of the attempt's.
fn copilot(
    host: &Host,
    cfg: &AgentConfig,
    at: &Place<'_>,
    spec: &mut CommandSpec,
) -> Result<(), AgentError> {
    let args = &mut spec.args;
    spec.program = resolve(host, cfg.kind)?;
    // No -p: the at.prompt is stdin (`-p "-x"` is refused, and an
    // argument is capped at 128 KiB).
    push(args, &["--output-format", "json"]);
    if !user_has(
        cfg,
        &[
            "--allow-all",
            "--yolo",
            "--allow-all-tools",
            "--allow-tool",
            "--deny-tool",
            "--allow-all-paths",
        ],
    ) {
        match at.policy {
            Some(policy) => args.extend(super::permissions::copilot_args(policy).0),
            None => push(args, &["--allow-all"]),
        }
    }
    if let Some(model) = &cfg.model {
        push(args, &["--model", model]);
    }
    // Its only report of tokens, written at exit.
    spec.usage_file = match user_value(cfg, "--usage-output-file") {
        Some(theirs) => Some(at.cwd.join(theirs)),
        None => {
            let file = at.attempt_dir.join("copilot-usage.json");
            std::fs::create_dir_all(at.attempt_dir).map_err(|source| AgentError::AttemptDir {
                path: at.attempt_dir.to_path_buf(),
                source,
            })?;
            push(args, &["--usage-output-file", &file.display().to_string()]);
            Some(file)
        }
    };
    args.extend(cfg.extra_args.iter().cloned());
    Ok(())
}

/// pi: `-p --mode json`, the prompt on stdin.
fn pi(
    host: &Host,
    cfg: &AgentConfig,
    _at: &Place<'_>,
    spec: &mut CommandSpec,
) -> Result<(), AgentError> {
    let args = &mut spec.args;
    spec.program = resolve(host, cfg.kind)?;
    // -p with no message argument: the at.prompt is stdin, whatever it
    // starts with (pi reads `-x` as an option and `@x` as a file).
    push(args, &["-p", "--mode", "json"]);
    if let Some(model) = &cfg.model {
        push(args, &["--model", model]);
    }
    args.extend(cfg.extra_args.iter().cloned());
    Ok(())
}

/// Qwen Code: stream-json, `--yolo`, its 429 back-off bounded by the task's time limit.
fn qwen(
    host: &Host,
    cfg: &AgentConfig,
    _at: &Place<'_>,
    spec: &mut CommandSpec,
) -> Result<(), AgentError> {
    let args = &mut spec.args;
    spec.program = resolve(host, cfg.kind)?;
    push(args, &["-o", "stream-json"]);
    if !user_has(cfg, &["--yolo", "-y", "--approval-mode"]) {
        push(args, &["--yolo"]);
    }
    if let Some(model) = &cfg.model {
        push(args, &["--model", model]);
    }
    // Its back-off on a 429 runs for many minutes: bounded by the
    // task's own limit (exit 55 when it passes).
    if let Some(limit) = cfg.time_limit
        && !user_has(cfg, &["--max-wall-time"])
    {
        let secs = limit.as_secs().max(1);
        push(args, &["--max-wall-time", &format!("{secs}s")]);
    }
    args.extend(cfg.extra_args.iter().cloned());
    Ok(())
}

/// `--agent-cmd`: its words, the prompt on stdin or in the file `{prompt_file}` names.
fn custom(
    host: &Host,
    cfg: &AgentConfig,
    at: &Place<'_>,
    spec: &mut CommandSpec,
) -> Result<(), AgentError> {
    let args = &mut spec.args;
    let (program, words) = custom_words(host, cfg)?;
    spec.program = program;
    args.extend(words);
    args.extend(cfg.extra_args.iter().cloned());
    const PLACEHOLDER: &str = "{prompt_file}";
    if args.iter().any(|a| a.contains(PLACEHOLDER)) {
        let file = write_prompt_file(at.attempt_dir, at.prompt)?
            .display()
            .to_string();
        for arg in args.iter_mut() {
            *arg = arg.replace(PLACEHOLDER, &file);
        }
        spec.stdin = None;
    }
    Ok(())
}

/// `--agent-cmd` split into its program (found) and its arguments.
pub(super) fn custom_words(
    host: &Host,
    cfg: &AgentConfig,
) -> Result<(PathBuf, Vec<String>), AgentError> {
    let line = cfg
        .custom_cmd
        .as_deref()
        .ok_or(AgentError::CustomCmdMissing)?;
    if line.trim().is_empty() {
        return Err(AgentError::CustomCmdEmpty);
    }
    let mut words = shellwords::split(line)
        .map_err(|reason| AgentError::CustomCmdSyntax {
            cmd: line.to_string(),
            reason,
        })?
        .into_iter();
    let program = words.next().ok_or(AgentError::CustomCmdEmpty)?;
    Ok((resolve_custom(host, &program)?, words.collect()))
}

/// Writes the prompt to a new file in `dir` (unique per call, so parallel
/// attempts sharing a folder never overwrite each other's prompt).
fn write_prompt_file(dir: &Path, prompt: &str) -> Result<PathBuf, AgentError> {
    let path = dir.join(format!("prompt-{}.md", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&path, prompt))
        .map_err(|source| AgentError::PromptFile {
            path: path.clone(),
            source,
        })?;
    Ok(path)
}
