//! `--sandbox`: every agent, `--verify` command and lane setup command runs
//! inside bubblewrap, able to write its task's work tree and little else.
//!
//! One [`SandboxProfile`] is built per run (bubblewrap found and tried once,
//! the writable folders settled) and every call site asks it for the
//! command line of one process in one work tree ([`SandboxProfile::command`],
//! [`SandboxProfile::wrap`]). The rules, in mount order (a later mount wins
//! below its path):
//! - everything read-only (`/` bound read-only), a fresh `/dev` and `/proc`,
//!   a private `/tmp`, holding an empty `TMPDIR` of its own when `TMPDIR`
//!   is below `/tmp` (pam_tmpdir's `/tmp/user/<uid>`);
//! - read-only from the real `/tmp`, which the private one hides: what the
//!   run needs from there ([`SandboxProfile::readable`], [`package_of`]):
//!   the agent's installation (its program's folder, the `node_modules`
//!   folders Node looks in, its package), spectr's own binary (the prompt
//!   tells the agent to run it), the files the agent's variables name
//!   (`OPENCODE_CONFIG`…); nothing else of the real `/tmp`, and none of it
//!   writable;
//! - writable: each agent's own state folders (the provider names them),
//!   `ralph: sandbox_writable`, and the work tree;
//! - in the user's tree, `.git` and `.git/refs` are mount points of their
//!   own (writable): a mount point cannot be renamed, so neither can be
//!   swapped for one of the agent's;
//! - read-only again: the repository's `config`, `hooks/`, `info/`,
//!   `modules/`, `worktrees/` (other work trees' git folders), spectr's refs
//!   (`refs/spectr`), spectr's own files in the git folder (markers, locks)
//!   and in the change folder (session, `.ralph/` but the attempt's own
//!   folder, each folder holding them a mount point of its own), and a
//!   `.git` file;
//! - in a lane (a linked work tree) the common git folder stays read-only
//!   but for `objects/`; the lane's own git folder (HEAD, index, logs) is
//!   writable, bound after `worktrees/` which holds it, but for `commondir`,
//!   `gitdir` and `config.worktree`: an agent's commits still work.
//!
//! What stays writable in the user's git folder: a new `commondir` (removed
//! by the run as soon as it is seen, see [`sweep`]) and `packed-refs`.
//!
//! The network is shared unless `ralph: sandbox_network: false`.

use crate::agent::CommandSpec;
use crate::process::Cmd;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long trying bubblewrap may take before the run gives up on it.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// Folders of a git folder that hold code or config git runs or reads
/// (hooks, attributes and excludes, submodules' git folders, linked work
/// trees' folders): read-only.
const GIT_CODE_FOLDERS: &[&str] = &["hooks", "info", "modules", "worktrees"];

/// Where spectr keeps its refs (checkpoints), in the common git folder.
const SPECTR_REFS: &str = "refs/spectr";

/// Names spectr keeps in a git folder (lane marker, lock owners, the revert
/// marker, the tree lock): never the agent's to write.
const SPECTR_GIT_FILES: &[&str] = &[
    "spectr-lane",
    "spectr-ralph.lock",
    "spectr-ralph-index.lock.owner",
    "spectr-ralph-stash.lock.owner",
    "spectr-ralph-revert",
];

/// Why `--sandbox` cannot run here (exit 2 before anything starts).
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum SandboxError {
    #[error("--sandbox needs bubblewrap (bwrap), which is not installed")]
    #[diagnostic(help(
        "install the `bubblewrap` package (apt-get install bubblewrap, dnf install bubblewrap, pacman -S bubblewrap), or run without --sandbox (`ralph: sandbox: false`)"
    ))]
    Missing,

    #[error("--sandbox: bubblewrap ({bwrap}) cannot start a sandbox here: {detail}")]
    #[diagnostic(help(
        "unprivileged user namespaces are probably turned off: check `sysctl kernel.unprivileged_userns_clone` (must be 1) and `sysctl user.max_user_namespaces` (must be above 0); on Ubuntu 24.04 and later AppArmor restricts them (`sysctl kernel.apparmor_restrict_unprivileged_userns`, set it to 0 or give bwrap an AppArmor profile); inside a container, allow user namespaces or run without --sandbox"
    ))]
    Refused { bwrap: String, detail: String },

    #[error("--sandbox runs on Linux only (bubblewrap); this is {os}")]
    #[diagnostic(help(
        "run without --sandbox (`ralph: sandbox: false`); a macOS sandbox-exec profile is not available yet"
    ))]
    Unsupported { os: &'static str },
}

