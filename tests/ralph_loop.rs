//! The ralph loop end to end, with the fake agent (no network, no real agent CLI).

mod common;

use common::*;
use serde_json::json;

fn three_tasks() -> String {
    tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
        ("2.1", "Docs", "pending"),
    ])
}

#[test]
fn runs_every_task_in_dependency_order_and_cleans_up() {
    let fx = Fixture::new(&three_tasks());
    fx.script(
        json!({"default": ["mark:in_progress", "say:working", "mark:completed", "complete"]}),
    );
    let out = fx.run(&["--json"]);
    assert_eq!(out.status.code(), Some(0));
    let ev = events(&out);
    assert_eq!(started(&ev), ["1.1#1", "1.2#1", "2.1#1"]);
    for id in ["1.1", "1.2", "2.1"] {
        assert_eq!(fx.status(id), "completed");
    }
    assert!(
        !fx.session_path().exists(),
        "session file deleted after success"
    );
    let summary = of_kind(&ev, "summary");
    assert_eq!(summary.len(), 1);
    assert_eq!(summary[0]["end"], "complete");
    assert_eq!(summary[0]["totals"]["completed"], 3);
    // Agent output is streamed as events tied to the task.
    assert!(
        of_kind(&ev, "agent_event")
            .iter()
            .any(|e| e["task"] == "1.1")
    );
}

#[test]
fn prompt_carries_the_task_and_the_full_change_context() {
    let fx = Fixture::new(&three_tasks());
    fx.script(json!({"default": ["mark:completed", "complete"]}));
    let out = fx.run(&["--json"]);
    assert_eq!(out.status.code(), Some(0));
    let p = fx.prompt("1.2", 1).expect("prompt recorded");
    for needle in [
        "Task ID: 1.2",
        "Section: Core",
        "Do task 1.2",
        "PROPOSAL-MARKER",
        "DESIGN-MARKER",
        "Design context",
        "SPEC-MARKER",
        "Capability: widgets",
        "tasks.jsonc",
        "<promise>COMPLETE</promise>",
    ] {
        assert!(p.contains(needle), "prompt lacks {needle:?}:\n{p}");
    }
    assert!(!p.contains("Previous attempt failed"));
}

#[test]
fn complete_signal_alone_completes_and_the_loop_writes_the_status() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx.script(json!({"default": ["say:done", "complete"]}));
    let out = fx.run(&["--json"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(fx.status("1.1"), "completed");
    let done = of_kind(&events(&out), "task_completed");
    assert_eq!(done[0]["outcome"]["via"], "signal");
}

#[test]
fn failed_reason_reaches_the_next_prompt_and_the_tree_is_reverted() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx.script(json!({"1.1": [
        ["write:scratch.txt=half done", "fail:the widget API is missing"],
        ["mark:completed", "complete"]
    ]}));
    let out = fx.run(&["--json"]);
    assert_eq!(out.status.code(), Some(0));
    let second = fx.prompt("1.1", 2).expect("second attempt");
    assert!(second.contains("the widget API is missing"), "{second}");
    assert!(
        !fx.prompt("1.1", 1)
            .unwrap()
            .contains("Previous attempt failed")
    );
    assert!(
        !fx.root.join("scratch.txt").exists(),
        "failed attempt's file reverted"
    );
    let ev = events(&out);
    let reverted = of_kind(&ev, "reverted");
    assert_eq!(reverted.len(), 1);
    let failed_ref = reverted[0]["failed_ref"].as_str().unwrap();
    assert_eq!(
        git(&fx.root, &["show", &format!("{failed_ref}:scratch.txt")]),
        "half done"
    );
}

#[test]
fn abnormal_exit_is_retried_without_extra_context() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx.script(json!({"1.1": [["say:bye"], ["mark:completed", "complete"]]}));
    let out = fx.run(&["--json"]);
    assert_eq!(out.status.code(), Some(0));
    let ev = events(&out);
    assert_eq!(started(&ev), ["1.1#1", "1.1#2"]);
    let failed = of_kind(&ev, "task_failed");
    assert_eq!(failed[0]["outcome"]["kind"], "abnormal");
    assert!(
        !fx.prompt("1.1", 2)
            .unwrap()
            .contains("Previous attempt failed")
    );
}

#[test]
fn nonzero_exit_is_a_failed_attempt_and_its_stderr_is_shown() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx.script(json!({"1.1": [["stderr:not logged in", "exit:3"], ["mark:completed", "complete"]]}));
    let out = fx.run(&["--json"]);
    assert_eq!(out.status.code(), Some(0));
    let failed = of_kind(&events(&out), "task_failed")[0].clone();
    let detail = failed["outcome"]["detail"].as_str().unwrap();
    assert!(
        detail.contains("code 3") && detail.contains("not logged in"),
        "{detail}"
    );
}

#[test]
fn exhausted_retries_stop_the_run_with_an_error_and_exit_1() {
    let fx = Fixture::new(&three_tasks());
    fx.script(json!({"1.1": [["fail:cannot do it"]], "default": ["mark:completed", "complete"]}));
    let out = fx.run(&["--json", "--max-retries", "2"]);
    assert_eq!(out.status.code(), Some(1));
    let ev = events(&out);
    assert_eq!(
        started(&ev),
        ["1.1#1", "1.1#2", "1.1#3"],
        "no other task runs after the error"
    );
    let errors = of_kind(&ev, "error");
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0]["message"]
            .as_str()
            .unwrap()
            .contains("cannot do it")
    );
    assert_eq!(fx.status("1.1"), "pending", "reverted to the checkpoint");
    // The session is kept for a resume, with the retry count.
    let s = fx.session();
    assert_eq!(s["tasks"]["1.1"]["counted_attempts"], 3);
}

