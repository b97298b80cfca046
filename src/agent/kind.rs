//! The agent CLIs we know: their names, binaries, install commands and state
//! folders. Below the providers (command lines, detection) and the parsers,
//! which all name an agent by its kind.

use std::ffi::OsString;
use std::path::PathBuf;

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
    /// Any agent speaking the Agent Client Protocol, its command line in
    /// `--agent-cmd`.
    Acp,
    /// Claude Code through Zed's ACP adapter (`claude-code-acp`).
    #[value(name = "claude-acp")]
    #[serde(rename = "claude-acp")]
    ClaudeAcp,
    /// Codex through Zed's ACP adapter (`codex-acp`).
    #[value(name = "codex-acp")]
    #[serde(rename = "codex-acp")]
    CodexAcp,
    /// `gemini --acp`.
    #[value(name = "gemini-acp")]
    #[serde(rename = "gemini-acp")]
    GeminiAcp,
    /// `qwen --acp`.
    #[value(name = "qwen-acp")]
    #[serde(rename = "qwen-acp")]
    QwenAcp,
    /// `opencode acp`.
    #[value(name = "opencode-acp")]
    #[serde(rename = "opencode-acp")]
    OpencodeAcp,
}

impl AgentKind {
    /// Whether spectr drives it through the Agent Client Protocol.
    pub fn is_acp(self) -> bool {
        matches!(
            self,
            AgentKind::Acp
                | AgentKind::ClaudeAcp
                | AgentKind::CodexAcp
                | AgentKind::GeminiAcp
                | AgentKind::QwenAcp
                | AgentKind::OpencodeAcp
        )
    }

    /// Whether its command line is the user's (`--agent-cmd`), not ours.
    pub fn takes_agent_cmd(self) -> bool {
        matches!(self, AgentKind::Custom | AgentKind::Acp)
    }

    /// The CLI an ACP preset drives (its state folders and settings are
    /// that CLI's).
    pub fn base(self) -> AgentKind {
        match self {
            AgentKind::ClaudeAcp => AgentKind::Claude,
            AgentKind::CodexAcp => AgentKind::Codex,
            AgentKind::GeminiAcp => AgentKind::Gemini,
            AgentKind::QwenAcp => AgentKind::Qwen,
            AgentKind::OpencodeAcp => AgentKind::Opencode,
            other => other,
        }
    }
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
        AgentKind::Acp => "ACP agent",
        AgentKind::ClaudeAcp => "Claude Code over ACP",
        AgentKind::CodexAcp => "Codex over ACP",
        AgentKind::GeminiAcp => "Gemini CLI over ACP",
        AgentKind::QwenAcp => "Qwen Code over ACP",
        AgentKind::OpencodeAcp => "OpenCode over ACP",
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
        AgentKind::Custom | AgentKind::Acp => "--agent-cmd",
        AgentKind::ClaudeAcp => "claude-code-acp",
        AgentKind::CodexAcp => "codex-acp",
        AgentKind::GeminiAcp => "gemini",
        AgentKind::QwenAcp => "qwen",
        AgentKind::OpencodeAcp => "opencode",
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
        AgentKind::Qwen | AgentKind::QwenAcp => "npm install -g @qwen-code/qwen-code",
        AgentKind::Custom => "--agent-cmd '<command line>'",
        AgentKind::Acp => "--agent-cmd '<an ACP agent's command line>'",
        AgentKind::ClaudeAcp => "npm install -g @zed-industries/claude-code-acp",
        AgentKind::CodexAcp => "npm install -g @zed-industries/codex-acp",
        AgentKind::GeminiAcp => "npm install -g @google/gemini-cli",
        AgentKind::OpencodeAcp => "npm install -g opencode-ai",
    }
}

