//! `spectr ralph --agent <codex|gemini|opencode>` end to end, each agent a
//! shell script on PATH that replays the real program's recorded stream
//! (`tests/fixtures/agent-streams/`) and records how it was called; and the
//! preflight that refuses an agent that cannot start before anything is
//! written.

mod common;

use common::*;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

fn stream(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/agent-streams")
        .join(name)
}

/// Installs `name` on the fixture's PATH: answers `--version` with
/// `version`; otherwise saves its arguments (NUL-separated), its trust
/// variable and its stdin in the state folder, prints `stream` and exits
/// with `code`.
fn install(fx: &Fixture, name: &str, version: &str, stream_file: &str, code: i32) {
    let state = fx.state.display();
    let script = format!(
        r#"#!/bin/sh
if [ "$1" = --version ]; then echo '{version}'; exit 0; fi
printf '%s\0' "$@" > '{state}/{name}.args'
printf '%s' "$GEMINI_CLI_TRUST_WORKSPACE" > '{state}/{name}.trust'
cat > '{state}/{name}.stdin'
cat '{stream}'
exit {code}
"#,
        stream = stream(stream_file).display()
    );
    let path = fx.bin.join(name);
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn recorded_args(fx: &Fixture, name: &str) -> Vec<String> {
    std::fs::read_to_string(fx.state.join(format!("{name}.args")))
        .unwrap()
        .split('\0')
        .filter(|a| !a.is_empty())
        .map(str::to_string)
        .collect()
}

/// `spectr ralph <change> <args> --json`, no retries, no terminal.
fn ralph(fx: &Fixture, args: &[&str]) -> Output {
    let mut cmd = fx.spectr();
    cmd.env("NO_COLOR", "1")
        .args(["ralph", CHANGE, "--json", "--max-retries", "0"])
        .args(["--completion-grace", "1s"])
        .args(args)
        .stdin(Stdio::null());
    output_shown(cmd)
}

fn one_task() -> Fixture {
    Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]))
}

#[test]
fn gemini_runs_trusted_and_its_stream_completes_the_task() {
    let fx = one_task();
    install(&fx, "gemini", "0.61.0", "gemini.jsonl", 0);
    let out = ralph(&fx, &["--agent", "gemini"]);
    assert_eq!(out.status.code(), Some(0));
    let ev = events(&out);
    let done = of_kind(&ev, "task_completed");
    assert_eq!(done[0]["outcome"]["via"], "signal");
    let receipt = &done[0]["receipt"];
    assert_eq!(receipt["tokens"]["input"], 3600, "uncached input");
    assert_eq!(receipt["tokens"]["cache_read"], 900);
    assert_eq!(receipt["model"], "gemini-3.8-flash");
    assert!(receipt["turns"].is_null());
    let args = recorded_args(&fx, "gemini");
    assert!(args.contains(&"--skip-trust".to_string()), "{args:?}");
    assert_eq!(
        std::fs::read_to_string(fx.state.join("gemini.trust")).unwrap(),
        "true"
    );
    // The preflight's version is in the header.
    let started = &of_kind(&ev, "run_started")[0];
    assert_eq!(started["agent"], "Gemini CLI (gemini) 0.61.0");
}

#[test]
fn opencode_gets_a_dash_prompt_after_double_dash_and_its_api_error_is_shown() {
    let fx = one_task();
    // A project template opening with front matter: the prompt starts with `-`.
    std::fs::write(
        fx.root.join("spectr/ralph-prompt.md"),
        "---\nkind: task\n---\nTask ID: {{task_id}}\nTasks file: {{tasks_file}}\n{{description}}\n",
    )
    .unwrap();
    install(&fx, "opencode", "1.18.33", "opencode-http400.jsonl", 1);
    let out = ralph(&fx, &["--agent", "opencode"]);
    assert_eq!(out.status.code(), Some(1));
    let args = recorded_args(&fx, "opencode");
    let n = args.len();
    assert_eq!(args[..3], ["run", "--format", "json"], "{args:?}");
    assert_eq!(args[n - 2], "--", "{args:?}");
    assert!(args[n - 1].starts_with("---\nkind: task"), "{args:?}");
    let failed = &of_kind(&events(&out), "task_failed")[0];
    assert_eq!(failed["outcome"]["kind"], "abnormal");
    let detail = failed["outcome"]["detail"].as_str().unwrap();
    assert!(
        detail.contains("code 1") && detail.contains("Invalid request: mock says no. (HTTP 400)"),
        "the agent's own error, not only its exit code: {detail}"
    );
}