#[test]
fn on_exhaust_skip_skips_the_task_and_its_dependents_but_not_other_lanes() {
    let fx = Fixture::new(&three_tasks());
    fx.script(json!({"1.1": [["fail:nope"]], "default": ["mark:completed", "complete"]}));
    let out = fx.run(&["--json", "--max-retries", "0", "--on-exhaust", "skip"]);
    assert_eq!(out.status.code(), Some(1), "not every task completed");
    let ev = events(&out);
    assert_eq!(started(&ev), ["1.1#1", "2.1#1"]);
    let skipped = of_kind(&ev, "task_skipped");
    assert_eq!(skipped[0]["task"], "1.1");
    assert_eq!(skipped[0]["dependents"], json!(["1.2"]));
    assert_eq!(fx.status("2.1"), "completed");
    assert_eq!(fx.status("1.2"), "pending", "skips never reach tasks.jsonc");
}

#[test]
fn a_hanging_agent_times_out_and_leaves_no_process_behind() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx.script(json!({"1.1": [["spawn_child", "hang"]]}));
    let out = fx.run(&["--json", "--max-retries", "0", "--task-timeout", "2s"]);
    assert_eq!(out.status.code(), Some(1));
    let failed = of_kind(&events(&out), "task_failed")[0].clone();
    assert_eq!(failed["outcome"]["kind"], "timed_out");
    let kids = child_pids(&fx.state);
    assert!(!kids.is_empty(), "the fake agent recorded its child");
    for pid in kids {
        assert!(!alive(pid), "child {pid} still running");
    }
}

#[test]
fn completion_in_the_tasks_file_is_seen_while_the_agent_still_runs() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
    ]));
    // The agent marks its task done and then never exits: the loop must notice
    // the status, stop it after the grace, and go on.
    fx.script(
        json!({"1.1": [["mark:completed", "hang"]], "default": ["mark:completed", "complete"]}),
    );
    let out = fx.run(&["--json", "--task-timeout", "10m"]);
    assert_eq!(out.status.code(), Some(0));
    let ev = events(&out);
    let done = of_kind(&ev, "task_completed");
    assert_eq!(done[0]["task"], "1.1");
    assert_eq!(done[0]["outcome"]["via"], "status");
    assert_eq!(started(&ev), ["1.1#1", "1.2#1"]);
}

/// Runs a change of 1.1-1.3 where 1.1's first attempt does `first`; while it
/// runs, a person marks 1.2 completed in tasks.jsonc.
fn run_with_a_person_completing_1_2(first: serde_json::Value) -> (Fixture, std::process::Output) {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
        ("1.3", "Core", "pending"),
    ]));
    fx.script(json!({"1.1": [first, ["mark:completed", "complete"]], "default": ["mark:completed", "complete"]}));
    let mut cmd = fx.ralph();
    cmd.arg("--json").stdout(std::process::Stdio::piped());
    let child = Background::spawn(cmd);
    fx.wait_for("the first prompt", || fx.prompt("1.1", 1).is_some());
    let text = fx.tasks_text();
    let at = text.find("\"id\": \"1.2\"").unwrap();
    let status_at = at + text[at..].find("\"pending\"").unwrap();
    let edited = format!(
        "{}\"completed\"{}",
        &text[..status_at],
        &text[status_at + 9..]
    );
    std::fs::write(fx.change_dir.join("tasks.jsonc"), edited).unwrap();
    let out = child.wait_with_output();
    (fx, out)
}

#[test]
fn a_task_marked_completed_by_someone_else_is_not_run() {
    let (fx, out) =
        run_with_a_person_completing_1_2(json!(["sleep:1500", "mark:completed", "complete"]));
    assert_eq!(out.status.code(), Some(0));
    let ev = events(&out);
    assert_eq!(started(&ev), ["1.1#1", "1.3#1"]);
    assert!(
        of_kind(&ev, "status_changed")
            .iter()
            .any(|e| e["task"] == "1.2" && e["status"] == "completed")
    );
    assert_eq!(fx.status("1.2"), "completed");
}

#[test]
fn a_persons_status_edit_survives_the_revert_of_a_failed_attempt() {
    let (fx, out) = run_with_a_person_completing_1_2(json!(["sleep:1500", "fail:not yet"]));
    assert_eq!(out.status.code(), Some(0));
    let ev = events(&out);
    assert_eq!(
        started(&ev),
        ["1.1#1", "1.1#2", "1.3#1"],
        "1.2 stays done after the revert"
    );
    assert_eq!(fx.status("1.2"), "completed");
}

#[test]
fn revert_restores_the_exact_tree_and_keeps_the_failed_work() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    // The user has uncommitted work before the run: it must survive.
    std::fs::write(fx.root.join("README.txt"), "user edit\n").unwrap();
    std::fs::write(fx.root.join("notes.txt"), "user untracked\n").unwrap();
    fx.script(json!({"1.1": [
        ["write:new/dir/file.txt=agent", "write:README.txt=agent clobbered", "delete:keep.txt", "fail:broke it"],
        ["mark:completed", "complete"]
    ]}));
    let out = fx.run(&["--json"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        std::fs::read_to_string(fx.root.join("README.txt")).unwrap(),
        "user edit\n"
    );
    assert_eq!(
        std::fs::read_to_string(fx.root.join("notes.txt")).unwrap(),
        "user untracked\n"
    );
    assert_eq!(
        std::fs::read_to_string(fx.root.join("keep.txt")).unwrap(),
        "tracked\n"
    );
    assert!(!fx.root.join("new/dir/file.txt").exists());
    let ev = events(&out);
    let failed_ref = of_kind(&ev, "reverted")[0]["failed_ref"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        git(
            &fx.root,
            &["show", &format!("{failed_ref}:new/dir/file.txt")]
        ),
        "agent"
    );
}