/// The folders an agent writes its own state to wherever it runs (login,
/// settings, sessions, caches): what a sandbox must leave writable for that
/// agent, and only for it. `env` reads the agent's environment. Measured
/// for copilot, pi and qwen; from each CLI's documentation for the others:
///
/// - claude: `$CLAUDE_CONFIG_DIR` (default `~/.claude`) and `~/.claude.json`
///   (a file; written in place);
/// - codex: `$CODEX_HOME` (default `~/.codex`);
/// - gemini: `~/.gemini`;
/// - opencode: `$XDG_DATA_HOME/opencode`, `$XDG_CONFIG_HOME/opencode`,
///   `$XDG_CACHE_HOME/opencode` (defaults under `~/.local/share`,
///   `~/.config`, `~/.cache`);
/// - amp: `$XDG_CONFIG_HOME/amp`, `$XDG_DATA_HOME/amp`, `$XDG_CACHE_HOME/amp`;
/// - cursor: `~/.cursor` and `$XDG_CONFIG_HOME/cursor`;
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
    let xdg = |var: &str, default: &str, name: &str| {
        set(var).or_else(|| in_home(default)).map(|d| d.join(name))
    };
    let dirs = match kind.base() {
        AgentKind::Claude => vec![
            set("CLAUDE_CONFIG_DIR").or_else(|| in_home(".claude")),
            in_home(".claude.json"),
        ],
        AgentKind::Codex => vec![set("CODEX_HOME").or_else(|| in_home(".codex"))],
        AgentKind::Gemini => vec![in_home(".gemini")],
        AgentKind::Opencode => vec![
            xdg("XDG_DATA_HOME", ".local/share", "opencode"),
            xdg("XDG_CONFIG_HOME", ".config", "opencode"),
            xdg("XDG_CACHE_HOME", ".cache", "opencode"),
        ],
        AgentKind::Amp => vec![
            xdg("XDG_CONFIG_HOME", ".config", "amp"),
            xdg("XDG_DATA_HOME", ".local/share", "amp"),
            xdg("XDG_CACHE_HOME", ".cache", "amp"),
        ],
        AgentKind::Cursor => vec![
            in_home(".cursor"),
            xdg("XDG_CONFIG_HOME", ".config", "cursor"),
        ],
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

/// Files and folders an agent reads that its environment variables name,
/// besides its state folders ([`state_dirs`]): a provider's config, system
/// settings, certificates. A sandbox shows them read-only wherever they are
/// (its private `/tmp` would hide one under `/tmp`). From each CLI's
/// documentation and the installed packages (codex 0.171.0, opencode-ai
/// 1.18.33, qwen-code 0.24.4):
///
/// - every agent: `NODE_EXTRA_CA_CERTS`, `SSL_CERT_FILE` (a proxy's CA);
/// - codex: `CODEX_CA_CERTIFICATE`;
/// - gemini: `GEMINI_CLI_SYSTEM_SETTINGS_PATH`,
///   `GEMINI_CLI_SYSTEM_DEFAULTS_PATH`, `GEMINI_SYSTEM_MD`,
///   `GOOGLE_APPLICATION_CREDENTIALS`;
/// - opencode: `OPENCODE_CONFIG` (its providers), `OPENCODE_CONFIG_DIR`,
///   `OPENCODE_MODELS_PATH`;
/// - amp: `AMP_SETTINGS_FILE`;
/// - qwen: `QWEN_CODE_SYSTEM_SETTINGS_PATH`, `QWEN_CODE_SYSTEM_DEFAULTS_PATH`,
///   `QWEN_SYSTEM_MD`.
///
/// Only absolute paths count: `GEMINI_SYSTEM_MD=true` names no file, and a
/// relative path is the work tree's, which the sandbox shows anyway.
pub fn config_paths(kind: AgentKind, env: &dyn Fn(&str) -> Option<OsString>) -> Vec<PathBuf> {
    let own: &[&str] = match kind.base() {
        AgentKind::Codex => &["CODEX_CA_CERTIFICATE"],
        AgentKind::Gemini => &[
            "GEMINI_CLI_SYSTEM_SETTINGS_PATH",
            "GEMINI_CLI_SYSTEM_DEFAULTS_PATH",
            "GEMINI_SYSTEM_MD",
            "GOOGLE_APPLICATION_CREDENTIALS",
        ],
        AgentKind::Opencode => &[
            "OPENCODE_CONFIG",
            "OPENCODE_CONFIG_DIR",
            "OPENCODE_MODELS_PATH",
        ],
        AgentKind::Amp => &["AMP_SETTINGS_FILE"],
        AgentKind::Qwen => &[
            "QWEN_CODE_SYSTEM_SETTINGS_PATH",
            "QWEN_CODE_SYSTEM_DEFAULTS_PATH",
            "QWEN_SYSTEM_MD",
        ],
        _ => &[],
    };
    ["NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE"]
        .iter()
        .chain(own)
        .filter_map(|name| env(name))
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_paths_are_the_absolute_ones_the_agents_variables_name() {
        let env = |name: &str| -> Option<OsString> {
            match name {
                "OPENCODE_CONFIG" => Some("/tmp/u/opencode.json".into()),
                "OPENCODE_CONFIG_DIR" => Some("/tmp/u/opencode".into()),
                "GEMINI_SYSTEM_MD" => Some("true".into()),
                "GOOGLE_APPLICATION_CREDENTIALS" => Some("/tmp/u/key.json".into()),
                "NODE_EXTRA_CA_CERTS" => Some("/tmp/u/ca.pem".into()),
                _ => None,
            }
        };
        let paths = |kind| config_paths(kind, &env);
        assert_eq!(
            paths(AgentKind::Opencode),
            [
                PathBuf::from("/tmp/u/ca.pem"),
                PathBuf::from("/tmp/u/opencode.json"),
                PathBuf::from("/tmp/u/opencode"),
            ]
        );
        // `true` is no file.
        assert_eq!(
            paths(AgentKind::Gemini),
            [
                PathBuf::from("/tmp/u/ca.pem"),
                PathBuf::from("/tmp/u/key.json")
            ]
        );
        // Another agent's variables are not its.
        assert_eq!(paths(AgentKind::Claude), [PathBuf::from("/tmp/u/ca.pem")]);
    }
}