#[test]
fn a_codex_retry_it_recovered_from_is_no_rate_limit() {
    let fx = one_task();
    install(&fx, "codex", "codex-cli 0.169.0", "codex-flaky429.jsonl", 0);
    let out = ralph(&fx, &["--agent", "codex"]);
    assert_eq!(out.status.code(), Some(0));
    let ev = events(&out);
    assert!(of_kind(&ev, "rate_limit_wait").is_empty());
    let done = of_kind(&ev, "task_completed");
    assert_eq!(done[0]["receipt"]["is_error"], false);
    assert!(done[0]["receipt"]["rate_limited"].is_null());
    let args = recorded_args(&fx, "codex");
    assert!(args.contains(&"--skip-git-repo-check".to_string()));
    assert_eq!(args.last().map(String::as_str), Some("-"));
    let prompt = std::fs::read_to_string(fx.state.join("codex.stdin")).unwrap();
    assert!(prompt.contains("Task ID: 1.1"));
}

#[test]
fn an_untrusted_gemini_failure_is_shown_without_colour_fragments() {
    let fx = one_task();
    let script = format!(
        "#!/bin/sh\n[ \"$1\" = --version ] && {{ echo 0.61.0; exit 0; }}\ncat '{}' >&2\nexit 55\n",
        stream("gemini-untrusted.stderr").display()
    );
    let path = fx.bin.join("gemini");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = ralph(&fx, &["--agent", "gemini"]);
    let failed = &of_kind(&events(&out), "task_failed")[0];
    let detail = failed["outcome"]["detail"].as_str().unwrap();
    assert!(
        detail.contains("code 55")
            && detail.ends_with(": Gemini CLI is not running in a trusted directory."),
        "{detail}"
    );
    assert!(
        !detail.contains("[31m") && !detail.contains("[39m"),
        "{detail}"
    );
}

/// Asserts the run wrote nothing: no session, no state folder, no refs, the
/// tasks file untouched.
fn assert_nothing_written(fx: &Fixture, out: &Output) {
    assert_eq!(out.status.code(), Some(2), "a usage error");
    let status = git(&fx.root, &["status", "--porcelain", "--ignored"]);
    assert_eq!(status, "", "nothing new in the tree (session, .ralph/)");
    assert!(!fx.session_path().exists());
    assert!(!fx.change_dir.join(".ralph").exists());
    let refs = git(&fx.root, &["for-each-ref", "refs/spectr"]);
    assert_eq!(refs, "", "no checkpoint refs");
    assert_eq!(fx.status("1.1"), "pending");
}