#[test]
fn the_users_head_index_and_stash_are_untouched() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    commits_off(&fx);
    std::fs::write(fx.root.join("keep.txt"), "stashed change\n").unwrap();
    git(&fx.root, &["stash", "-q"]);
    std::fs::write(fx.root.join("README.txt"), "staged\n").unwrap();
    git(&fx.root, &["add", "README.txt"]);
    let head = git(&fx.root, &["rev-parse", "HEAD"]);
    let stash = git(&fx.root, &["stash", "list"]);
    let staged = git(&fx.root, &["diff", "--cached", "--name-only"]);
    fx.script(json!({"1.1": [["write:x.txt=1", "git_commit:agent commit", "fail:no"], ["mark:completed", "complete"]]}));
    let out = fx.run(&["--json"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        git(&fx.root, &["rev-parse", "HEAD"]),
        head,
        "HEAD moved back after the agent's commit"
    );
    assert_eq!(git(&fx.root, &["stash", "list"]), stash);
    assert_eq!(git(&fx.root, &["diff", "--cached", "--name-only"]), staged);
    assert_eq!(
        git(&fx.root, &["symbolic-ref", "HEAD"]).trim(),
        "refs/heads/main"
    );
    // The agent's commit happened, and stays reachable from the failed attempt's ref.
    let failed_ref = of_kind(&events(&out), "reverted")[0]["failed_ref"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(git(&fx.root, &["log", "--format=%s", &failed_ref]).contains("agent commit"));
}

#[test]
fn a_git_command_timing_out_fails_the_attempt() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    let real_git = String::from_utf8(
        std::process::Command::new("sh")
            .args(["-c", "command -v git"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let shim = fx.bin.join("git");
    std::fs::write(&shim, format!("#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = write-tree ] && sleep 30; done\nexec {} \"$@\"\n", real_git.trim())).unwrap();
    std::os::unix::fs::PermissionsExt::set_mode(
        &mut std::fs::metadata(&shim).unwrap().permissions(),
        0o755,
    );
    std::fs::set_permissions(&shim, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    fx.script(json!({"default": ["mark:completed", "complete"]}));
    let out = fx.run(&["--json", "--command-timeout", "1", "--max-retries", "1"]);
    assert_eq!(out.status.code(), Some(1));
    let ev = events(&out);
    let failed = of_kind(&ev, "task_failed");
    // spectr's own failure: the run stops at once, no retry used.
    assert_eq!(
        failed.len(),
        1,
        "a checkpoint that timed out is not retried"
    );
    assert!(of_kind(&ev, "retry").is_empty());
    assert_eq!(failed[0]["outcome"]["kind"], "git_error");
    assert!(
        failed[0]["outcome"]["detail"]
            .as_str()
            .unwrap()
            .contains("timed out")
    );
    assert_eq!(of_kind(&ev, "summary")[0]["end"], "aborted");
}

#[test]
fn an_echoed_prompt_or_marker_in_tool_output_is_not_completion() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx.script(json!({"1.1": [["echo_prompt", "tool_output:<promise>COMPLETE</promise>", "result:I stopped early"]]}));
    let out = fx.run(&["--json", "--max-retries", "0"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        of_kind(&events(&out), "task_failed")[0]["outcome"]["kind"],
        "abnormal"
    );
}

#[test]
fn verify_must_pass_and_its_output_becomes_the_reason() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx.script(json!({"1.1": [["mark:completed", "complete"], ["write:ok.flag=1", "mark:completed", "complete"]]}));
    let out = fx.run(&[
        "--json",
        "--verify",
        "test -f ok.flag || { echo 'ok.flag missing'; exit 1; }",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let failed = of_kind(&events(&out), "task_failed");
    assert_eq!(failed[0]["outcome"]["kind"], "verify_failed");
    assert!(fx.prompt("1.1", 2).unwrap().contains("ok.flag missing"));
}

#[test]
fn a_verify_failures_receipt_says_what_decided_it() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx.script(json!({"1.1": [["mark:completed", "complete"], ["write:ok.flag=1", "mark:completed", "complete"]]}));
    let out = fx.run(&[
        "--verify",
        "test -f ok.flag || { echo 'ok.flag missing'; exit 1; }",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    // The failed attempt's one verdict line carries its receipt.
    let receipt = text
        .lines()
        .find(|l| l.starts_with("✗ [1.1] attempt 1 · ") && l.contains("verify failed"))
        .unwrap_or_else(|| panic!("no verdict naming the verify failure:\n{text}"));
    assert!(
        receipt.contains(" · 1 turn · ")
            && receipt.contains("· verify failed: `test -f ok.flag")
            && receipt.ends_with("(the agent said COMPLETE)")
            && !receipt.contains("· COMPLETE"),
        "{receipt}"
    );
}

#[test]
fn rate_limit_waits_and_does_not_count_an_attempt() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx.script(json!({"1.1": [["rate_limit:1"], ["mark:completed", "complete"]]}));
    let out = fx.run(&["--json", "--max-retries", "0"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "a rate limit is not a failed try"
    );
    let ev = events(&out);
    assert_eq!(of_kind(&ev, "rate_limit_wait").len(), 1);
    assert_eq!(started(&ev), ["1.1#1", "1.1#2"]);
}

#[test]
fn without_git_it_says_so_and_runs_without_checkpoints() {
    let fx = Fixture::with_files(
        &[("tasks.jsonc", &tasks_v1(&[("1.1", "Core", "pending")]))],
        false,
    );
    fx.script(json!({"default": ["mark:completed", "complete"]}));
    let out = fx.run(&["--json"]);
    assert_eq!(out.status.code(), Some(0));
    let ev = events(&out);
    assert!(of_kind(&ev, "notice").iter().any(|e| {
        e["message"]
            .as_str()
            .unwrap()
            .contains("not in a git repository")
    }));
    assert!(of_kind(&ev, "checkpoint").is_empty());
}

#[test]
fn human_output_without_a_terminal_is_plain_lines() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx.script(
        json!({"default": ["tool:Bash:cargo test", "mark:completed", "complete", "cost:0.084"]}),
    );
    let out = fx.run(&[]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        !text.contains('\u{1b}'),
        "no ANSI sequences when not a terminal"
    );
    assert!(
        text.contains("[1.1] Core: Do task 1.1 (attempt 1)"),
        "{text}"
    );
    assert!(text.contains("[1.1]") && text.contains("Bash"), "{text}");
    assert!(text.contains("Summary: 1 completed"), "{text}");
}

#[test]
fn dry_run_prints_the_plan_and_starts_nothing() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "completed"),
        ("1.2", "Core", "pending"),
        ("2.1", "Docs", "pending"),
    ]));
    let out = fx.run(&["--dry-run"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("2 independent groups of tasks"), "{text}");
    assert!(text.contains("completed") && text.contains("1.2"), "{text}");
    assert!(fx.prompt("1.2", 1).is_none());
}

#[test]
fn nothing_to_do_exits_0() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "completed")]));
    let out = fx.run(&[]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("Nothing to do"));
}

