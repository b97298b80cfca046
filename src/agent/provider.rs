//! Agent providers: which CLIs we know, how to find them, and the exact
//! command line that runs each one headless on a prompt.
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

use crate::agent::AgentError;
use crate::agent::shellwords;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum AgentKind {
    Claude,
    Codex,
    Gemini,
    Opencode,
    Amp,
    Cursor,
    Copilot,
    Pi,
    Qwen,
    Custom,
}

/// The agents `detect` looks for, in order of preference: the ones run for
/// real against their CLIs first, then amp and cursor (from their docs).
pub const DETECTION_ORDER: [AgentKind; 9] = [
    AgentKind::Claude,
    AgentKind::Codex,
    AgentKind::Gemini,
    AgentKind::Opencode,
    AgentKind::Copilot,
    AgentKind::Qwen,
    AgentKind::Pi,
    AgentKind::Amp,
    AgentKind::Cursor,
];

/// What the user chose on the command line, for every attempt of a run.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub kind: AgentKind,
    /// `--agent-cmd`: the command line for `custom`.
    pub custom_cmd: Option<String>,
    /// `--agent-arg`, passed through in order.
    pub extra_args: Vec<String>,
    pub model: Option<String>,
    pub max_turns: Option<u32>,
    pub max_budget_usd: Option<f64>,
    /// The attempt's time limit (`--task-timeout`), for agents that can bound
    /// themselves too (qwen's `--max-wall-time`).
    pub time_limit: Option<Duration>,
}

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

pub const DEFAULT_RESULT_GRACE: Duration = Duration::from_secs(10);

/// Prompts longer than this are not passed as an argument (Linux caps one
/// argument at 128 KiB): they go to a file the agent is told to read.
const MAX_PROMPT_ARG_BYTES: usize = 100 * 1024;

pub fn display_name(kind: AgentKind) -> &'static str {
    match kind {
        AgentKind::Claude => "Claude Code",
        AgentKind::Codex => "Codex CLI",
        AgentKind::Gemini => "Gemini CLI",
        AgentKind::Opencode => "OpenCode",
        AgentKind::Amp => "Amp",
        AgentKind::Cursor => "Cursor Agent",
        AgentKind::Copilot => "GitHub Copilot CLI",
        AgentKind::Pi => "pi",
        AgentKind::Qwen => "Qwen Code",
        AgentKind::Custom => "custom command",
    }
}

/// The binary looked up on PATH. Cursor's CLI is also installed as `agent`,
/// a name too generic to detect by; `--agent cursor` accepts either.
pub fn binary(kind: AgentKind) -> &'static str {
    match kind {
        AgentKind::Claude => "claude",
        AgentKind::Codex => "codex",
        AgentKind::Gemini => "gemini",
        AgentKind::Opencode => "opencode",
        AgentKind::Amp => "amp",
        AgentKind::Cursor => "cursor-agent",
        AgentKind::Copilot => "copilot",
        AgentKind::Pi => "pi",
        AgentKind::Qwen => "qwen",
        AgentKind::Custom => "--agent-cmd",
    }
}

/// `Claude Code (claude)`: how the UI names the agent in use.
pub fn label(kind: AgentKind) -> String {
    format!("{} ({})", display_name(kind), binary(kind))
}

pub fn install_hint(kind: AgentKind) -> &'static str {
    match kind {
        AgentKind::Claude => "npm install -g @anthropic-ai/claude-code",
        AgentKind::Codex => "npm install -g @openai/codex",
        AgentKind::Gemini => "npm install -g @google/gemini-cli",
        AgentKind::Opencode => "npm install -g opencode-ai",
        // `@sourcegraph/amp` is now only a pointer to this package.
        AgentKind::Amp => "npm install -g @ampcode/cli",
        AgentKind::Cursor => "curl https://cursor.com/install -fsS | bash",
        AgentKind::Copilot => "npm install -g @github/copilot",
        AgentKind::Pi => "npm install -g @mariozechner/pi-coding-agent",
        AgentKind::Qwen => "npm install -g @qwen-code/qwen-code",
        AgentKind::Custom => "--agent-cmd '<command line>'",
    }
}

