//! `spectr ralph --agent copilot|pi|qwen` end to end: the scripted agent
//! installed under each CLI's name speaks that CLI's output format (shaped
//! on its recorded stream) and acts like it where it matters (copilot
//! denies every tool call without `--allow-all`, qwen withholds its write
//! tools without `--yolo`, pi exits 0 when every model call failed). Each
//! agent runs a multi-task change, a `FAILED: reason`, a denied-tools run, a
//! 429 it gets past, a 429 it gives up on, prompts starting with `-` and `@`,
//! and a 232 KB prompt.

mod common;

use common::*;
use serde_json::{Value, json};
use std::process::{Output, Stdio};

/// `spectr ralph <change> --agent <agent> --json`, no retries, no terminal.
fn ralph(fx: &Fixture, agent: &str, args: &[&str]) -> Output {
    let mut cmd = fx.spectr();
    cmd.env("NO_COLOR", "1")
        .args([
            "ralph",
            CHANGE,
            "--agent",
            agent,
            "--json",
            "--max-retries",
            "0",
        ])
        .args(["--completion-grace", "1s"])
        .args(args)
        .stdin(Stdio::null());
    output_shown(cmd)
}

fn fixture(agent: &str, tasks: &[&str]) -> Fixture {
    let list: Vec<(&str, &str, &str)> = tasks.iter().map(|t| (*t, "Core", "pending")).collect();
    let fx = Fixture::new(&tasks_v1(&list));
    fx.install_fake_as(agent);
    fx
}

fn receipt_of(events: &[Value], kind: &str, task: &str) -> Value {
    of_kind(events, kind)
        .into_iter()
        .find(|e| e["task"] == task)
        .unwrap_or_else(|| panic!("no {kind} for {task}"))["receipt"]
        .clone()
}

fn api_retries(events: &[Value]) -> usize {
    of_kind(events, "agent_event")
        .iter()
        .filter(|e| e["agent"]["kind"] == "api_retry")
        .count()
}

/// Three tasks, each writing its file: every one completed, the files
/// there, and each receipt saying what the agent reports.
fn three_tasks(agent: &str) {
    let fx = fixture(agent, &["1.1", "1.2", "1.3"]);
    fx.script(json!({
        "1.1": ["write:out/one.txt=one", "complete"],
        "1.2": ["write:out/two.txt=two", "complete"],
        "1.3": ["write:out/three.txt=three", "complete"],
    }));
    let out = ralph(&fx, agent, &["--task-timeout", "10m"]);
    assert_eq!(out.status.code(), Some(0));
    for (id, file, text) in [
        ("1.1", "one.txt", "one"),
        ("1.2", "two.txt", "two"),
        ("1.3", "three.txt", "three"),
    ] {
        assert_eq!(fx.status(id), "completed");
        let written = std::fs::read_to_string(fx.root.join("out").join(file)).unwrap();
        assert_eq!(written, text);
    }
    let ev = events(&out);
    let started = &of_kind(&ev, "run_started")[0];
    assert!(
        started["agent"]
            .as_str()
            .unwrap()
            .contains(&format!("({agent}) spectr-fake-agent")),
        "{started}"
    );
    for id in ["1.1", "1.2", "1.3"] {
        let r = receipt_of(&ev, "task_completed", id);
        assert_eq!(r["signal"]["signal"], "complete", "{r}");
        assert_eq!(r["model"], "fake-model");
        assert_eq!(r["turns"], 2, "two answered model calls: {r}");
        // 2 calls of 150 input tokens (50 of them cached) and 20 output,
        // as each agent reports them.
        assert_eq!(
            (
                &r["tokens"]["input"],
                &r["tokens"]["cache_read"],
                &r["tokens"]["output"]
            ),
            (&json!(200), &json!(100), &json!(40)),
            "{r}"
        );
        if agent == "pi" {
            let cost = r["cost_usd"].as_f64().unwrap();
            assert!((cost - 2.0 * 0.0123).abs() < 1e-9, "{r}");
        } else {
            assert!(r["cost_usd"].is_null(), "{agent} reports no dollars: {r}");
        }
    }
    let args = fx.agent_args("1.1", 1);
    match agent {
        "copilot" => {
            assert_eq!(
                args[..3],
                ["--output-format", "json", "--allow-all"],
                "{args:?}"
            );
            let at = args
                .iter()
                .position(|a| a == "--usage-output-file")
                .unwrap();
            let file = std::path::PathBuf::from(&args[at + 1]);
            // In the attempt's own folder, beside its transcript.
            assert!(
                file.ends_with("1.1-attempt-1/copilot-usage.json"),
                "{file:?}"
            );
            assert!(file.starts_with(fx.change_dir.join(".ralph/transcripts")));
            assert!(file.is_file());
        }
        "pi" => assert_eq!(args, ["-p", "--mode", "json"]),
        "qwen" => assert_eq!(
            args,
            ["-o", "stream-json", "--yolo", "--max-wall-time", "600s"]
        ),
        _ => unreachable!(),
    }
}