#[test]
fn an_agent_cmd_that_cannot_start_is_refused_before_anything_is_written() {
    for (cmd, says) in [
        ("my-agent 'unterminated", "cannot read --agent-cmd"),
        ("", "--agent-cmd is empty"),
        ("   ", "--agent-cmd is empty"),
        ("no-such-agent-program-xyz --yes", "was not found"),
        ("./missing-agent.sh", "was not found"),
    ] {
        let fx = one_task();
        let out = ralph(&fx, &["--agent-cmd", cmd]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{cmd:?}: {stderr}");
        assert_nothing_written(&fx, &out);
    }
}

#[test]
fn an_explicit_agent_that_is_not_installed_is_refused_before_anything_is_written() {
    let fx = one_task();
    let out = fx
        .spectr()
        .env("PATH", format!("{}:/usr/bin:/bin", fx.bin.display()))
        .args(["ralph", CHANGE, "--agent", "opencode"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("is not installed"), "{stderr}");
    assert!(
        stderr.contains("opencode-ai"),
        "names the install: {stderr}"
    );
    assert_nothing_written(&fx, &out);
}

#[test]
fn an_agent_that_does_not_answer_its_version_still_runs() {
    let fx = one_task();
    let path = fx.bin.join("opencode");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\n[ \"$1\" = --version ] && exit 1\ncat '{}'\n",
            stream("opencode.jsonl").display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = ralph(&fx, &["--agent", "opencode"]);
    assert_eq!(out.status.code(), Some(0));
    let ev = events(&out);
    assert_eq!(
        of_kind(&ev, "run_started")[0]["agent"],
        "OpenCode (opencode)"
    );
    assert_eq!(of_kind(&ev, "task_completed")[0]["receipt"]["turns"], 2);
}

#[test]
fn a_detected_agent_is_named_with_its_version() {
    let fx = one_task();
    fx.script(serde_json::json!({"default": ["mark:completed", "complete"]}));
    let out = fx
        .spectr()
        .env("NO_COLOR", "1")
        .args(["ralph", CHANGE])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let named = format!(
        "Using agent: Claude Code (claude) spectr-fake-agent {}",
        env!("CARGO_PKG_VERSION")
    );
    assert!(stdout.contains(&named), "{stdout}");
    assert!(stdout.contains("agent Claude Code (claude) spectr-fake-agent"));
}

/// A dry run checks the agent exactly as a real run does: the same refusal,
/// the same exit code, and no plan printed for a run that could not start.
#[test]
fn a_dry_run_refuses_an_agent_that_cannot_start_like_a_real_run() {
    let cases: [&[&str]; 3] = [
        &["--agent", "codex"],
        &["--agent-cmd", ""],
        &["--agent-cmd", "no-such-agent-program-xyz --yes"],
    ];
    for args in cases {
        let fx = one_task();
        let run = |extra: &[&str]| {
            fx.spectr()
                .env("NO_COLOR", "1")
                .env("PATH", format!("{}:/usr/bin:/bin", fx.bin.display()))
                .args(["ralph", CHANGE])
                .args(args)
                .args(extra)
                .stdin(Stdio::null())
                .output()
                .unwrap()
        };
        let dry = run(&["--dry-run"]);
        let real = run(&[]);
        let dry_err = String::from_utf8_lossy(&dry.stderr);
        assert_eq!(dry.status.code(), Some(2), "{args:?}: {dry_err}");
        assert_eq!(
            dry_err,
            String::from_utf8_lossy(&real.stderr),
            "{args:?}: the dry run fails as the real run does"
        );
        assert!(
            !String::from_utf8_lossy(&dry.stdout).contains("1.1"),
            "{args:?}: no plan for a run that cannot start"
        );
        assert_nothing_written(&fx, &dry);
    }
    // The install hint comes with it.
    let fx = one_task();
    let out = fx
        .spectr()
        .env("PATH", format!("{}:/usr/bin:/bin", fx.bin.display()))
        .args(["ralph", CHANGE, "--agent", "codex", "--dry-run"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("is not installed") && stderr.contains("npm"),
        "{stderr}"
    );
}

/// A dry run with an agent that can start names it with its version.
#[test]
fn a_dry_run_names_the_agent_and_its_version() {
    let fx = one_task();
    install(&fx, "codex", "codex-cli 0.169.0", "codex.jsonl", 0);
    let out = fx
        .spectr()
        .env("NO_COLOR", "1")
        .args(["ralph", CHANGE, "--agent", "codex", "--dry-run"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Agent Codex CLI (codex) codex-cli 0.169.0"),
        "{text}"
    );
    assert!(
        !fx.change_dir.join(".ralph").exists(),
        "a dry run writes nothing"
    );
}

/// `--agent custom --agent-cmd CMD` is the documented pairing: it runs CMD.
#[test]
fn agent_custom_with_agent_cmd_runs_the_custom_agent() {
    let fx = one_task();
    fx.script(serde_json::json!({"default": ["say:done", "complete"]}));
    let agent_cmd = format!("{} --format text", fake_agent_bin());
    let out = ralph(&fx, &["--agent", "custom", "--agent-cmd", &agent_cmd]);
    assert_eq!(out.status.code(), Some(0));
    let ev = events(&out);
    assert!(
        of_kind(&ev, "run_started")[0]["agent"]
            .as_str()
            .unwrap()
            .starts_with("custom"),
        "{ev:?}"
    );
    assert_eq!(fx.status("1.1"), "completed");
}

/// A named agent with `--agent-cmd` is refused, in one sentence naming each
/// flag once.
#[test]
fn a_named_agent_with_agent_cmd_is_refused_in_one_sentence() {
    let fx = one_task();
    let out = ralph(&fx, &["--agent", "codex", "--agent-cmd", "my-agent --yes"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "--agent codex cannot be combined with --agent-cmd, which runs a custom agent"
        ),
        "{stderr}"
    );
    assert_eq!(
        stderr.matches("--agent-cmd").count(),
        1,
        "named once: {stderr}"
    );
    assert!(stderr.contains("--agent custom"), "{stderr}");
    assert_nothing_written(&fx, &out);
}

#[test]
fn without_a_change_id_or_a_terminal_the_changes_are_listed_before_any_agent_is_looked_for() {
    let fx = Fixture::new(&two_tasks());
    let empty = tempfile::tempdir().unwrap();
    let out = fx
        .spectr()
        .arg("ralph")
        .env("PATH", empty.path())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let text = stderr_text(&out);
    assert!(text.contains("no change id given"), "{text}");
    assert!(text.contains(CHANGE), "{text}");
    assert!(!text.contains("npm install"), "{text}");
}
