//! Finding an agent's program on this machine: PATH, root or not, detection
//! in order of preference.

use crate::agent::AgentError;
use crate::agent::kind::{AgentKind, DETECTION_ORDER, binary, display_name, install_hint};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The first supported agent installed, in [`DETECTION_ORDER`].
pub fn detect() -> Result<(AgentKind, &'static str), AgentError> {
    detect_in(&Host::current())
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
    let width = DETECTION_ORDER
        .iter()
        .map(|k| display_name(*k).chars().count())
        .max()
        .unwrap_or(0);
    let install = DETECTION_ORDER
        .iter()
        .map(|k| format!("  {:<width$} {}", display_name(*k), install_hint(*k)))
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

pub(super) fn resolve(host: &Host, kind: AgentKind) -> Result<PathBuf, AgentError> {
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

pub(super) fn resolve_custom(host: &Host, program: &str) -> Result<PathBuf, AgentError> {
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