/// What the run's settings say about the sandbox.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SandboxSettings {
    pub enabled: bool,
    /// `ralph: sandbox_writable`: more writable paths (`~` expanded).
    pub writable: Vec<PathBuf>,
    /// `ralph: sandbox_network` (default true).
    pub network: bool,
}

/// The run's sandbox: bubblewrap as found, and the rules every sandboxed
/// process of the run follows (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct SandboxProfile {
    pub bwrap: PathBuf,
    /// `0.8.0`.
    pub version: String,
    pub network: bool,
    /// Writable for every process of the run, besides its work tree: the
    /// agent's state folders and `sandbox_writable`.
    pub writable: Vec<PathBuf>,
    /// spectr's own paths, relative to the user's tree (the change's state
    /// folder and session file): read-only in every work tree.
    pub own: Vec<PathBuf>,
    /// Read-only for every process of the run where the private `/tmp`
    /// would hide them: spectr's own binary and the files the agent's
    /// variables name. Those outside `/tmp` are visible anyway.
    pub readable: Vec<PathBuf>,
    /// `TMPDIR` when it is below `/tmp`: made, empty and writable, in the
    /// private `/tmp` (a missing one fails codex's own sandbox), never the
    /// real one (it may hold the user's projects).
    pub tmpdir: Option<PathBuf>,
    /// Hidden behind `/dev/null` when they exist as a process starts: the
    /// run's control socket, which nothing the run starts may reach (a
    /// read-only mount does not keep a socket from being connected to).
    pub masked: Vec<PathBuf>,
}

/// The summary the plan and `--json` carry.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SandboxSummary {
    pub tool: String,
    pub version: String,
    pub network: bool,
    /// Writable besides each task's work tree and a private /tmp.
    pub writable: Vec<String>,
}

impl SandboxProfile {
    /// Finds bubblewrap on PATH and tries it once (a sandbox that runs
    /// `true`): the run refuses to start when it cannot.
    pub fn probe(
        settings: &SandboxSettings,
        agent_dirs: Vec<PathBuf>,
        own: Vec<PathBuf>,
    ) -> Result<SandboxProfile, SandboxError> {
        if !cfg!(target_os = "linux") {
            return Err(SandboxError::Unsupported {
                os: std::env::consts::OS,
            });
        }
        let bwrap = which::which("bwrap").map_err(|_| SandboxError::Missing)?;
        let refused = |detail: String| SandboxError::Refused {
            bwrap: bwrap.display().to_string(),
            detail,
        };
        let out = Cmd::new(&bwrap)
            .arg("--version")
            .output(PROBE_TIMEOUT)
            .map_err(|e| refused(e.to_string()))?;
        let version = String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .last()
            .unwrap_or("unknown")
            .to_owned();
        let mut trial = Cmd::new(&bwrap).args(["--ro-bind", "/", "/", "--dev", "/dev"]);
        if !settings.network {
            trial = trial.arg("--unshare-net");
        }
        let out = trial
            .args(["--", "true"])
            .output(PROBE_TIMEOUT)
            .map_err(|e| refused(e.to_string()))?;
        if !out.success() {
            let stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
            return Err(refused(if stderr.is_empty() {
                "it failed without saying why".to_owned()
            } else {
                stderr
            }));
        }
        let mut writable = agent_dirs;
        writable.extend(settings.writable.iter().cloned());
        writable.dedup();
        Ok(SandboxProfile {
            bwrap,
            version,
            network: settings.network,
            writable,
            own,
            readable: Vec::new(),
            tmpdir: None,
            masked: Vec::new(),
        })
    }

    /// Before the run: creates the agent's state folders that do not exist
    /// yet (an agent's first run makes them, and its home is read-only in
    /// the sandbox).
    pub fn prepare(&self) {
        for dir in &self.writable {
            if dir.extension().is_none() && !dir.exists() {
                let _ = std::fs::create_dir_all(dir);
            }
        }
    }

    pub fn summary(&self) -> SandboxSummary {
        SandboxSummary {
            tool: "bubblewrap".into(),
            version: self.version.clone(),
            network: self.network,
            writable: self
                .writable
                .iter()
                .map(|p| p.display().to_string())
                .collect(),
        }
    }