#[test]
fn unknown_change_and_missing_tasks_file_are_input_errors() {
    let fx = Fixture::with_files(&[], true);
    let out = fx.ralph().arg("--json").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("tasks.jsonc not found for change '{CHANGE}'")),
        "{err}"
    );
    assert!(err.contains(&format!("spectr accept {CHANGE}")), "{err}");

    let out = std::process::Command::new(spectr_bin())
        .current_dir(&fx.root)
        .args(["ralph", "nonexistent-change", "--agent", "claude"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("change 'nonexistent-change' not found") && err.contains("spectr list"),
        "{err}"
    );
}

#[test]
fn split_v2_changes_run_children_only_and_complete_their_containers() {
    let root = format!(
        "{}/tests/fixtures/spectr-upstream/changes/add-multi-repo-discovery",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&root).expect("upstream fixture beside the repo") {
        let p = entry.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if name.starts_with("tasks") && name.ends_with(".jsonc") {
            let text = std::fs::read_to_string(&p)
                .unwrap()
                .replace("\"completed\"", "\"pending\"");
            files.push((name, text));
        }
    }
    files.sort();
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(n, t)| (n.as_str(), t.as_str()))
        .collect();
    let fx = Fixture::with_files(&refs, true);
    fx.script(json!({"default": ["mark:completed", "complete"]}));
    let out = fx.run(&["--json", "--no-checkpoint"]);
    assert_eq!(out.status.code(), Some(0));
    let ev = events(&out);
    let ids = started(&ev);
    assert!(
        ids.iter().all(|s| s.contains('.')),
        "section entries never go to an agent: {ids:?}"
    );
    assert_eq!(ids.first().map(String::as_str), Some("1.1#1"));
    assert_eq!(ids.last().map(String::as_str), Some("6.1#1"));
    for id in ["1", "2", "3", "4", "5", "6"] {
        assert_eq!(fx.status(id), "completed", "container {id}");
    }
}

#[test]
fn openspec_changes_run_one_story_per_section_and_tick_its_boxes() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("proj");
    let change = root.join("openspec/changes/add-thing");
    std::fs::create_dir_all(&change).unwrap();
    std::fs::write(change.join("proposal.md"), "# Add thing\n").unwrap();
    std::fs::write(
        change.join("tasks.md"),
        "# Tasks\n\n## 1. First story\n\n- [ ] 1.1 one\n- [x] 1.2 two\n\n## 2. Second story\n\n- [ ] 2.1 three\n",
    )
    .unwrap();
    git(&root, &["init", "-q", "-b", "main"]);
    git(&root, &["config", "user.name", "Spectr Tests"]);
    git(&root, &["config", "user.email", "tests@spectr.invalid"]);
    git(&root, &["add", "-A"]);
    git(&root, &["commit", "-qm", "init"]);
    let fx = Fixture::with_files(&[], false);
    fx.script(json!({"default": ["say:done", "complete"]}));
    let out = std::process::Command::new(spectr_bin())
        .current_dir(&root)
        .env("PATH", fx.path_env())
        .env("SPECTR_FAKE_SCRIPT", fx.state.join("script.json"))
        .env("SPECTR_FAKE_STATE", &fx.state)
        .args(["ralph", "add-thing", "--agent", "claude", "--json"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(started(&events(&out)), ["1#1", "2#1"]);
    let md = std::fs::read_to_string(change.join("tasks.md")).unwrap();
    assert!(!md.contains("- [ ]"), "{md}");
    assert!(
        md.contains("## 1. First story") && md.contains("- [x] 2.1 three"),
        "{md}"
    );
    let prompt = fx.prompt("1", 1).unwrap();
    assert!(
        prompt.contains("First story") && prompt.contains("tasks.md"),
        "{prompt}"
    );
}

#[test]
fn the_readme_demo_runs_the_sample_change_to_completion() {
    let fx = sample_project();
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/demo-agent.json");
    std::fs::copy(script, fx.state.join("script.json")).unwrap();
    let out = fx
        .spectr()
        .args(["ralph", "add-greeting-cli", "--agent", "claude", "--json"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let ev = events(&out);
    assert_eq!(
        started(&ev),
        ["1.1#1", "1.2#1", "1.2#2", "1.3#1", "2.1#1", "2.2#1"],
        "one planned failure, reverted and retried"
    );
    assert_eq!(of_kind(&ev, "reverted").len(), 1);
    let list = std::process::Command::new(spectr_bin())
        .current_dir(&fx.root)
        .arg("list")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&list.stdout).contains("add-greeting-cli  5/5 tasks"));
    let greet = std::fs::read_to_string(fx.root.join("examples/greet.rs")).unwrap();
    assert!(
        greet.contains("Hello, {name}!"),
        "the second attempt's file, not the failed one:\n{greet}"
    );
}

#[test]
fn without_agent_the_first_installed_one_is_used_and_named() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx.script(json!({"default": ["mark:completed", "complete"]}));
    let out = fx
        .spectr()
        .args(["ralph", CHANGE])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("Using agent: Claude Code (claude)"));
}

