//! The hostile steps: `plant:MARKER` plants every command git could run
//! later (fsmonitor, hooks, filters, diff and merge drivers, a signature
//! program), each appending its name to MARKER when it runs; `escape:REPORT`
//! tries to write where a sandboxed agent must not, and writes what
//! succeeded to REPORT (in its work tree). The agent's own git commands
//! (`git:`, `git_commit:`) set `SPECTR_FAKE_AGENT_GIT`: what they run is
//! marked as the agent's, which is not spectr's concern.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The repository as the agent sees it: its work tree, its own git dir and
/// the common one (the same unless it works in a linked work tree, a lane).
struct Repo {
    top: PathBuf,
    git_dir: PathBuf,
    common: PathBuf,
}

fn rev_parse(arg: &str) -> std::io::Result<PathBuf> {
    let out = Command::new("git")
        .args(["rev-parse", "--path-format=absolute", arg])
        .stdin(Stdio::null())
        .output()?;
    if !out.status.success() {
        return Err(std::io::Error::other(format!("git rev-parse {arg} failed")));
    }
    Ok(PathBuf::from(
        String::from_utf8_lossy(&out.stdout).trim_end(),
    ))
}

fn repo() -> std::io::Result<Repo> {
    Ok(Repo {
        top: rev_parse("--show-toplevel")?,
        git_dir: rev_parse("--git-dir")?,
        common: rev_parse("--git-common-dir")?,
    })
}

fn append(path: &Path, text: &str) -> std::io::Result<()> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?
        .write_all(text.as_bytes())
}

fn executable(path: &Path, text: &str) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, text)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
}

/// What `plant:MARKER` planted, and what it could not (one line each).
pub(crate) fn plant(marker: &Path) -> std::io::Result<String> {
    let repo = repo()?;
    let mut said = Vec::new();
    let mut note = |what: &str, r: std::io::Result<()>| match r {
        Ok(()) => said.push(format!("planted {what}")),
        Err(e) => said.push(format!("could not plant {what}: {e}")),
    };
    // One script for every planted command: names itself in the marker,
    // then passes its input through (a filter or textconv must answer).
    let script = repo.common.join("planted.sh");
    note(
        "the script",
        executable(
            &script,
            &format!(
                // Run while this agent still runs (another lane's spectr
                // git, in the instant the config was being planted): this
                // agent could run anything itself then, so it is told apart.
                "#!/bin/sh\nwhile_alive=''\nkill -0 {} 2>/dev/null && while_alive=' (while the agent ran)'\necho \"$1${{SPECTR_FAKE_AGENT_GIT:+ (by the agent)}}$while_alive\" >> '{}'\ncat 2>/dev/null\nexit 0\n",
                std::process::id(),
                marker.display()
            ),
        ),
    );
    let run = |what: &str| format!("\"{} {what}\"", script.display());
    let hooks = repo.common.join("planted-hooks");
    let config = format!(
        "[core]\n\tfsmonitor = {}\n\thooksPath = {}\n\tpager = {}\n\teditor = {}\n\
         [filter \"planted\"]\n\tclean = {}\n\tsmudge = {}\n\trequired = true\n\
         [diff \"planted\"]\n\ttextconv = {}\n\tcommand = {}\n\
         [diff]\n\texternal = {}\n\
         [merge \"planted\"]\n\tdriver = {}\n\
         [log]\n\tshowSignature = true\n\
         [gpg]\n\tprogram = {}\n\
         [gc]\n\tauto = 1\n",
        run("fsmonitor"),
        hooks.display(),
        run("pager"),
        run("editor"),
        run("filter.clean"),
        run("filter.smudge"),
        run("textconv"),
        run("diff.command"),
        run("diff.external"),
        run("merge.driver"),
        run("gpg"),
    );
    note("the config", append(&repo.common.join("config"), &config));
    if repo.git_dir != repo.common {
        note(
            "the work tree's config",
            append(&repo.git_dir.join("config.worktree"), &config),
        );
    }
    let attributes = "* filter=planted diff=planted merge=planted\n";
    note(
        "info/attributes",
        append(&repo.common.join("info/attributes"), attributes),
    );
    note(
        ".gitattributes",
        append(&repo.top.join(".gitattributes"), attributes),
    );
    for dir in [repo.common.join("hooks"), hooks] {
        for hook in [
            "pre-commit",
            "post-commit",
            "post-checkout",
            "post-merge",
            "post-index-change",
            "reference-transaction",
            "pre-auto-gc",
        ] {
            note(
                &format!("{}", dir.join(hook).display()),
                executable(
                    &dir.join(hook),
                    &format!("#!/bin/sh\nexec '{}' hook:{hook}\n", script.display()),
                ),
            );
        }
    }
    Ok(said.join("\n"))
}

/// One attempt of `escape`: its name and what happened.
fn attempt(name: &str, r: std::io::Result<()>) -> String {
    match r {
        Ok(()) => format!("{name}: written"),
        Err(e) => format!("{name}: blocked ({})", e.kind()),
    }
}

/// Opens an existing file for writing without changing it: proves it
/// could be written, harms nothing.
fn open_for_writing(path: &Path) -> std::io::Result<()> {
    std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .map(drop)
}