/// The folders an agent writes its own state to wherever it runs (login,
/// settings, sessions, caches): what a sandbox must leave writable for that
/// agent, and only for it. `env` reads the agent's environment. Measured
/// for copilot, pi and qwen; empty for the others until they are.
///
/// - copilot: `$COPILOT_HOME` (default `~/.copilot`), and its cache
///   (`$XDG_CACHE_HOME`, default `~/.cache`): `copilot/` (~235 MB unpacked
///   there on first run, `--version` included) and the device id it keeps
///   in `Microsoft/DeveloperTools/`;
/// - pi: `$PI_CODING_AGENT_DIR` (default `~/.pi/agent`), sessions included;
/// - qwen: `~/.qwen`.
pub fn state_dirs(kind: AgentKind, env: &dyn Fn(&str) -> Option<OsString>) -> Vec<PathBuf> {
    let set = |name: &str| env(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    let home = set("HOME");
    let in_home = |rest: &str| home.as_ref().map(|h| h.join(rest));
    let dirs = match kind {
        AgentKind::Copilot => {
            let cache = set("XDG_CACHE_HOME").or_else(|| in_home(".cache"));
            vec![
                set("COPILOT_HOME").or_else(|| in_home(".copilot")),
                cache.as_ref().map(|c| c.join("copilot")),
                cache.map(|c| c.join("Microsoft/DeveloperTools")),
            ]
        }
        AgentKind::Pi => vec![set("PI_CODING_AGENT_DIR").or_else(|| in_home(".pi/agent"))],
        AgentKind::Qwen => vec![in_home(".qwen")],
        _ => Vec::new(),
    };
    dirs.into_iter().flatten().collect()
}

/// The first supported agent installed, in [`DETECTION_ORDER`].
pub fn detect() -> Result<(AgentKind, &'static str), AgentError> {
    detect_in(&Host::current())
}

/// Builds the command that runs `cfg`'s agent on `prompt` in `cwd`. Files
/// of this attempt (a prompt file when the prompt cannot go on stdin,
/// copilot's usage file) go in `attempt_dir`, the attempt's own folder.
pub fn build_command(
    cfg: &AgentConfig,
    prompt: &str,
    cwd: &Path,
    attempt_dir: &Path,
) -> Result<CommandSpec, AgentError> {
    let mut spec = build_command_in(&Host::current(), cfg, prompt, cwd, attempt_dir)?;
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

/// The facts about this machine that change the command line: kept apart so
/// tests can pin them.
#[derive(Debug, Clone)]
pub(crate) struct Host {
    pub path: Option<OsString>,
    pub is_root: bool,
    /// `IS_SANDBOX=1`: Claude then accepts its skip-permissions flag as root.
    pub is_sandbox: bool,
    /// Resolves relative `--agent-cmd` programs (the user's shell directory).
    pub cwd: PathBuf,
}

impl Host {
    pub fn current() -> Host {
        Host {
            path: std::env::var_os("PATH"),
            is_root: effective_uid_is_root(),
            is_sandbox: std::env::var("IS_SANDBOX").is_ok_and(|v| v == "1"),
            cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
        }
    }

    fn find(&self, name: &str) -> Option<PathBuf> {
        which::which_in(name, self.path.as_ref(), &self.cwd).ok()
    }
}

/// Whether we run as root (without needing nix's `user` feature): the owner
/// of `/proc/self` is our effective uid; elsewhere, a new file's owner is.
fn effective_uid_is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    if let Ok(meta) = std::fs::metadata("/proc/self") {
        return meta.uid() == 0;
    }
    tempfile::tempfile()
        .and_then(|f| f.metadata())
        .is_ok_and(|m| m.uid() == 0)
}

pub(crate) fn detect_in(host: &Host) -> Result<(AgentKind, &'static str), AgentError> {
    for kind in DETECTION_ORDER {
        if host.find(binary(kind)).is_some_and(|p| claimable(kind, &p)) {
            return Ok((kind, display_name(kind)));
        }
    }
    let looked_for = DETECTION_ORDER
        .iter()
        .map(|k| binary(*k))
        .collect::<Vec<_>>()
        .join(", ");
    let install = DETECTION_ORDER
        .iter()
        .map(|k| format!("  {:<14} {}", display_name(*k), install_hint(*k)))
        .collect::<Vec<_>>()
        .join("\n");
    Err(AgentError::NoneInstalled {
        looked_for,
        install,
    })
}

/// Whether a program found by the agent's name may be taken for it when
/// detecting. `pi` is too generic a name (other programs print digits of
/// pi): it counts only when it leads into an npm install of
/// `@mariozechner/pi-coding-agent`. `--agent pi` takes any `pi`.
fn claimable(kind: AgentKind, found: &Path) -> bool {
    match kind {
        AgentKind::Pi => std::fs::canonicalize(found)
            .is_ok_and(|p| p.to_string_lossy().contains("pi-coding-agent")),
        _ => true,
    }
}

fn resolve(host: &Host, kind: AgentKind) -> Result<PathBuf, AgentError> {
    let names: &[&str] = match kind {
        AgentKind::Cursor => &["cursor-agent", "agent"],
        _ => &[binary(kind)],
    };
    names
        .iter()
        .find_map(|n| host.find(n))
        .ok_or(AgentError::NotInstalled {
            name: display_name(kind),
            binary: binary(kind).to_string(),
            install: install_hint(kind),
        })
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

pub(crate) fn build_command_in(
    host: &Host,
    cfg: &AgentConfig,
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
    let args = &mut spec.args;
    let push =
        |args: &mut Vec<String>, words: &[&str]| args.extend(words.iter().map(|w| w.to_string()));
    match cfg.kind {
        AgentKind::Claude => {
            spec.program = resolve(host, cfg.kind)?;
            // stream-json needs --verbose; the prompt goes on stdin because a
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
                if !host.is_root || host.is_sandbox {
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
        }
        AgentKind::Codex => {
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
            // `-` last: read the prompt from stdin (else codex waits for an argument).
            push(args, &["-"]);
        }
        AgentKind::Gemini => {
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
        }
        AgentKind::Opencode => {
            spec.program = resolve(host, cfg.kind)?;
            push(args, &["run", "--format", "json"]);
            if let Some(model) = &cfg.model {
                push(args, &["--model", model]);
            }
            args.extend(cfg.extra_args.iter().cloned());
            if prompt.len() > MAX_PROMPT_ARG_BYTES {
                // On stdin, whole: `opencode run` appends piped input to its
                // message. (`--file` is read through opencode's Read tool,
                // which stops at 2000 lines / 50 KB.)
                spec.stdin = Some(prompt.to_string());
            } else {
                spec.stdin = None;
                push(args, &["--", prompt]);
            }
        }
        AgentKind::Amp => {
            spec.program = resolve(host, cfg.kind)?;
            if !user_has(cfg, &["--dangerously-allow-all"]) {
                push(args, &["--dangerously-allow-all"]);
            }
            push(args, &["-x"]);
            args.extend(cfg.extra_args.iter().cloned());
        }
        AgentKind::Cursor => {
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
            if prompt.len() > MAX_PROMPT_ARG_BYTES {
                let file = write_prompt_file(attempt_dir, prompt)?;
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
                push(args, &["--", prompt]);
            }
        }
        AgentKind::Copilot => {
            spec.program = resolve(host, cfg.kind)?;
            // No -p: the prompt is stdin (`-p "-x"` is refused, and an
            // argument is capped at 128 KiB).
            push(args, &["--output-format", "json"]);
            if !user_has(cfg, &["--allow-all", "--yolo", "--allow-all-tools"]) {
                push(args, &["--allow-all"]);
            }
            if let Some(model) = &cfg.model {
                push(args, &["--model", model]);
            }
            // Its only report of tokens, written at exit.
            spec.usage_file = match user_value(cfg, "--usage-output-file") {
                Some(theirs) => Some(cwd.join(theirs)),
                None => {
                    let file = attempt_dir.join("copilot-usage.json");
                    std::fs::create_dir_all(attempt_dir).map_err(|source| {
                        AgentError::AttemptDir {
                            path: attempt_dir.to_path_buf(),
                            source,
                        }
                    })?;
                    push(args, &["--usage-output-file", &file.display().to_string()]);
                    Some(file)
                }
            };
            args.extend(cfg.extra_args.iter().cloned());
        }
        AgentKind::Pi => {
            spec.program = resolve(host, cfg.kind)?;
            // -p with no message argument: the prompt is stdin, whatever it
            // starts with (pi reads `-x` as an option and `@x` as a file).
            push(args, &["-p", "--mode", "json"]);
            if let Some(model) = &cfg.model {
                push(args, &["--model", model]);
            }
            args.extend(cfg.extra_args.iter().cloned());
        }
        AgentKind::Qwen => {
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
        }
        AgentKind::Custom => {
            let (program, words) = custom_words(host, cfg)?;
            spec.program = program;
            args.extend(words);
            args.extend(cfg.extra_args.iter().cloned());
            const PLACEHOLDER: &str = "{prompt_file}";
            if args.iter().any(|a| a.contains(PLACEHOLDER)) {
                let file = write_prompt_file(attempt_dir, prompt)?
                    .display()
                    .to_string();
                for arg in args.iter_mut() {
                    *arg = arg.replace(PLACEHOLDER, &file);
                }
                spec.stdin = None;
            }
        }
    }
    Ok(spec)
}

/// `--agent-cmd` split into its program (found) and its arguments.
fn custom_words(host: &Host, cfg: &AgentConfig) -> Result<(PathBuf, Vec<String>), AgentError> {
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

/// What [`preflight`] found: the program that will run, and its version.
#[derive(Debug, Clone, PartialEq)]
pub struct Preflight {
    pub program: PathBuf,
    /// The first line `<program> --version` printed; `None` for custom
    /// commands (running them could do anything), and when the program gave
    /// no answer in time or failed.
    pub version: Option<String>,
}

/// How long `<agent> --version` may take (a Node CLI starts in about a
/// second); past it the version is simply not shown.
pub const VERSION_TIMEOUT: Duration = Duration::from_secs(5);

/// Checks, before a run writes anything, that the agent can be started: an
/// explicit agent is installed, a `--agent-cmd` splits into words and its
/// program exists. Asks a known agent for its version (bounded by
/// [`VERSION_TIMEOUT`]; never hangs, never fails the run).
pub fn preflight(cfg: &AgentConfig) -> Result<Preflight, AgentError> {
    preflight_in(&Host::current(), cfg, VERSION_TIMEOUT)
}

pub(crate) fn preflight_in(
    host: &Host,
    cfg: &AgentConfig,
    version_timeout: Duration,
) -> Result<Preflight, AgentError> {
    if cfg.kind == AgentKind::Custom {
        let (program, _) = custom_words(host, cfg)?;
        return Ok(Preflight {
            program,
            version: None,
        });
    }
    let program = resolve(host, cfg.kind)?;
    // The header names the agent already: "GitHub Copilot CLI 1.0.102."
    // becomes "1.0.102".
    let name = display_name(cfg.kind);
    let version = crate::agent::version::ask(&program, &host.cwd, version_timeout).map(|v| match v
        .strip_prefix(name)
    {
        Some(rest) if rest.starts_with(' ') => rest.trim().trim_end_matches('.').to_string(),
        _ => v,
    });
    Ok(Preflight { program, version })
}

fn resolve_custom(host: &Host, program: &str) -> Result<PathBuf, AgentError> {
    let missing = || AgentError::CustomProgramMissing {
        program: program.to_string(),
    };
    if program.contains('/') {
        let path = host.cwd.join(program);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(missing())
        };
    }
    host.find(program).ok_or_else(missing)
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    struct Fixture {
        _bin: tempfile::TempDir,
        session: tempfile::TempDir,
        host: Host,
    }

    /// A PATH holding executables named after `names`.
    fn fixture(names: &[&str]) -> Fixture {
        let bin = tempfile::tempdir().unwrap();
        for n in names {
            let p = bin.path().join(n);
            std::fs::write(&p, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let host = Host {
            path: Some(bin.path().as_os_str().to_owned()),
            is_root: false,
            is_sandbox: false,
            cwd: bin.path().to_path_buf(),
        };
        Fixture {
            _bin: bin,
            session: tempfile::tempdir().unwrap(),
            host,
        }
    }

    fn cfg(kind: AgentKind) -> AgentConfig {
        AgentConfig {
            kind,
            custom_cmd: None,
            extra_args: vec![],
            model: None,
            max_turns: None,
            max_budget_usd: None,
            time_limit: None,
        }
    }

    fn build(f: &Fixture, cfg: &AgentConfig, prompt: &str) -> CommandSpec {
        build_command_in(
            &f.host,
            cfg,
            prompt,
            Path::new("/work/proj"),
            f.session.path(),
        )
        .unwrap()
    }

    fn args_without_session(spec: &CommandSpec) -> Vec<String> {
        let mut out = Vec::new();
        let mut skip = false;
        for a in &spec.args {
            if skip {
                skip = false;
                continue;
            }
            if a == "--session-id" {
                skip = true;
                continue;
            }
            out.push(a.clone());
        }
        out
    }

    #[test]
    fn claude_command_line() {
        let f = fixture(&["claude"]);
        let mut c = cfg(AgentKind::Claude);
        c.model = Some("opus".into());
        c.max_turns = Some(30);
        c.max_budget_usd = Some(2.5);
        c.extra_args = vec!["--append-system-prompt".into(), "be brief".into()];
        let spec = build(&f, &c, "do it");
        assert_eq!(
            spec.program,
            f.host
                .path
                .as_ref()
                .map(PathBuf::from)
                .unwrap()
                .join("claude")
        );
        assert_eq!(
            args_without_session(&spec),
            [
                "-p",
                "--output-format",
                "stream-json",
                "--verbose",
                "--dangerously-skip-permissions",
                "--model",
                "opus",
                "--max-turns",
                "30",
                "--max-budget-usd",
                "2.5",
                "--append-system-prompt",
                "be brief"
            ]
        );
        let id = spec.session_id.clone().unwrap();
        assert!(uuid::Uuid::parse_str(&id).is_ok());
        assert!(
            spec.args
                .windows(2)
                .any(|w| w[0] == "--session-id" && w[1] == id)
        );
        assert_eq!(spec.stdin.as_deref(), Some("do it"));
        assert_eq!(spec.cwd, Path::new("/work/proj"));
        assert_eq!(spec.prompt, "do it");
    }

    #[test]
    fn claude_as_root_uses_accept_edits_unless_sandboxed() {
        let mut f = fixture(&["claude"]);
        f.host.is_root = true;
        let spec = build(&f, &cfg(AgentKind::Claude), "p");
        assert!(
            spec.args
                .windows(2)
                .any(|w| w == ["--permission-mode", "acceptEdits"])
        );
        assert!(
            !spec
                .args
                .iter()
                .any(|a| a == "--dangerously-skip-permissions")
        );
        f.host.is_sandbox = true;
        let spec = build(&f, &cfg(AgentKind::Claude), "p");
        assert!(
            spec.args
                .iter()
                .any(|a| a == "--dangerously-skip-permissions")
        );
    }

    #[test]
    fn users_own_permission_and_session_flags_win() {
        let f = fixture(&["claude"]);
        let mut c = cfg(AgentKind::Claude);
        c.extra_args = vec![
            "--permission-mode=plan".into(),
            "--resume".into(),
            "abc".into(),
        ];
        let spec = build(&f, &c, "p");
        assert_eq!(
            spec.args,
            [
                "-p",
                "--output-format",
                "stream-json",
                "--verbose",
                "--permission-mode=plan",
                "--resume",
                "abc"
            ]
        );
        assert_eq!(spec.session_id, None);
    }

    #[test]
    fn codex_command_line() {
        let f = fixture(&["codex"]);
        let mut c = cfg(AgentKind::Codex);
        c.model = Some("gpt-5".into());
        c.extra_args = vec!["-c".into(), "x=1".into()];
        let spec = build(&f, &c, "prompt");
        assert_eq!(
            spec.args,
            [
                "exec",
                "--json",
                "--model",
                "gpt-5",
                "--sandbox",
                "workspace-write",
                "--skip-git-repo-check",
                "-c",
                "x=1",
                "-"
            ]
        );
        assert_eq!(spec.stdin.as_deref(), Some("prompt"));
    }

    #[test]
    fn gemini_amp_command_lines() {
        let f = fixture(&["gemini", "amp"]);
        let spec = build(&f, &cfg(AgentKind::Gemini), "p");
        // Trusted: gemini 0.61 otherwise ignores --yolo and exits 55.
        assert_eq!(
            spec.args,
            ["--output-format", "stream-json", "--yolo", "--skip-trust"]
        );
        assert_eq!(
            spec.env,
            [("GEMINI_CLI_TRUST_WORKSPACE".to_string(), "true".to_string())]
        );
        assert_eq!(spec.stdin.as_deref(), Some("p"));
        let mut own = cfg(AgentKind::Gemini);
        own.extra_args = vec!["--skip-trust".into()];
        let spec = build(&f, &own, "p");
        assert_eq!(spec.args.iter().filter(|a| *a == "--skip-trust").count(), 1);
        let spec = build(&f, &cfg(AgentKind::Amp), "p");
        assert_eq!(spec.args, ["--dangerously-allow-all", "-x"]);
        assert_eq!(spec.stdin.as_deref(), Some("p"));
    }

    #[test]
    fn opencode_and_cursor_take_the_prompt_as_an_argument() {
        let f = fixture(&["opencode", "agent"]);
        let mut c = cfg(AgentKind::Opencode);
        c.model = Some("anthropic/claude".into());
        let spec = build(&f, &c, "fix it");
        assert_eq!(
            spec.args,
            [
                "run",
                "--format",
                "json",
                "--model",
                "anthropic/claude",
                "--",
                "fix it"
            ]
        );
        assert_eq!(spec.stdin, None);
        // Cursor found under its other name.
        let spec = build(&f, &cfg(AgentKind::Cursor), "fix it");
        assert!(spec.program.ends_with("agent"));
        assert_eq!(
            spec.args,
            [
                "--print",
                "--output-format",
                "stream-json",
                "--force",
                "--",
                "fix it"
            ]
        );
        assert_eq!(spec.stdin, None);
    }

    #[test]
    fn a_prompt_starting_with_a_dash_is_never_an_option() {
        let f = fixture(&["opencode", "cursor-agent"]);
        let prompt = "---\ntitle: front matter\n---\n- do this";
        for kind in [AgentKind::Opencode, AgentKind::Cursor] {
            let mut c = cfg(kind);
            c.extra_args = vec!["--agent-flag".into()];
            let spec = build(&f, &c, prompt);
            let n = spec.args.len();
            assert_eq!(spec.args[n - 2..], ["--", prompt], "{kind:?}");
            assert_eq!(spec.args[n - 3], "--agent-flag");
        }
    }

    #[test]
    fn huge_prompts_go_whole_to_opencodes_stdin_and_to_a_file_for_cursor() {
        let f = fixture(&["opencode", "cursor-agent"]);
        let prompt = format!("- {}", "x".repeat(MAX_PROMPT_ARG_BYTES + 1));
        let spec = build(&f, &cfg(AgentKind::Opencode), &prompt);
        // No --file (opencode's Read tool would cut it at 50 KB), no message
        // argument: `opencode run` takes piped stdin as the whole message.
        assert_eq!(spec.args, ["run", "--format", "json"]);
        assert_eq!(spec.stdin.as_deref(), Some(prompt.as_str()));
        assert_eq!(spec.prompt, prompt);

        let spec = build(&f, &cfg(AgentKind::Cursor), &prompt);
        let n = spec.args.len();
        assert_eq!(spec.args[n - 2], "--");
        let file = spec.args[n - 1]
            .strip_prefix("Read the file ")
            .and_then(|r| r.split(':').next())
            .map(PathBuf::from)
            .unwrap();
        assert!(file.starts_with(f.session.path()));
        assert_eq!(std::fs::read_to_string(&file).unwrap(), prompt);
        assert!(spec.args.iter().all(|a| a.len() < 1000));
    }

    #[test]
    fn custom_command_with_stdin_and_with_prompt_file() {
        let f = fixture(&["my-agent"]);
        let mut c = cfg(AgentKind::Custom);
        c.custom_cmd = Some("my-agent --fast 'two words'".into());
        c.extra_args = vec!["--x".into()];
        let spec = build(&f, &c, "the prompt");
        assert!(spec.program.ends_with("my-agent"));
        assert_eq!(spec.args, ["--fast", "two words", "--x"]);
        assert_eq!(spec.stdin.as_deref(), Some("the prompt"));

        c.custom_cmd = Some("my-agent --prompt={prompt_file} --again {prompt_file}".into());
        let spec = build(&f, &c, "the prompt");
        assert_eq!(spec.stdin, None);
        let file = spec.args[0].strip_prefix("--prompt=").unwrap().to_string();
        assert_eq!(spec.args[2], file);
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "the prompt");
    }

    #[test]
    fn custom_command_errors() {
        let f = fixture(&[]);
        let mut c = cfg(AgentKind::Custom);
        let err = |c: &AgentConfig| {
            build_command_in(&f.host, c, "p", Path::new("/"), f.session.path()).unwrap_err()
        };
        assert!(matches!(err(&c), AgentError::CustomCmdMissing));
        c.custom_cmd = Some("  ".into());
        assert!(matches!(err(&c), AgentError::CustomCmdEmpty));
        c.custom_cmd = Some("agent 'oops".into());
        assert!(matches!(err(&c), AgentError::CustomCmdSyntax { .. }));
        c.custom_cmd = Some("no-such-agent-xyz".into());
        assert!(matches!(err(&c), AgentError::CustomProgramMissing { .. }));
        c.custom_cmd = Some("./missing.sh".into());
        assert!(matches!(err(&c), AgentError::CustomProgramMissing { .. }));
    }

    #[test]
    fn missing_binary_names_the_install_command() {
        let f = fixture(&[]);
        let e = build_command_in(
            &f.host,
            &cfg(AgentKind::Codex),
            "p",
            Path::new("/"),
            f.session.path(),
        )
        .unwrap_err();
        assert!(
            matches!(e, AgentError::NotInstalled { install, .. } if install.contains("@openai/codex"))
        );
    }

    #[test]
    fn detection_takes_the_first_installed_in_order() {
        let f = fixture(&["amp", "gemini", "agent"]);
        assert_eq!(
            detect_in(&f.host).unwrap(),
            (AgentKind::Gemini, "Gemini CLI")
        );
        let f = fixture(&["cursor-agent", "claude"]);
        assert_eq!(
            detect_in(&f.host).unwrap(),
            (AgentKind::Claude, "Claude Code")
        );
        assert_eq!(label(AgentKind::Claude), "Claude Code (claude)");
        // `agent` alone is too generic a name to claim.
        let f = fixture(&["agent"]);
        let err = detect_in(&f.host).unwrap_err();
        let AgentError::NoneInstalled {
            looked_for,
            install,
        } = &err
        else {
            panic!("{err:?}")
        };
        assert_eq!(
            looked_for,
            "claude, codex, gemini, opencode, copilot, qwen, pi, amp, cursor-agent"
        );
        for k in DETECTION_ORDER {
            assert!(install.contains(install_hint(k)));
        }
    }

    #[test]
    fn preflight_finds_the_program_or_says_why_not() {
        let f = fixture(&["my-agent"]);
        let pre = |c: &AgentConfig| preflight_in(&f.host, c, Duration::from_secs(30));
        // Custom commands are checked but never run for a version.
        let mut c = cfg(AgentKind::Custom);
        c.custom_cmd = Some("my-agent --fast".into());
        let p = pre(&c).unwrap();
        assert!(p.program.ends_with("my-agent"));
        assert_eq!(p.version, None);
        for (bad, want) in [
            ("", "empty"),
            ("my-agent 'oops", "cannot read"),
            ("nope-xyz", "not found"),
        ] {
            c.custom_cmd = Some(bad.into());
            let e = pre(&c).unwrap_err().to_string();
            assert!(e.contains(want), "{bad:?}: {e}");
        }
        let e = pre(&cfg(AgentKind::Opencode)).unwrap_err();
        assert!(matches!(e, AgentError::NotInstalled { .. }), "{e:?}");
    }

    #[test]
    fn preflight_asks_a_known_agent_its_version() {
        let f = fixture(&[]);
        let dir = PathBuf::from(f.host.path.clone().unwrap());
        let p = dir.join("gemini");
        std::fs::write(&p, "#!/bin/sh\necho 0.61.0\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        let got = preflight_in(&f.host, &cfg(AgentKind::Gemini), Duration::from_secs(30)).unwrap();
        assert_eq!(got.program, p);
        assert_eq!(got.version.as_deref(), Some("0.61.0"));
    }

    #[test]
    fn copilot_pi_and_qwen_command_lines() {
        let f = fixture(&["copilot", "pi", "qwen"]);
        let mut c = cfg(AgentKind::Copilot);
        c.model = Some("gpt-5".into());
        c.extra_args = vec!["--no-ask-user".into()];
        let spec = build(&f, &c, "p");
        let usage = f.session.path().join("copilot-usage.json");
        assert_eq!(
            spec.args,
            [
                "--output-format",
                "json",
                "--allow-all",
                "--model",
                "gpt-5",
                "--usage-output-file",
                &usage.display().to_string(),
                "--no-ask-user"
            ]
        );
        assert_eq!(spec.usage_file.as_deref(), Some(usage.as_path()));
        assert!(f.session.path().is_dir(), "the attempt folder is made");

        let spec = build(&f, &cfg(AgentKind::Pi), "p");
        assert_eq!(spec.args, ["-p", "--mode", "json"]);
        assert_eq!(spec.usage_file, None);

        let mut c = cfg(AgentKind::Qwen);
        c.time_limit = Some(Duration::from_secs(1800));
        let spec = build(&f, &c, "p");
        assert_eq!(
            spec.args,
            ["-o", "stream-json", "--yolo", "--max-wall-time", "1800s"]
        );
        let spec = build(&f, &cfg(AgentKind::Qwen), "p");
        assert_eq!(spec.args, ["-o", "stream-json", "--yolo"]);
    }

    #[test]
    fn their_own_permission_usage_and_wall_time_flags_win() {
        let f = fixture(&["copilot", "qwen"]);
        let mut c = cfg(AgentKind::Copilot);
        c.extra_args = vec![
            "--allow-all-tools".into(),
            "--usage-output-file".into(),
            "u.json".into(),
        ];
        let spec = build(&f, &c, "p");
        assert_eq!(
            spec.args,
            [
                "--output-format",
                "json",
                "--allow-all-tools",
                "--usage-output-file",
                "u.json"
            ]
        );
        assert_eq!(
            spec.usage_file.as_deref(),
            Some(Path::new("/work/proj/u.json"))
        );
        let mut c = cfg(AgentKind::Qwen);
        c.time_limit = Some(Duration::from_secs(60));
        c.extra_args = vec![
            "--approval-mode=auto-edit".into(),
            "--max-wall-time=5m".into(),
        ];
        let spec = build(&f, &c, "p");
        assert_eq!(
            spec.args,
            [
                "-o",
                "stream-json",
                "--approval-mode=auto-edit",
                "--max-wall-time=5m"
            ]
        );
    }

    #[test]
    fn copilot_pi_and_qwen_get_every_prompt_on_stdin_whole() {
        let f = fixture(&["copilot", "pi", "qwen"]);
        let huge = format!("- {}", "x".repeat(232 * 1024));
        for kind in [AgentKind::Copilot, AgentKind::Pi, AgentKind::Qwen] {
            for prompt in [
                "-x starts with a dash",
                "@notes.md starts with an at",
                &huge,
            ] {
                let spec = build(&f, &cfg(kind), prompt);
                assert_eq!(spec.stdin.as_deref(), Some(prompt), "{kind:?}");
                assert!(
                    spec.args.iter().all(|a| !a.contains(prompt)),
                    "{kind:?}: never an argument: {:?}",
                    spec.args
                );
            }
        }
    }

    #[test]
    fn install_hints_name_the_npm_packages() {
        assert_eq!(
            install_hint(AgentKind::Copilot),
            "npm install -g @github/copilot"
        );
        assert_eq!(
            install_hint(AgentKind::Pi),
            "npm install -g @mariozechner/pi-coding-agent"
        );
        assert_eq!(
            install_hint(AgentKind::Qwen),
            "npm install -g @qwen-code/qwen-code"
        );
        // `@sourcegraph/amp` only points to this one now.
        assert_eq!(install_hint(AgentKind::Amp), "npm install -g @ampcode/cli");
        assert_eq!(label(AgentKind::Copilot), "GitHub Copilot CLI (copilot)");
        assert_eq!(label(AgentKind::Qwen), "Qwen Code (qwen)");
        assert_eq!(label(AgentKind::Pi), "pi (pi)");
    }

    #[test]
    fn state_dirs_follow_each_agents_variables() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                vars.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| OsString::from(v))
            }
        };
        let home = env(&[("HOME", "/h")]);
        let dirs = |kind, e: &dyn Fn(&str) -> Option<OsString>| state_dirs(kind, e);
        assert_eq!(
            dirs(AgentKind::Copilot, &home),
            [
                PathBuf::from("/h/.copilot"),
                PathBuf::from("/h/.cache/copilot"),
                PathBuf::from("/h/.cache/Microsoft/DeveloperTools")
            ]
        );
        assert_eq!(dirs(AgentKind::Pi, &home), [PathBuf::from("/h/.pi/agent")]);
        assert_eq!(dirs(AgentKind::Qwen, &home), [PathBuf::from("/h/.qwen")]);
        let own = env(&[
            ("HOME", "/h"),
            ("COPILOT_HOME", "/c"),
            ("XDG_CACHE_HOME", "/x"),
            ("PI_CODING_AGENT_DIR", "/p"),
        ]);
        assert_eq!(
            dirs(AgentKind::Copilot, &own),
            [
                PathBuf::from("/c"),
                PathBuf::from("/x/copilot"),
                PathBuf::from("/x/Microsoft/DeveloperTools")
            ]
        );
        assert_eq!(dirs(AgentKind::Pi, &own), [PathBuf::from("/p")]);
        let nothing = env(&[]);
        assert!(dirs(AgentKind::Qwen, &nothing).is_empty());
        assert!(dirs(AgentKind::Claude, &home).is_empty());
    }

    #[test]
    fn only_pi_coding_agents_pi_is_detected() {
        let f = fixture(&["pi"]);
        // Some other `pi` (a script that prints digits): not claimed.
        assert!(matches!(
            detect_in(&f.host),
            Err(AgentError::NoneInstalled { .. })
        ));
        // npm's link into the package is.
        let pkg = f
            .session
            .path()
            .join("node_modules/@mariozechner/pi-coding-agent/dist");
        std::fs::create_dir_all(&pkg).unwrap();
        std::fs::write(pkg.join("cli.js"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(pkg.join("cli.js"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        let bin = PathBuf::from(f.host.path.clone().unwrap()).join("pi");
        std::fs::remove_file(&bin).unwrap();
        std::os::unix::fs::symlink(pkg.join("cli.js"), &bin).unwrap();
        assert_eq!(detect_in(&f.host).unwrap(), (AgentKind::Pi, "pi"));
        // Named explicitly, any `pi` runs.
        let f = fixture(&["pi"]);
        assert!(
            build_command_in(
                &f.host,
                &cfg(AgentKind::Pi),
                "p",
                Path::new("/"),
                f.session.path()
            )
            .is_ok()
        );
    }

    #[test]
    fn versions_are_read_where_each_cli_prints_them() {
        let f = fixture(&[]);
        let dir = PathBuf::from(f.host.path.clone().unwrap());
        // pi prints its version on stderr only; copilot adds an update hint.
        for (name, body) in [
            ("pi", "echo 0.73.1 >&2"),
            (
                "copilot",
                "printf 'GitHub Copilot CLI 1.0.102.\\nRun copilot update to check for updates.\\n'",
            ),
        ] {
            let p = dir.join(name);
            std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let pre = |kind| preflight_in(&f.host, &cfg(kind), Duration::from_secs(30)).unwrap();
        assert_eq!(pre(AgentKind::Pi).version.as_deref(), Some("0.73.1"));
        // Its name is in the header already: not said twice.
        assert_eq!(pre(AgentKind::Copilot).version.as_deref(), Some("1.0.102"));
    }

    #[test]
    fn command_line_for_logs() {
        let spec = CommandSpec {
            program: PathBuf::from("/bin/claude"),
            args: vec!["-p".into(), "two words".into(), "it's".into()],
            env: vec![],
            cwd: PathBuf::from("/"),
            stdin: None,
            prompt: String::new(),
            session_id: None,
            usage_file: None,
        };
        assert_eq!(spec.command_line(), r"/bin/claude -p 'two words' 'it'\''s'");
    }
}