#[test]
fn no_installed_agent_is_an_input_error_listing_the_agents() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    let empty = fx.state.join("empty-path");
    std::fs::create_dir_all(&empty).unwrap();
    let out = std::process::Command::new(spectr_bin())
        .current_dir(&fx.root)
        .env("PATH", &empty)
        .args(["ralph", CHANGE])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    for agent in [
        "claude", "codex", "gemini", "opencode", "copilot", "qwen", "pi", "amp", "cursor",
    ] {
        assert!(err.contains(agent), "{agent} missing from:\n{err}");
    }
}

#[test]
fn dry_run_follows_the_saved_session() {
    let fx = Fixture::new(&three_tasks());
    fx.script(json!({"1.1": [["fail:nope"]], "default": ["mark:completed", "complete"]}));
    let out = fx.run(&["--json", "--max-retries", "0", "--on-exhaust", "skip"]);
    assert_eq!(out.status.code(), Some(1));
    let out = fx
        .spectr()
        .args(["ralph", CHANGE, "--dry-run", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let plan = of_kind(&events(&out), "plan");
    let actions: Vec<String> = plan[0]["lanes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|l| l["tasks"].as_array().unwrap().clone())
        .map(|t| {
            format!(
                "{}={}",
                t["task"].as_str().unwrap(),
                t["action"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(actions, ["1.1=skipped", "1.2=skipped", "2.1=completed"]);
}

#[test]
fn json_events_keep_their_documented_fields() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx.script(
        json!({"1.1": [["fail:x"], ["tool:Bash:ls", "mark:completed", "cost:0.01", "complete"]]}),
    );
    let out = fx.run(&["--json"]);
    assert_eq!(out.status.code(), Some(0));
    let ev = events(&out);
    let fields = |kind: &str, keys: &[&str]| {
        let e = of_kind(&ev, kind);
        assert!(!e.is_empty(), "no {kind} event");
        for k in keys {
            assert!(e[0].get(*k).is_some(), "{kind} lacks {k}: {}", e[0]);
        }
    };
    fields(
        "run_started",
        &[
            "change",
            "agent",
            "tasks_total",
            "tasks_to_run",
            "max_retries",
            "checkpoints",
            "resumed",
            "state_dir",
            "session_file",
        ],
    );
    fields(
        "task_started",
        &[
            "task",
            "section",
            "description",
            "attempt",
            "max_attempts",
            "transcript",
        ],
    );
    fields("checkpoint", &["task", "attempt", "checkpoint"]);
    fields("agent_started", &["task", "attempt", "pid"]);
    fields("agent_event", &["task", "attempt", "agent"]);
    fields("task_failed", &["task", "attempt", "outcome", "receipt"]);
    fields(
        "reverted",
        &[
            "task",
            "attempt",
            "failed_ref",
            "files_restored",
            "files_removed",
        ],
    );
    fields("retry", &["task", "next_attempt", "max_attempts", "reason"]);
    fields("task_completed", &["task", "attempt", "outcome", "receipt"]);
    fields(
        "summary",
        &["end", "totals", "transcripts", "checkpoint_refs"],
    );
    let summary = &of_kind(&ev, "summary")[0];
    for k in [
        "completed",
        "failed",
        "skipped",
        "remaining",
        "attempts",
        "duration_ms",
        "turns",
        "input_tokens",
        "output_tokens",
        "cache_tokens",
        "cost_usd",
    ] {
        assert!(summary["totals"].get(k).is_some(), "totals lack {k}");
    }
    assert!(
        of_kind(&ev, "agent_event")
            .iter()
            .any(|e| e["agent"]["kind"] == "tool_use")
    );
}

#[test]
fn idle_timeout_stops_a_silent_agent() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx.script(json!({"1.1": [["say:thinking", "hang"]]}));
    let out = fx.run(&["--json", "--max-retries", "0", "--idle-timeout", "1s"]);
    assert_eq!(out.status.code(), Some(1));
    let failed = of_kind(&events(&out), "task_failed")[0].clone();
    assert_eq!(failed["outcome"]["kind"], "timed_out");
    assert!(
        failed["outcome"]["detail"]
            .as_str()
            .unwrap()
            .contains("idle-timeout")
    );
}

#[test]
fn a_project_prompt_template_replaces_the_default() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    std::fs::write(
        fx.root.join("spectr/ralph-prompt.md"),
        "CUSTOM\nTask ID: {{task_id}}\nTasks file: {{tasks_file}}\n{{unknown}}\n",
    )
    .unwrap();
    fx.script(json!({"default": ["mark:completed", "complete"]}));
    assert_eq!(fx.run(&["--json"]).status.code(), Some(0));
    let p = fx.prompt("1.1", 1).unwrap();
    assert!(
        p.starts_with("CUSTOM\nTask ID: 1.1\n") && p.contains("{{unknown}}"),
        "{p}"
    );
    assert!(
        !p.contains("PROPOSAL-MARKER"),
        "only what the template asks for"
    );
}

#[test]
fn on_exhaust_retry_renews_the_budget() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx.script(json!({"1.1": [["fail:one"], ["fail:two"], ["mark:completed", "complete"]]}));
    let out = fx.run(&["--json", "--max-retries", "0", "--on-exhaust", "retry"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(started(&events(&out)), ["1.1#1", "1.1#2", "1.1#3"]);
}

#[test]
fn the_upstream_v1_fixture_runs_in_id_order() {
    let path = format!(
        "{}/tests/fixtures/spectr-upstream/changes/add-relative-line-numbers/tasks.jsonc",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(path)
        .unwrap()
        .replace("\"completed\"", "\"pending\"");
    let fx = Fixture::new(&text);
    fx.script(json!({"default": ["mark:completed", "complete"]}));
    let out = fx.run(&["--json", "--no-checkpoint"]);
    assert_eq!(out.status.code(), Some(0));
    let ids: Vec<String> = started(&events(&out))
        .iter()
        .map(|s| s.trim_end_matches("#1").to_string())
        .collect();
    let expected = [
        "1.1", "1.2", "1.3", "1.4", "1.5", "1.6", "2.1", "2.2", "3.1", "3.2", "3.3", "3.4", "4.1",
    ];
    assert_eq!(ids, expected);
    // Every byte but the 13 status values is as upstream wrote it.
    let after = fx.tasks_text();
    assert_eq!(after.replace("\"completed\"", "\"pending\""), text);
}

#[test]
fn a_custom_agent_command_gets_the_prompt_in_a_file_and_speaks_plain_text() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
    ]));
    fx.script(json!({"1.1": [["fail:plain text failure"], ["say:done", "complete"]], "default": ["complete"]}));
    let agent_cmd = format!(
        "{} --format text --prompt-file {{prompt_file}}",
        fake_agent_bin()
    );
    let out = fx
        .spectr()
        .args(["ralph", CHANGE, "--agent-cmd", &agent_cmd, "--json"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ev = events(&out);
    assert_eq!(started(&ev), ["1.1#1", "1.1#2", "1.2#1"]);
    assert_eq!(
        of_kind(&ev, "task_failed")[0]["outcome"]["reason"],
        "plain text failure"
    );
    assert!(fx.prompt("1.1", 2).unwrap().contains("plain text failure"));
    assert_eq!(
        fx.status("1.2"),
        "completed",
        "the loop wrote the status on COMPLETE"
    );
    assert!(ev[0]["agent"].as_str().unwrap().starts_with("custom"));
}

/// An agent that completes another section's task (its edit is taken in
/// while the attempt runs, by the attempt's own look at the files) still
/// gets that section's container completed, and that task never runs.
#[test]
fn a_container_completed_by_an_agents_edit_elsewhere_is_written_back() {
    let root = r#"{"version": 2, "tasks": [
  {"id": "1", "section": "One", "description": "One", "status": "pending", "children": "$ref:tasks-1.jsonc"},
  {"id": "2", "section": "Two", "description": "Two", "status": "pending", "children": "$ref:tasks-2.jsonc"}
], "includes": ["tasks-*.jsonc"]}"#;
    let one = r#"{"version": 2, "parent": "1", "tasks": [
  {"id": "1.1", "section": "One", "description": "first", "status": "pending"}
]}"#;
    let two = r#"{"version": 2, "parent": "2", "tasks": [
  {"id": "2.1", "section": "Two", "description": "second", "status": "pending"}
]}"#;
    let two_done = two.replace("pending", "completed").replace('\n', "\\n");
    let fx = Fixture::with_files(
        &[
            ("tasks.jsonc", root),
            ("tasks-1.jsonc", one),
            ("tasks-2.jsonc", two),
        ],
        true,
    );
    let write = format!("write:spectr/changes/add-widget/tasks-2.jsonc={two_done}");
    fx.script(json!({"1.1": [write, "mark:completed", "complete"]}));
    let out = fx.run(&["--json", "--no-checkpoint"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(started(&events(&out)), vec!["1.1#1".to_string()]);
    assert_eq!(fx.status("2.1"), "completed");
    assert_eq!(fx.status("2"), "completed", "container 2 written back");
    assert_eq!(fx.status("1"), "completed");
}

/// Other changes' run state (`.ralph/`: learnings, session, locks, lanes,
/// transcripts; an old-place session file) is spectr's own: a revert never
/// lists it as "left alone", never saves it as the attempt's work and never
/// removes it, whether it predates the checkpoint or appeared during the
/// attempt.
#[test]
fn a_revert_never_names_or_touches_other_changes_run_state() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    let other = [
        "spectr/changes/other-change/.ralph/.gitignore",
        "spectr/changes/other-change/.ralph/learnings.md",
        "spectr/changes/other-change/.ralph/session.json",
        "spectr/changes/other-change/.ralph/lock",
        "spectr/changes/other-change/.ralph/lanes/lane-1/src/a.rs",
        "spectr/changes/other-change/.ralph/transcripts/2025-01-01T00-00-00Z/1.1-attempt-1.log",
        "openspec/changes/story-change/.ralph/.gitignore",
        "openspec/changes/story-change/.ralph/learnings.md",
    ];
    for rel in other {
        let p = fx.root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        let text = if rel.ends_with(".gitignore") {
            "*\n".to_string()
        } else {
            format!("{rel}\n")
        };
        std::fs::write(p, text).unwrap();
    }
    // Older than the checkpoint's second, as a real earlier run's files are.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let during = "spectr/changes/other-change/.ralph/learnings-during.md";
    fx.script(json!({"1.1": [
        [format!("write:{during}=written during the attempt"), "write:agent.txt=attempt 1", "fail:not yet"],
        ["mark:completed", "complete"]
    ]}));
    let out = fx.run(&["--json", "--max-retries", "1"]);
    assert_eq!(out.status.code(), Some(0));
    let ev = events(&out);
    assert_eq!(of_kind(&ev, "reverted").len(), 1);
    for n in of_kind(&ev, "notice") {
        let message = n["message"].as_str().unwrap();
        assert!(
            !message.contains(".ralph") && !message.contains("left alone"),
            "spectr's own files in a notice: {message}"
        );
    }
    for rel in other {
        assert!(fx.root.join(rel).is_file(), "{rel} kept");
    }
    assert_eq!(
        std::fs::read_to_string(fx.root.join(during)).unwrap(),
        "written during the attempt"
    );
    assert!(
        !fx.root.join("agent.txt").exists(),
        "the attempt's own file is reverted"
    );
    let failed = of_kind(&ev, "reverted")[0]["failed_ref"]
        .as_str()
        .unwrap()
        .to_string();
    let saved = git(&fx.root, &["ls-tree", "-r", "--name-only", &failed]);
    assert!(
        saved.contains("agent.txt") && !saved.contains(".ralph"),
        "{saved}"
    );
}