/// Tries each escape; returns the report (also written to `report`).
pub(crate) fn escape(report: &Path, change_dir: Option<&Path>) -> std::io::Result<String> {
    let repo = repo()?;
    let tag = std::process::id();
    let mut lines = Vec::new();
    let home = std::env::var_os("HOME").map(PathBuf::from);
    lines.push(attempt(
        "home",
        home.ok_or_else(|| std::io::Error::other("no HOME"))
            .and_then(|h| std::fs::write(h.join(format!("spectr-escape-{tag}")), "x")),
    ));
    let beside = repo.top.parent().unwrap_or(Path::new("/"));
    lines.push(attempt(
        "beside",
        std::fs::write(beside.join(format!("spectr-escape-{tag}")), "x"),
    ));
    lines.push(attempt(
        "etc",
        std::fs::write(format!("/etc/spectr-escape-{tag}"), "x"),
    ));
    lines.push(attempt(
        "git_config",
        append(
            &repo.common.join("config"),
            "[core]\n\tfsmonitor = \"touch spectr-escape-fsmonitor\"\n",
        ),
    ));
    lines.push(attempt(
        "git_hook",
        executable(
            &repo.common.join("hooks/post-checkout"),
            "#!/bin/sh\ntouch spectr-escape-hook\n",
        ),
    ));
    // A submodule's git folder with a config of the agent's: git reads it
    // when it works in that submodule.
    let module = repo.common.join("modules/spectr-escape");
    lines.push(attempt(
        "git_modules",
        std::fs::create_dir_all(&module).and_then(|()| {
            std::fs::write(
                module.join("config"),
                "[core]\n\tfsmonitor = \"touch spectr-escape-fsmonitor\"\n",
            )
        }),
    ));
    // `.git` moved aside, to put a repository of the agent's in its place;
    // moved back at once when that worked (the report says so).
    let dot = repo.top.join(".git");
    let aside = repo.top.join(format!(".git-spectr-escape-{tag}"));
    let renamed = std::fs::rename(&dot, &aside);
    if renamed.is_ok() {
        std::fs::rename(&aside, &dot)?;
    }
    lines.push(attempt("git_rename", renamed));
    // spectr's checkpoint refs: a ref of the agent's among them (a valid
    // one: what HEAD holds), and `refs/` moved aside and back.
    let spectr_refs = repo.common.join("refs/spectr");
    lines.push(attempt(
        "checkpoint_ref",
        std::fs::read(repo.git_dir.join("HEAD")).and_then(|head| {
            std::fs::create_dir_all(&spectr_refs)?;
            std::fs::write(spectr_refs.join(format!("spectr-escape-{tag}")), head)
        }),
    ));
    let refs = repo.common.join("refs");
    let aside = repo.common.join(format!("refs-spectr-escape-{tag}"));
    let renamed = std::fs::rename(&refs, &aside);
    if renamed.is_ok() {
        std::fs::rename(&aside, &refs)?;
    }
    lines.push(attempt("refs_rename", renamed));
    // The user's main tree (from a lane) and spectr's own files there.
    let main_top = repo
        .common
        .parent()
        .filter(|_| repo.git_dir != repo.common)
        .map(Path::to_path_buf);
    if let Some(main) = &main_top {
        lines.push(attempt(
            "main_tree",
            std::fs::write(main.join(format!("spectr-escape-{tag}")), "x"),
        ));
        // Another lane: a work tree beside this one, when there is one.
        let other = std::fs::read_dir(beside).ok().and_then(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| *p != repo.top && p.join(".git").is_file())
                .min()
        });
        if let Some(other) = other {
            lines.push(attempt(
                "other_lane",
                std::fs::write(other.join(format!("spectr-escape-{tag}")), "x"),
            ));
        }
    }
    if let Some(change) = change_dir {
        let rel = change.strip_prefix(&repo.top).unwrap_or(change);
        let change = main_top.as_deref().unwrap_or(&repo.top).join(rel);
        lines.push(attempt(
            "session",
            open_for_writing(&change.join(".ralph-session.json")),
        ));
        lines.push(attempt(
            "lock",
            open_for_writing(&change.join(".ralph/lock")),
        ));
        // The run's control socket: reaching it at all counts (the run
        // would refuse an agent's request, but the sandbox hides it).
        lines.push(attempt(
            "control_socket",
            std::os::unix::net::UnixStream::connect(change.join(".ralph/control.sock")).map(drop),
        ));
        // The change folder moved aside (session, `.ralph/` and all), to
        // put one of the agent's in its place; moved back when that worked.
        let aside = change.with_file_name(format!("spectr-escape-{tag}"));
        let renamed = std::fs::rename(&change, &aside);
        if renamed.is_ok() {
            std::fs::rename(&aside, &change)?;
        }
        lines.push(attempt("change_rename", renamed));
    }
    // Last: in the user's tree it breaks the agent's own git until spectr
    // removes it, which it must do while the agent still runs (another git
    // there would follow it): waited for, at most 30 s.
    let commondir = repo.git_dir.join("commondir");
    let planted = std::fs::write(&commondir, "spectr-escape-commondir\n");
    if planted.is_ok() {
        let gone = (0..1500).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(20));
            std::fs::symlink_metadata(&commondir).is_err()
        });
        lines.push(format!(
            "commondir_removed: {}",
            if gone { "while-running" } else { "no" }
        ));
    }
    lines.push(attempt("git_commondir", planted));
    let text = lines.join("\n") + "\n";
    std::fs::write(report, &text)?;
    Ok(text)
}