fn failed_with_a_reason(agent: &str) {
    let fx = fixture(agent, &["1.1"]);
    fx.script(json!({"1.1": ["say:looking", "fail:the schema file is missing"]}));
    let out = ralph(&fx, agent, &[]);
    assert_eq!(out.status.code(), Some(1));
    let failed = &of_kind(&events(&out), "task_failed")[0];
    assert_eq!(failed["outcome"]["kind"], "failed");
    assert_eq!(failed["outcome"]["reason"], "the schema file is missing");
    assert_eq!(fx.status("1.1"), "pending");
}

/// Its tools refused, the agent still says COMPLETE and exits 0: a failed
/// attempt that says why, and nothing written.
fn denied_tools(agent: &str, says: &str) {
    let fx = fixture(agent, &["1.1"]);
    fx.script(json!({"1.1": ["deny_tools", "write:out/x.txt=x", "complete"]}));
    let out = ralph(&fx, agent, &[]);
    assert_eq!(out.status.code(), Some(1));
    let failed = &of_kind(&events(&out), "task_failed")[0];
    assert_eq!(failed["outcome"]["kind"], "failed", "{failed}");
    let reason = failed["outcome"]["reason"].as_str().unwrap();
    assert!(reason.contains(says), "{reason}");
    assert!(
        !fx.root.join("out/x.txt").exists(),
        "a refused write wrote nothing"
    );
    assert_eq!(fx.status("1.1"), "pending");
}

fn a_429_it_gets_past(agent: &str) {
    let fx = fixture(agent, &["1.1"]);
    fx.script(json!({"1.1": ["retry_429:1", "write:out/x.txt=x", "complete"]}));
    let out = ralph(&fx, agent, &[]);
    assert_eq!(out.status.code(), Some(0));
    let ev = events(&out);
    assert!(api_retries(&ev) >= 1, "the retry is shown");
    assert!(of_kind(&ev, "rate_limit_wait").is_empty());
    assert!(of_kind(&ev, "task_failed").is_empty());
    let r = receipt_of(&ev, "task_completed", "1.1");
    assert!(r["rate_limited"].is_null(), "{r}");
    assert!(fx.root.join("out/x.txt").exists());
}

/// Every call answers 429 until the agent gives up (qwen never does: it
/// waits until its `--max-wall-time` or the task timeout): the loop waits,
/// uncounted, then the next attempt completes.
fn a_429_it_gives_up_on(agent: &str) {
    let fx = fixture(agent, &["1.1"]);
    fx.script(json!({"1.1": [["rate_limit:1"], ["write:out/x.txt=x", "complete"]]}));
    let out = ralph(&fx, agent, &["--task-timeout", "3s"]);
    assert_eq!(out.status.code(), Some(0));
    let ev = events(&out);
    let failed = of_kind(&ev, "task_failed");
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(
        failed[0]["outcome"]["kind"], "rate_limited",
        "{}",
        failed[0]
    );
    assert_eq!(of_kind(&ev, "rate_limit_wait").len(), 1);
    assert!(api_retries(&ev) >= 1, "its waits are shown");
    assert_eq!(fx.status("1.1"), "completed");
    // Not a burned retry: --max-retries 0 and still a second attempt.
    assert_eq!(started(&ev), ["1.1#1", "1.1#2"]);
}