    /// `sandbox: on (bubblewrap 0.8.0) · writable: ...`: the plan's line.
    pub fn line(&self) -> String {
        let mut line = format!(
            "Sandbox: on (bubblewrap {}) · writable: the task's work tree, a private /tmp",
            self.version
        );
        for p in &self.writable {
            line.push_str(&format!(", {}", p.display()));
        }
        if !self.network {
            line.push_str(" · network: off");
        }
        line
    }

    /// bubblewrap's arguments for a process working in `cwd` (the project's
    /// folder in the user's tree or a lane), up to and including `--`. Its
    /// work tree (the git work tree holding `cwd`, else `cwd`) is writable;
    /// `extra` paths are too (the attempt's own folder).
    pub fn args(&self, cwd: &Path, extra: &[PathBuf]) -> Vec<OsString> {
        self.args_reading(cwd, extra, &[])
    }

    /// [`Self::args`], with `readable` paths under `/tmp` (an agent
    /// installed there) seen through the private `/tmp`, read-only, as are
    /// the profile's own [`Self::readable`].
    fn args_reading(&self, cwd: &Path, extra: &[PathBuf], readable: &[PathBuf]) -> Vec<OsString> {
        let cwd = std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_path_buf());
        let work_tree = work_tree_of(&cwd);
        let work_tree = work_tree.as_path();
        let mut a = Args::default();
        a.flag(&["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]);
        a.flag(&["--tmpfs", "/tmp"]);
        // Before the read-only binds, so that those below it still show.
        if let Some(tmpdir) = &self.tmpdir {
            a.mount_one("--dir", tmpdir);
        }
        let readable = in_tmp(self.readable.iter().chain(readable));
        for p in &readable {
            a.mount("--ro-bind-try", p);
        }
        // A TMPDIR inside a folder just shown read-only would be that real
        // folder: a private one over it, and what it held that the run
        // needs shown again.
        if let Some(tmpdir) = self
            .tmpdir
            .as_ref()
            .filter(|t| readable.iter().any(|r| t.starts_with(r)))
        {
            a.mount_one("--tmpfs", tmpdir);
            for p in readable.iter().filter(|p| p.starts_with(tmpdir)) {
                a.mount("--ro-bind-try", p);
            }
        }
        // Then everything writable: a later mount wins, so none of the
        // above can make the work tree or the agent's folders read-only,
        // nor any of them writable.
        for p in &self.writable {
            a.mount("--bind-try", p);
        }
        a.mount("--bind", work_tree);
        self.git_rules(&mut a, work_tree);
        // The folders holding spectr's files (`spectr/changes/<id>`…) are
        // mount points of their own, so that none can be renamed away
        // with spectr's files in it and replaced.
        let mut holders: Vec<&Path> = self
            .own
            .iter()
            .flat_map(|rel| rel.ancestors().skip(1))
            .filter(|p| !p.as_os_str().is_empty())
            .collect();
        holders.sort();
        holders.dedup();
        for rel in holders {
            a.mount("--bind-try", &cwd.join(rel));
        }
        for rel in &self.own {
            a.mount("--ro-bind-try", &cwd.join(rel));
        }
        for path in self.masked.iter().filter(|p| p.exists()) {
            a.0.push("--ro-bind".into());
            a.0.push("/dev/null".into());
            a.0.push(path.as_os_str().to_owned());
        }
        for p in extra {
            a.mount("--bind-try", p);
        }
        if !self.network {
            a.flag(&["--unshare-net"]);
        }
        a.flag(&["--die-with-parent", "--chdir"]);
        a.0.push(cwd.into_os_string());
        a.flag(&["--"]);
        a.0
    }

    /// What keeps the repository's code and spectr's files out of reach
    /// while the agent's commits still work (see the module docs).
    fn git_rules(&self, a: &mut Args, work_tree: &Path) {
        let Some((git_dir, common)) = git_dirs(work_tree) else {
            return;
        };
        let linked = git_dir != common;
        if !linked {
            // The user's tree: its git folder is writable with the work tree.
            // Folders git reads code from are made when missing (a folder
            // that is not there cannot be bound read-only, and the agent
            // could create it: `modules/<x>/config`); git treats an empty
            // one as none. Every start, not once: `git worktree prune`
            // removes an empty `worktrees/`.
            // `refs/spectr` likewise: git removes it when spectr deletes its
            // last ref there.
            for name in GIT_CODE_FOLDERS.iter().chain(&[SPECTR_REFS]) {
                let _ = std::fs::create_dir_all(common.join(name));
            }
            // Its own mount point, and `refs/` one: a mount point cannot be
            // renamed (EBUSY), so the agent cannot swap in a `.git` of its
            // own, or a `refs/` without spectr's read-only refs in it.
            a.mount("--bind", &git_dir);
            a.mount("--bind-try", &common.join("refs"));
        }
        for name in ["config"].iter().chain(GIT_CODE_FOLDERS) {
            a.mount("--ro-bind-try", &common.join(name));
        }
        // spectr's checkpoints: written by spectr only, outside the sandbox.
        a.mount("--ro-bind-try", &common.join(SPECTR_REFS));
        if linked {
            // A lane: its own git folder writable, the common one read-only
            // but for its objects. After `worktrees/`, which holds the
            // lane's folder: the later mount wins.
            a.mount("--bind", &git_dir);
            a.mount("--bind-try", &common.join("objects"));
            for name in ["commondir", "gitdir", "config.worktree"] {
                a.mount("--ro-bind-try", &git_dir.join(name));
            }
        }
        let dot = work_tree.join(".git");
        if !dot.is_dir() {
            // A `.git` file (a lane's, or a separate git folder's) names the
            // git folder: not the agent's to point elsewhere.
            a.mount("--ro-bind-try", &dot);
        }
        for name in SPECTR_GIT_FILES {
            a.mount("--ro-bind-try", &git_dir.join(name));
            a.mount("--ro-bind-try", &common.join(name));
        }
    }

    /// A sandboxed command: `program` run by bubblewrap in `cwd`.
    pub fn command(&self, program: impl AsRef<OsStr>, cwd: &Path) -> Cmd {
        Cmd::new(&self.bwrap)
            .args(self.args(cwd, &[]))
            .arg(program)
            .work_in(cwd)
    }

    /// The agent's `program` run by bubblewrap in `cwd`, its installation
    /// seen ([`package_of`]), as an attempt runs it: the preflight asks
    /// its version so.
    pub fn program_command(&self, program: &Path, cwd: &Path) -> Cmd {
        Cmd::new(&self.bwrap)
            .args(self.args_reading(cwd, &[], &package_of(program)))
            .arg(program)
            .work_in(cwd)
    }

    /// The agent's command run by bubblewrap in its folder (`spec.cwd`).
    pub fn wrap(&self, mut spec: CommandSpec, extra: &[PathBuf]) -> CommandSpec {
        let readable = package_of(&spec.program);
        let mut args: Vec<String> = self
            .args_reading(&spec.cwd, extra, &readable)
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        args.push(spec.program.display().to_string());
        args.append(&mut spec.args);
        spec.args = args;
        spec.program = self.bwrap.clone();
        spec
    }
}

#[derive(Default)]
struct Args(Vec<OsString>);

impl Args {
    fn flag(&mut self, words: &[&str]) {
        self.0.extend(words.iter().map(OsString::from));
    }