/// An OpenSpec project whose story 1 has two boxes (lines 5 and 6 of
/// tasks.md); `yaml` is its spectr.yaml, if any.
fn story_project(yaml: Option<&str>) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("proj");
    let change = root.join("openspec/changes/add-thing");
    std::fs::create_dir_all(&change).unwrap();
    std::fs::write(change.join("proposal.md"), "# Add thing\n").unwrap();
    std::fs::write(
        change.join("tasks.md"),
        "# Tasks\n\n## 1. First story\n\n- [ ] 1.1 one\n- [ ] 1.2 two\n",
    )
    .unwrap();
    if let Some(yaml) = yaml {
        std::fs::write(root.join("spectr.yaml"), yaml).unwrap();
    }
    git(&root, &["init", "-q", "-b", "main"]);
    git(&root, &["config", "user.name", "Spectr Tests"]);
    git(&root, &["config", "user.email", "tests@spectr.invalid"]);
    git(&root, &["add", "-A"]);
    git(&root, &["commit", "-qm", "init"]);
    (dir, root)
}

fn run_story(fx: &Fixture, root: &std::path::Path) -> std::process::Output {
    let mut cmd = std::process::Command::new(spectr_bin());
    cmd.current_dir(root)
        .env("PATH", fx.path_env())
        .env("SPECTR_FAKE_SCRIPT", fx.state.join("script.json"))
        .env("SPECTR_FAKE_STATE", &fx.state)
        .args(["ralph", "add-thing", "--agent", "claude", "--json"])
        .args(["--max-retries", "1"])
        .stdin(std::process::Stdio::null());
    output_shown(cmd)
}