/// Prompts starting with `-` and `@` (a template with front matter, one
/// naming a file) and one of 232 KB reach the agent whole on its stdin.
fn any_prompt_goes_whole_on_stdin(agent: &str) {
    let filler: String = (0..232 * 1024 / 64)
        .map(|i| format!("{i:08} the quick brown fox jumps over the lazy dog, again, and on.\n"))
        .collect();
    assert!(filler.len() >= 232 * 1024);
    for head in ["---\nkind: task\n---\n", "@notes.md\n", filler.as_str()] {
        let fx = fixture(agent, &["1.1"]);
        let template = format!("{head}Task ID: {{{{task_id}}}}\nTasks file: {{{{tasks_file}}}}\n");
        std::fs::write(fx.root.join("spectr/ralph-prompt.md"), &template).unwrap();
        fx.script(json!({"1.1": ["complete"]}));
        let out = ralph(&fx, agent, &[]);
        assert_eq!(out.status.code(), Some(0), "{agent}: {:?}", &head[..10]);
        let got = fx.prompt("1.1", 1).expect("the agent read a prompt");
        assert!(
            got.starts_with(head),
            "{agent}: the prompt starts as written"
        );
        assert!(got.contains("Task ID: 1.1\n"));
        assert!(
            fx.agent_args("1.1", 1)
                .iter()
                .all(|a| !a.contains("Task ID")),
            "never an argument"
        );
    }
}

macro_rules! agent_tests {
    ($module:ident, $agent:literal) => {
        mod $module {
            #[test]
            fn runs_a_three_task_change() {
                super::three_tasks($agent);
            }

            #[test]
            fn fails_with_its_reason() {
                super::failed_with_a_reason($agent);
            }

            #[test]
            fn gets_past_a_429() {
                super::a_429_it_gets_past($agent);
            }

            #[test]
            fn a_429_it_gives_up_on_is_waited_for() {
                super::a_429_it_gives_up_on($agent);
            }

            #[test]
            fn gets_every_prompt_whole_on_stdin() {
                super::any_prompt_goes_whole_on_stdin($agent);
            }
        }
    };
}

agent_tests!(copilot, "copilot");
agent_tests!(pi, "pi");
agent_tests!(qwen, "qwen");

#[test]
fn copilot_denying_every_tool_call_fails_the_attempt() {
    denied_tools("copilot", "copilot denied every tool call (1 of 1)");
}

#[test]
fn qwen_withholding_its_write_tools_fails_the_attempt() {
    denied_tools("qwen", "qwen offered the model no tool that writes");
}

#[test]
fn pi_exiting_0_after_every_call_failed_is_a_failed_attempt() {
    let fx = fixture("pi", &["1.1"]);
    fx.script(json!({"1.1": ["result_error:400:Invalid request: mock says no."]}));
    let out = ralph(&fx, "pi", &[]);
    assert_eq!(out.status.code(), Some(1));
    let failed = &of_kind(&events(&out), "task_failed")[0];
    assert_eq!(failed["outcome"]["kind"], "abnormal");
    let detail = failed["outcome"]["detail"].as_str().unwrap();
    assert_eq!(
        detail,
        "the agent exited with code 0 but its run failed: 400 Invalid request: mock says no."
    );
}

#[test]
fn receipts_say_what_is_not_reported() {
    for (agent, says) in [
        ("qwen", "cost not reported"),
        ("copilot", "cost not reported"),
        ("pi", "$0.025"),
    ] {
        let fx = fixture(agent, &["1.1"]);
        fx.script(json!({"1.1": ["write:out/x.txt=x", "complete"]}));
        let mut cmd = fx.spectr();
        cmd.env("NO_COLOR", "1")
            .args([
                "ralph",
                CHANGE,
                "--agent",
                agent,
                "--completion-grace",
                "1s",
            ])
            .stdin(Stdio::null());
        let out = output_shown(cmd);
        assert_eq!(out.status.code(), Some(0));
        let stdout = String::from_utf8_lossy(&out.stdout);
        let receipt = stdout
            .lines()
            .find(|l| l.starts_with("✓ [1.1] completed · "))
            .unwrap_or_else(|| panic!("{agent}: no verdict line in\n{stdout}"));
        assert!(
            receipt.contains("200 in / 40 out · 100 cached"),
            "{receipt}"
        );
        assert!(receipt.contains(says), "{agent}: {receipt}");
    }
}

#[test]
fn spectr_yaml_picks_qwen() {
    let fx = fixture("qwen", &["1.1"]);
    std::fs::write(fx.root.join("spectr.yaml"), "ralph:\n  agent: qwen\n").unwrap();
    fx.script(json!({"1.1": ["complete"]}));
    let mut cmd = fx.spectr();
    cmd.env("NO_COLOR", "1")
        .args(["ralph", CHANGE, "--json", "--completion-grace", "1s"])
        .stdin(Stdio::null());
    let out = output_shown(cmd);
    assert_eq!(out.status.code(), Some(0));
    let started = &of_kind(&events(&out), "run_started")[0];
    assert!(
        started["agent"]
            .as_str()
            .unwrap()
            .starts_with("Qwen Code (qwen)"),
        "{started}"
    );
}