    fn mount(&mut self, how: &str, path: &Path) {
        self.0.push(how.into());
        self.0.push(path.as_os_str().to_owned());
        self.0.push(path.as_os_str().to_owned());
    }

    /// `--dir`, `--tmpfs`: one path.
    fn mount_one(&mut self, how: &str, path: &Path) {
        self.0.push(how.into());
        self.0.push(path.as_os_str().to_owned());
    }
}

/// Whether `path` is below `/tmp`, where the private `/tmp` hides it
/// (`/tmp` itself never: all of the real one would show; nor a path with
/// `..`, which may lead out of it).
fn below_tmp(path: &Path) -> bool {
    path.starts_with("/tmp")
        && path != Path::new("/tmp")
        && !path
            .components()
            .any(|c| c == std::path::Component::ParentDir)
}

/// The paths below `/tmp`, and where each leads when it is a link (both
/// may be used), sorted (a folder before what it holds) without repeats.
fn in_tmp<'a>(paths: impl Iterator<Item = &'a PathBuf>) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = paths
        .flat_map(|p| [Some(p.clone()), std::fs::canonicalize(p).ok()])
        .flatten()
        .filter(|p| below_tmp(p))
        .collect();
    found.sort();
    found.dedup();
    found
}

/// spectr's own binary as an agent calls it (the prompt says `spectr` when
/// PATH finds this binary by that name, else its full path): `exe` (this
/// binary, links followed) and each `spectr` on `path` that is it.
pub fn own_binary(exe: &Path, path: Option<&OsStr>) -> Vec<PathBuf> {
    let mut found = vec![exe.to_path_buf()];
    for dir in path.map(std::env::split_paths).into_iter().flatten() {
        let named = dir.join("spectr");
        if std::fs::canonicalize(&named).is_ok_and(|p| p == exe) {
            found.push(named);
        }
    }
    found
}

