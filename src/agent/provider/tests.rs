use super::command::{MAX_PROMPT_ARG_BYTES, build_command_in, build_command_with};
use super::host::{Host, detect_in};
use super::preflight::preflight_in;
use super::*;
use crate::agent::AgentError;
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

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
    // One column for the hints, the longest name's included.
    let columns: std::collections::BTreeSet<usize> = DETECTION_ORDER
        .iter()
        .zip(install.lines())
        .map(|(k, line)| line.find(install_hint(*k)).unwrap())
        .collect();
    assert_eq!(columns.len(), 1, "{install}");
}

#[test]
fn preflight_finds_the_program_or_says_why_not() {
    let f = fixture(&["my-agent"]);
    let pre = |c: &AgentConfig| preflight_in(&f.host, c, Duration::from_secs(30), None);
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
    let got = preflight_in(
        &f.host,
        &cfg(AgentKind::Gemini),
        Duration::from_secs(30),
        None,
    )
    .unwrap();
    assert_eq!(got.program, p);
    assert_eq!(got.version.as_deref(), Some("0.61.0"));
}

/// With `--sandbox` the version is asked inside it (`confine`): an agent
/// that fails there but answers outside is refused, saying why.
#[test]
fn preflight_asks_inside_the_sandbox_and_refuses_what_it_breaks() {
    let f = fixture(&[]);
    let dir = PathBuf::from(f.host.path.clone().unwrap());
    let p = dir.join("gemini");
    std::fs::write(&p, "#!/bin/sh\necho 0.61.0\n").unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    let pre = |inside: &str| {
        let script = inside.to_string();
        let confine = move |_: &std::path::Path| {
            crate::process::Cmd::new("sh").args(["-c", script.as_str(), "sh"])
        };
        preflight_in(
            &f.host,
            &cfg(AgentKind::Gemini),
            Duration::from_secs(30),
            Some(&confine),
        )
    };
    let got = pre("echo 0.61.1").unwrap();
    assert_eq!(got.version.as_deref(), Some("0.61.1"), "asked inside");
    let e = pre("echo 'Cannot find package @google/x' >&2; exit 1").unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, AgentError::BrokenInSandbox { .. }), "{e:?}");
    assert!(text.contains("fails inside the sandbox"), "{text}");
    assert!(
        text.contains("exited with code 1: Cannot find package"),
        "{text}"
    );
    // Broken outside too: not the sandbox's doing, and no version.
    std::fs::write(&p, "#!/bin/sh\nexit 3\n").unwrap();
    assert_eq!(pre("exit 1").unwrap().version, None);
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
    assert!(dirs(AgentKind::Claude, &nothing).is_empty());
    assert_eq!(
        dirs(AgentKind::Claude, &home),
        [
            PathBuf::from("/h/.claude"),
            PathBuf::from("/h/.claude.json")
        ]
    );
    assert_eq!(dirs(AgentKind::Codex, &home), [PathBuf::from("/h/.codex")]);
    assert_eq!(
        dirs(AgentKind::Gemini, &home),
        [PathBuf::from("/h/.gemini")]
    );
    assert_eq!(
        dirs(AgentKind::Opencode, &own),
        [
            PathBuf::from("/h/.local/share/opencode"),
            PathBuf::from("/h/.config/opencode"),
            PathBuf::from("/x/opencode")
        ]
    );
    assert!(dirs(AgentKind::Custom, &home).is_empty());
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
    std::fs::set_permissions(pkg.join("cli.js"), std::fs::Permissions::from_mode(0o755)).unwrap();
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
    let pre = |kind| preflight_in(&f.host, &cfg(kind), Duration::from_secs(30), None).unwrap();
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

fn build_under(f: &Fixture, cfg: &AgentConfig, policy: &permissions::NativePolicy) -> CommandSpec {
    build_command_with(
        &f.host,
        cfg,
        Some(policy),
        "p",
        Path::new("/work/proj"),
        f.session.path(),
    )
    .unwrap()
}

#[test]
fn under_ralph_permissions_claude_refuses_what_the_policy_refuses_as_root_too() {
    let mut f = fixture(&["claude"]);
    let policy = permissions::NativePolicy {
        allow: vec!["cargo *".into()],
        deny: vec!["git push*".into()],
    };
    for root in [false, true] {
        f.host.is_root = root;
        let spec = build_under(&f, &cfg(AgentKind::Claude), &policy);
        let args = &spec.args;
        assert!(
            args.windows(2)
                .any(|w| w == ["--permission-mode", "dontAsk"]),
            "{args:?}"
        );
        assert!(
            args.contains(&"Edit(//work/proj/**)".to_string()),
            "{args:?}"
        );
        assert!(args.contains(&"Bash(cargo *)".to_string()), "{args:?}");
        assert!(
            args.windows(2)
                .any(|w| w == ["--disallowedTools", "Bash(git push*)"]),
            "{args:?}"
        );
        // Never beside a bypass, under which allow rules count for nothing.
        assert!(
            !args
                .iter()
                .any(|a| a == "--dangerously-skip-permissions" || a == "acceptEdits")
        );
        // The prompt still goes on stdin, the session id still ours.
        assert!(spec.session_id.is_some());
    }
    // The user's own permission flag still wins.
    let mut c = cfg(AgentKind::Claude);
    c.extra_args = vec!["--permission-mode=plan".into()];
    let spec = build_under(&f, &c, &policy);
    assert!(!spec.args.iter().any(|a| a == "dontAsk"), "{:?}", spec.args);
}

#[test]
fn under_ralph_permissions_copilot_gets_rules_not_allow_all() {
    let f = fixture(&["copilot"]);
    let policy = permissions::NativePolicy {
        allow: vec![],
        deny: vec!["git push*".into()],
    };
    let spec = build_under(&f, &cfg(AgentKind::Copilot), &policy);
    assert!(
        !spec.args.iter().any(|a| a == "--allow-all"),
        "{:?}",
        spec.args
    );
    for want in [
        "--allow-tool=write",
        "--allow-tool=shell",
        "--deny-tool=shell(git push)",
    ] {
        assert!(
            spec.args.iter().any(|a| a == want),
            "{want}: {:?}",
            spec.args
        );
    }
    // Without the policy: as before.
    let spec = build(&f, &cfg(AgentKind::Copilot), "p");
    assert!(
        spec.args.iter().any(|a| a == "--allow-all"),
        "{:?}",
        spec.args
    );
    // Other agents are built as ever.
    let g = fixture(&["codex"]);
    let spec = build_under(&g, &cfg(AgentKind::Codex), &policy);
    assert!(
        spec.args
            .windows(2)
            .any(|w| w == ["--sandbox", "workspace-write"])
    );
}
