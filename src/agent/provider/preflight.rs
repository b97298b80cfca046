//! The check before a run: the agent's program is there, and its version.

use super::AgentConfig;
use super::command::custom_words;
use super::host::{Host, resolve};
use crate::agent::AgentError;
use crate::agent::kind::{display_name, install_hint};
use crate::agent::version::{Answer, answer};
use crate::process::Cmd;
use std::path::{Path, PathBuf};
use std::time::Duration;

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
/// [`VERSION_TIMEOUT`]; never hangs). `confine`, with `--sandbox`, runs the
/// program inside the sandbox: the version is asked there, and an agent
/// that fails there but answers outside is refused (the sandbox breaks it:
/// every attempt would fail). Otherwise an agent that gives no version does
/// not fail the run.
pub fn preflight(
    cfg: &AgentConfig,
    confine: Option<&dyn Fn(&Path) -> Cmd>,
) -> Result<Preflight, AgentError> {
    preflight_in(&Host::current(), cfg, VERSION_TIMEOUT, confine)
}

pub(crate) fn preflight_in(
    host: &Host,
    cfg: &AgentConfig,
    version_timeout: Duration,
    confine: Option<&dyn Fn(&Path) -> Cmd>,
) -> Result<Preflight, AgentError> {
    if cfg.kind.takes_agent_cmd() {
        let (program, _) = custom_words(host, cfg)?;
        return Ok(Preflight {
            program,
            version: None,
        });
    }
    let program = resolve(host, cfg.kind)?;
    let outside = || answer(Cmd::new(&program).work_in(&host.cwd), version_timeout);
    let answered = match confine {
        None => outside(),
        Some(confine) => match answer(confine(&program), version_timeout) {
            Answer::Failed(detail) => match outside() {
                Answer::Version(_) => {
                    return Err(AgentError::BrokenInSandbox {
                        name: display_name(cfg.kind),
                        program: program.display().to_string(),
                        detail,
                        install: install_hint(cfg.kind),
                    });
                }
                // Broken outside too: not the sandbox's doing.
                other => other,
            },
            inside => inside,
        },
    };
    // The header names the agent already: "GitHub Copilot CLI 1.0.102."
    // becomes "1.0.102".
    let name = display_name(cfg.kind);
    let version = answered.version().map(|v| match v.strip_prefix(name) {
        Some(rest) if rest.starts_with(' ') => rest.trim().trim_end_matches('.').to_string(),
        _ => v,
    });
    Ok(Preflight { program, version })
}