/// `TMPDIR` as the sandbox makes it: only below `/tmp` (elsewhere it is
/// visible, read-only, like the rest of the file system).
pub fn private_tmpdir(tmpdir: Option<&OsStr>) -> Option<PathBuf> {
    tmpdir
        .map(PathBuf::from)
        .filter(|t| t.is_absolute() && below_tmp(t))
}

/// What running the agent's `program` reads besides the program itself,
/// where that may be under `/tmp`: its folder as named (a link's folder
/// holds its siblings, `node` beside an agent in an nvm layout), and from
/// where it really is (links followed, as Node does) its folder, the
/// nearest folder with a `package.json` above it (the package), and the
/// `node_modules` folder of every folder above it (where Node looks for the
/// packages it loads: a `.bin` link's siblings, an npm `--prefix`'s
/// `lib/node_modules`). A program found on PATH by name is looked up there.
pub fn package_of(program: &Path) -> Vec<PathBuf> {
    let named = if program.components().count() > 1 {
        program.to_path_buf()
    } else {
        match which::which(program) {
            Ok(found) => found,
            Err(_) => return Vec::new(),
        }
    };
    let mut found: Vec<PathBuf> = named.parent().map(Path::to_path_buf).into_iter().collect();
    if let Ok(real) = std::fs::canonicalize(&named) {
        let above: Vec<&Path> = real.ancestors().skip(1).filter(|d| below_tmp(d)).collect();
        found.extend(above.first().map(|d| d.to_path_buf()));
        found.extend(
            above
                .iter()
                .find(|d| d.join("package.json").is_file())
                .map(|d| d.to_path_buf()),
        );
        found.extend(
            above
                .iter()
                .map(|d| d.join("node_modules"))
                .filter(|d| d.is_dir()),
        );
    }
    found.retain(|p| below_tmp(p));
    found.sort();
    found.dedup();
    found
}

/// While an agent runs and after it: a `commondir` file it created in the
/// user's git folder would point git at a config of its own, to run at the
/// next git command there (the one thing the sandbox's writable git folder
/// lets it plant; spectr's own git pins its common folder). Nothing can be
/// bound in its place: git fails on an empty `commondir` or a folder, and
/// one of spectr's would stay if spectr were killed. Removed; says so.
pub fn sweep(cwd: &Path) -> Option<String> {
    let git_dir = work_tree_of(cwd).join(".git");
    if !git_dir.is_dir() {
        return None;
    }
    let planted = git_dir.join("commondir");
    if std::fs::symlink_metadata(&planted).is_err() {
        return None;
    }
    let removed = std::fs::remove_file(&planted).is_ok();
    Some(format!(
        "the agent created {} (it would point git at another repository's config){}",
        planted.display(),
        if removed {
            "; removed"
        } else {
            "; remove it before running git there"
        }
    ))
}

/// The git work tree holding `dir` (the nearest folder above it with a
/// `.git`), else `dir` itself.
fn work_tree_of(dir: &Path) -> PathBuf {
    dir.ancestors()
        .find(|d| std::fs::symlink_metadata(d.join(".git")).is_ok())
        .unwrap_or(dir)
        .to_path_buf()
}

/// The git folder of `work_tree` and the common one, read from its `.git`
/// (a folder, or a file `gitdir: <path>`) and `commondir`, running nothing.
pub fn git_dirs(work_tree: &Path) -> Option<(PathBuf, PathBuf)> {
    let dot = work_tree.join(".git");
    let meta = std::fs::symlink_metadata(&dot).ok()?;
    let git_dir = if meta.is_dir() {
        dot
    } else {
        let text = std::fs::read_to_string(&dot).ok()?;
        let target = text.trim_end().strip_prefix("gitdir: ")?;
        work_tree.join(target)
    };
    let common = match std::fs::read_to_string(git_dir.join("commondir")) {
        Ok(text) => git_dir.join(text.trim_end()),
        Err(_) => git_dir.clone(),
    };
    let clean = |p: PathBuf| -> PathBuf { std::fs::canonicalize(&p).unwrap_or(p) };
    Some((clean(git_dir), clean(common)))
}