const TICK_BOTH: [&str; 2] = [
    "edit_line:openspec/changes/add-thing/tasks.md:5=- [x] 1.1 one",
    "edit_line:openspec/changes/add-thing/tasks.md:6=- [x] 1.2 two",
];

/// A story whose boxes the agent ticked, but which it never said it
/// completed (after verifying), has not completed: the attempt ends without
/// a completion signal and is retried with that reason.
#[test]
fn an_openspec_story_completes_on_its_signal_not_on_ticked_boxes() {
    let (_dir, root) = story_project(None);
    let fx = Fixture::with_files(&[], false);
    fx.script(json!({"1": [
        [TICK_BOTH[0], TICK_BOTH[1], "say:all boxes ticked"],
        ["say:verified", "complete"]
    ]}));
    let out = run_story(&fx, &root);
    assert_eq!(out.status.code(), Some(0));
    let ev = events(&out);
    assert_eq!(started(&ev), ["1#1", "1#2"]);
    let failed = &of_kind(&ev, "task_failed")[0];
    let reason = failed["outcome"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("boxes are ticked") && reason.contains("without a completion signal"),
        "{reason}"
    );
    let retry = fx.prompt("1", 2).unwrap();
    assert!(retry.contains(reason), "the retry is told why: {retry}");
    let completed = &of_kind(&ev, "task_completed")[0];
    assert_eq!(completed["outcome"]["via"], "signal");
    let md = std::fs::read_to_string(root.join("openspec/changes/add-thing/tasks.md")).unwrap();
    assert!(md.contains("- [x] 1.1 one\n- [x] 1.2 two"), "{md}");
}

/// `ralph: story_completion: boxes` keeps completing a story on its boxes.
#[test]
fn story_completion_boxes_completes_a_story_on_ticked_boxes() {
    let (_dir, root) = story_project(Some("ralph:\n  story_completion: boxes\n"));
    let fx = Fixture::with_files(&[], false);
    fx.script(json!({"1": [[TICK_BOTH[0], TICK_BOTH[1], "say:all boxes ticked"]]}));
    let out = run_story(&fx, &root);
    assert_eq!(out.status.code(), Some(0));
    let ev = events(&out);
    assert_eq!(started(&ev), ["1#1"]);
    assert_eq!(
        of_kind(&ev, "task_completed")[0]["outcome"]["via"],
        "status"
    );
}