/// `~/x` in `sandbox_writable`, relative to `home`.
pub fn expand_home(path: &str, home: Option<&Path>) -> PathBuf {
    match (path.strip_prefix("~/"), home) {
        (Some(rest), Some(home)) => home.join(rest),
        _ if path == "~" => home.map_or_else(|| PathBuf::from(path), Path::to_path_buf),
        _ => PathBuf::from(path),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile() -> SandboxProfile {
        SandboxProfile {
            bwrap: PathBuf::from("/usr/bin/bwrap"),
            version: "0.8.0".into(),
            network: true,
            writable: vec![PathBuf::from("/home/u/.claude")],
            own: vec![PathBuf::from("spectr/changes/c/.ralph")],
            readable: Vec::new(),
            tmpdir: None,
            masked: Vec::new(),
        }
    }

    /// A folder right under the real `/tmp`, where the private one hides.
    fn in_real_tmp() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir_in("/tmp").unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        (dir, root)
    }

    fn link(target: &str, at: &Path) {
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, at).unwrap();
    }

    #[test]
    fn an_agents_installation_under_tmp_is_its_node_modules_and_package() {
        let (_dir, t) = in_real_tmp();
        // `npm install` in a folder: `.bin/x` links into the package; Node
        // looks for what it loads in every `node_modules` above it.
        let package = t.join("app/node_modules/@x/agent");
        std::fs::create_dir_all(package.join("bin")).unwrap();
        std::fs::write(package.join("package.json"), "{}").unwrap();
        std::fs::write(package.join("bin/x.js"), "").unwrap();
        link("../@x/agent/bin/x.js", &t.join("app/node_modules/.bin/x"));
        assert_eq!(
            package_of(&t.join("app/node_modules/.bin/x")),
            [
                t.join("app/node_modules"),
                t.join("app/node_modules/.bin"),
                package.clone(),
                package.join("bin"),
            ]
        );
        // `npm install -g --prefix p`: `p/bin/x` links into
        // `p/lib/node_modules`, the package's own `node_modules` inside.
        let package = t.join("p/lib/node_modules/agent");
        std::fs::create_dir_all(package.join("bin")).unwrap();
        std::fs::create_dir_all(package.join("node_modules/dep")).unwrap();
        std::fs::write(package.join("package.json"), "{}").unwrap();
        std::fs::write(package.join("bin/x.js"), "").unwrap();
        link("../lib/node_modules/agent/bin/x.js", &t.join("p/bin/x"));
        assert_eq!(
            package_of(&t.join("p/bin/x")),
            [
                t.join("p/bin"),
                t.join("p/lib/node_modules"),
                package.clone(),
                package.join("bin"),
                package.join("node_modules"),
            ]
        );
        // Nothing outside /tmp (visible anyway), nor /tmp itself.
        assert_eq!(package_of(Path::new("/usr/bin/sh")), Vec::<PathBuf>::new());
        assert_eq!(package_of(Path::new("/tmp/x")), Vec::<PathBuf>::new());
    }

    #[test]
    fn what_the_real_tmp_shows_is_read_only_and_the_work_tree_wins() {
        let (_dir, t) = in_real_tmp();
        let root = t.join("projects/app");
        std::fs::create_dir_all(root.join(".git")).unwrap();
        let mut p = profile();
        // A folder holding the work tree (an agent installed beside the
        // project), spectr's binary, a config file.
        p.readable = vec![t.join("projects"), t.join("bin/spectr"), t.join("c.json")];
        p.writable.push(t.join("state"));
        p.tmpdir = Some(t.join("user/0"));
        let args = text(&p.args(&root, &[]));
        let (tt, r) = (t.display(), root.display());
        let tmpfs = args.find("--tmpfs /tmp ").expect(&args);
        let tmpdir = args.find(&format!("--dir {tt}/user/0 ")).expect(&args);
        let shown = args
            .find(&format!("--ro-bind-try {tt}/projects {tt}/projects "))
            .expect(&args);
        let state = args
            .find(&format!("--bind-try {tt}/state {tt}/state "))
            .expect(&args);
        let tree = args.find(&format!("--bind {r} {r} ")).expect(&args);
        assert!(
            tmpfs < tmpdir && tmpdir < shown && shown < state && state < tree,
            "{args}"
        );
        for file in ["bin/spectr", "c.json"] {
            assert!(
                args.contains(&format!("--ro-bind-try {tt}/{file} {tt}/{file} ")),
                "{args}"
            );
        }
        // Nothing of the real /tmp is bound writable but the agent's state
        // folder and the work tree (and folders in it); TMPDIR is a fresh
        // folder, not the real one.
        let writable: Vec<&str> = args
            .split(" --")
            .filter(|m| m.starts_with("bind ") || m.starts_with("bind-try "))
            .filter_map(|m| m.split(' ').nth(1))
            .filter(|p| p.starts_with("/tmp"))
            .filter(|p| !Path::new(p).starts_with(&root))
            .collect();
        assert_eq!(writable, [format!("{tt}/state")], "{args}");
        assert!(!args.contains("--bind /tmp "), "{args}");
    }

    #[test]
    fn a_tmpdir_inside_a_folder_shown_read_only_is_still_its_own() {
        let (_dir, t) = in_real_tmp();
        let mut p = profile();
        p.readable = vec![t.clone(), t.join("tmp/config.json")];
        p.tmpdir = Some(t.join("tmp"));
        let args = text(&p.args(Path::new("/nonexistent/project"), &[]));
        let tt = t.display();
        let shown = args
            .find(&format!("--ro-bind-try {tt} {tt} "))
            .expect(&args);
        let own = args.find(&format!("--tmpfs {tt}/tmp ")).expect(&args);
        let again = args
            .rfind(&format!("--ro-bind-try {tt}/tmp/config.json "))
            .expect(&args);
        assert!(shown < own && own < again, "{args}");
    }

    #[test]
    fn tmpdir_and_spectrs_binary() {
        let tmpdir = |t: &str| private_tmpdir(Some(OsStr::new(t)));
        assert_eq!(tmpdir("/tmp/user/0"), Some(PathBuf::from("/tmp/user/0")));
        // All of the real /tmp would show; elsewhere it is visible anyway.
        assert_eq!(tmpdir("/tmp"), None);
        assert_eq!(tmpdir("/tmp/../home/u"), None);
        assert_eq!(tmpdir("/tmp/"), None);
        assert_eq!(tmpdir("/var/tmp"), None);
        assert_eq!(tmpdir("tmp"), None);
        assert_eq!(private_tmpdir(None), None);
        let (_dir, t) = in_real_tmp();
        let exe = t.join("spectr-1/spectr");
        std::fs::create_dir_all(exe.parent().unwrap()).unwrap();
        std::fs::write(&exe, "").unwrap();
        link("../spectr-1/spectr", &t.join("bin/spectr"));
        std::fs::create_dir_all(t.join("other")).unwrap();
        std::fs::write(t.join("other/spectr"), "").unwrap();
        let path = std::env::join_paths([t.join("other"), t.join("bin")]).unwrap();
        assert_eq!(
            own_binary(&exe, Some(&path)),
            [exe.clone(), t.join("bin/spectr")]
        );
    }

    fn text(args: &[OsString]) -> String {
        args.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn the_control_socket_is_hidden_once_it_exists_after_spectrs_own_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let socket = root.join("spectr/changes/c/.ralph/control.sock");
        let mut p = profile();
        p.masked = vec![socket.clone()];
        let mask = format!("--ro-bind /dev/null {} ", socket.display());
        assert!(!text(&p.args(&root, &[])).contains(&mask), "not there yet");
        std::fs::create_dir_all(socket.parent().unwrap()).unwrap();
        std::fs::write(&socket, "").unwrap();
        let args = text(&p.args(&root, &[]));
        let own = args
            .find(&format!(
                "--ro-bind-try {}/spectr/changes/c/.ralph ",
                root.display()
            ))
            .expect(&args);
        // Over the read-only state folder, so it is not bound back over it.
        assert!(args.find(&mask).expect(&args) > own, "{args}");
    }

    #[test]
    fn the_work_tree_is_writable_and_the_repositorys_code_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        let args = text(&profile().args(&root, &[]));
        let r = root.display();
        let bind = args.find(&format!("--bind {r} {r}")).expect(&args);
        let config = args
            .find(&format!("--ro-bind-try {r}/.git/config"))
            .expect(&args);
        let own = args
            .find(&format!("--ro-bind-try {r}/spectr/changes/c/.ralph"))
            .expect(&args);
        assert!(bind < config && config < own, "{args}");
        // The change folder holding it cannot be renamed away.
        let holder = args
            .find(&format!(
                "--bind-try {r}/spectr/changes/c {r}/spectr/changes/c "
            ))
            .expect(&args);
        assert!(args.contains(&format!("--bind-try {r}/spectr {r}/spectr ")));
        assert!(holder < own, "{args}");
        // `.git` is a mount point of its own (it cannot be renamed), before
        // the read-only binds inside it.
        let dot = args
            .find(&format!("--bind {r}/.git {r}/.git"))
            .expect(&args);
        assert!(bind < dot && dot < config, "{args}");
        // The folders git reads code from exist, so they are bound; and
        // spectr's refs, inside `refs/` (which cannot be renamed).
        let refs = args
            .find(&format!("--bind-try {r}/.git/refs "))
            .expect(&args);
        let spectr_refs = args
            .find(&format!("--ro-bind-try {r}/.git/refs/spectr "))
            .expect(&args);
        assert!(dot < refs && refs < spectr_refs, "{args}");
        for name in GIT_CODE_FOLDERS.iter().chain(&[SPECTR_REFS]) {
            assert!(root.join(".git").join(name).is_dir(), "{name}");
            assert!(
                args.contains(&format!("--ro-bind-try {r}/.git/{name} ")),
                "{args}"
            );
        }
        assert!(args.starts_with("--ro-bind / / "), "{args}");
        assert!(args.contains("--tmpfs /tmp"), "{args}");
        assert!(args.contains("--bind-try /home/u/.claude"), "{args}");
        assert!(!args.contains("--unshare-net"), "{args}");
        assert!(args.ends_with(&format!("--chdir {r} --")), "{args}");
    }

    #[test]
    fn a_lane_writes_its_own_git_folder_and_the_objects_only() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let common = root.join("repo/.git");
        let own = common.join("worktrees/lane-1");
        std::fs::create_dir_all(&own).unwrap();
        std::fs::write(own.join("commondir"), "../..\n").unwrap();
        let lane = root.join("lane-1");
        std::fs::create_dir_all(&lane).unwrap();
        std::fs::write(lane.join(".git"), format!("gitdir: {}\n", own.display())).unwrap();
        assert_eq!(git_dirs(&lane), Some((own.clone(), common.clone())));
        let mut p = profile();
        p.network = false;
        let args = text(&p.args(&lane, &[]));
        let (o, c, l) = (own.display(), common.display(), lane.display());
        // The lane's folder is under `worktrees/`, bound read-only: its own
        // bind must come later to win.
        let worktrees = args
            .find(&format!("--ro-bind-try {c}/worktrees "))
            .expect(&args);
        let own_bind = args.find(&format!("--bind {o} {o}")).expect(&args);
        assert!(worktrees < own_bind, "{args}");
        assert!(args.contains(&format!("--bind-try {c}/objects")), "{args}");
        assert!(
            args.contains(&format!("--ro-bind-try {o}/commondir")),
            "{args}"
        );
        assert!(args.contains(&format!("--ro-bind-try {l}/.git")), "{args}");
        assert!(
            args.contains(&format!("--ro-bind-try {c}/config")),
            "{args}"
        );
        assert!(!args.contains(&format!("--bind {c} ")), "{args}");
        assert!(args.contains("--unshare-net"), "{args}");
    }

    #[test]
    fn a_planted_commondir_is_swept() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        assert_eq!(sweep(&root), None);
        std::fs::write(root.join(".git/commondir"), "/elsewhere").unwrap();
        let said = sweep(&root);
        assert!(said.is_some_and(|s| s.contains("removed")));
        assert!(!root.join(".git/commondir").exists());
    }

    #[test]
    fn home_is_expanded() {
        let home = Path::new("/home/u");
        assert_eq!(
            expand_home("~/.cargo/registry", Some(home)),
            PathBuf::from("/home/u/.cargo/registry")
        );
        assert_eq!(expand_home("/opt/x", Some(home)), PathBuf::from("/opt/x"));
    }
}