#[test]
fn story_completion_takes_signal_or_boxes_only() {
    let (_dir, root) = story_project(Some("ralph:\n  story_completion: ticks\n"));
    let fx = Fixture::with_files(&[], false);
    let out = run_story(&fx, &root);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("spectr.yaml:2:") && err.contains("signal") && err.contains("boxes"),
        "{err}"
    );
    assert!(fx.prompt("1", 1).is_none());
}

/// A Node crash: its verdict quotes the error line, not the stack trace
/// under it (which pushes it out of the last lines kept).
#[test]
fn a_crashed_agents_reason_is_its_error_line() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    let mut steps = vec![
        json!("stderr:file:///tmp/agents/codex.js:113"),
        json!("stderr:Error: Missing optional dependency @openai/codex-linux-x64"),
    ];
    for n in 0..30 {
        steps.push(json!(format!(
            "stderr:    at frame{n} (node:internal/x:{n}:1)"
        )));
    }
    steps.push(json!("stderr:Node.js v20.20.2"));
    steps.push(json!("exit:1"));
    fx.script(json!({ "default": steps }));
    let out = fx.run(&["--yes", "--max-retries", "0", "--json"]);
    let events = events(&out);
    let ended = of_kind(&events, "task_failed");
    let text = serde_json::to_string(&ended).unwrap();
    assert!(
        text.contains("Missing optional dependency @openai/codex-linux-x64"),
        "{text}"
    );
    assert!(!text.contains("at frame"), "{text}");
}

/// `2026-11-28T10:17:23.139Z`: UTC, RFC 3339, milliseconds.
fn is_ts(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| r.into_iter().all(|i| b[i].is_ascii_digit());
    b.len() == 24
        && digits(0..4)
        && b[4] == b'-'
        && b[10] == b'T'
        && digits(11..13)
        && b[19] == b'.'
        && digits(20..23)
        && b[23] == b'Z'
}

#[test]
fn every_event_carries_its_time_on_stdout_and_in_the_journal() {
    let fx = Fixture::new(&three_tasks());
    fx.script(json!({"default": ["say:working", "mark:completed", "complete"]}));
    let out = fx.run(&["--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let ev = events(&out);
    assert!(ev.len() > 10, "{ev:?}");
    let times: Vec<&str> = ev
        .iter()
        .map(|e| e["ts"].as_str().unwrap_or_else(|| panic!("no ts: {e}")))
        .collect();
    assert!(times.iter().all(|t| is_ts(t)), "{times:?}");
    // In the order they happened (the text form sorts as the time does).
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    // The journal's lines too, with the same time in milliseconds.
    let journal = fx.run_journal();
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&journal)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(!lines.is_empty());
    for l in &lines {
        let ts = l["ts"].as_str().unwrap_or_else(|| panic!("no ts: {l}"));
        assert!(is_ts(ts), "{l}");
        let ms = l["at_ms"].as_u64().unwrap() % 1000;
        assert_eq!(&ts[20..23], format!("{ms:03}"), "{l}");
    }
}

#[test]
fn a_completed_task_put_back_to_pending_runs_again_with_fresh_tries() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("2.1", "Docs", "pending"),
    ]));
    fx.script(json!({
        "1.1": [["mark:completed", "complete"], ["write:again.txt=again", "mark:completed", "complete"]],
        "2.1": [["fail:not yet"], ["mark:completed", "complete"]],
    }));
    let first = fx.run(&["--max-retries", "0", "--on-exhaust", "abort"]);
    assert_eq!(first.status.code(), Some(1), "{}", stderr_text(&first));
    let said = String::from_utf8_lossy(&first.stdout).into_owned();
    // 1.1's status is in the tasks file: nothing for a resume to write.
    assert!(
        !said.contains("Completed in the session but not in the tasks file"),
        "{said}"
    );
    assert_eq!(fx.status("1.1"), "completed");
    // The person puts 1.1 back, and runs again, retrying what ran out.
    let tasks = fx.tasks_text();
    let again = tasks.replacen("\"completed\"", "\"pending\"", 1);
    std::fs::write(fx.change_dir.join("tasks.jsonc"), &again).unwrap();
    assert_eq!(fx.status("1.1"), "pending");
    let second = fx.run(&["--max-retries", "0", "--on-exhaust", "abort"]);
    let said = String::from_utf8_lossy(&second.stdout).into_owned();
    // Its earlier, completed attempt used no try: it runs again, and the
    // run stops where it must, on 2.1.
    assert_eq!(
        second.status.code(),
        Some(1),
        "{said}{}",
        stderr_text(&second)
    );
    assert!(fx.prompt("1.1", 2).is_some(), "{said}");
    assert!(fx.root.join("again.txt").exists());
    assert!(!said.contains("task 1.1 failed"), "{said}");
    assert!(said.contains("error: task 2.1 failed"), "{said}");
    assert!(
        !said.contains("Completed in the session but not in the tasks file"),
        "{said}"
    );
    assert_eq!(fx.status("1.1"), "completed");
    let third = fx.run(&["--max-retries", "0", "--on-exhaust", "retry"]);
    assert_eq!(third.status.code(), Some(0), "{}", stderr_text(&third));
    assert!(fx.prompt("1.1", 3).is_none(), "1.1 is not run a third time");
    assert_eq!(fx.status("2.1"), "completed");
}
