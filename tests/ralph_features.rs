//! Learnings carried between tasks, the verification named in the prompt, a
//! task's place in the run, and the agent-facing commands (`spectr task done`,
//! `spectr learn`, `spectr status`).

mod common;

use common::*;
use serde_json::json;

fn learnings(fx: &Fixture) -> String {
    std::fs::read_to_string(fx.change_dir.join(".ralph/learnings.md")).unwrap_or_default()
}

#[test]
fn a_learning_from_1_1_reaches_the_prompts_of_1_2_and_2_1() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
        ("2.1", "Docs", "pending"),
    ]));
    with_spectr_on_path(&fx);
    fx.script(json!({
        "1.1": ["learn:run make gen before the tests", "mark:completed",
                "result:Done.\\n<learning>widgets live in src/w</learning>\\n<promise>COMPLETE</promise>"],
        "default": ["mark:completed", "complete"]
    }));
    let out = fx.run(&["--json"]);
    assert_eq!(out.status.code(), Some(0));
    let ev = events(&out);
    let learned: Vec<String> = of_kind(&ev, "learning")
        .iter()
        .map(|e| {
            format!(
                "{} {}",
                e["task"].as_str().unwrap(),
                e["text"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        learned,
        [
            "1.1 run make gen before the tests",
            "1.1 widgets live in src/w"
        ]
    );
    let first = fx.prompt("1.1", 1).unwrap();
    assert!(first.contains("spectr learn"), "{first}");
    assert!(first.contains("Nothing has been recorded yet."), "{first}");
    for task in ["1.2", "2.1"] {
        let p = fx.prompt(task, 1).unwrap();
        assert!(
            p.contains("- [1.1] run make gen before the tests"),
            "{task}: {p}"
        );
        assert!(p.contains("- [1.1] widgets live in src/w"), "{task}: {p}");
    }
    let file = learnings(&fx);
    assert!(file.starts_with("# Learnings"), "{file}");
    // spectr's own file: never committable.
    let porcelain = git(
        &fx.root,
        &["status", "--porcelain", "--untracked-files=all"],
    );
    assert!(!porcelain.contains("learnings"), "{porcelain}");
}

/// With `--jobs`, a lane's `spectr learn` writes the lane's copy of the file
/// (header and all): only its entry reaches the user's file and later prompts.
/// Another lane's learning reaches the user's learnings.md while a task
/// runs: it is that lane's, never this task's too (2.1 waits until 1.1's
/// learning is in the user's file, so the order is certain).
#[test]
fn a_learning_of_one_lane_is_never_counted_again_for_another() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("2.1", "Docs", "pending"),
    ]));
    with_spectr_on_path(&fx);
    let users_file = fx.change_dir.join(".ralph/learnings.md");
    fx.script(json!({
        "1.1": ["learn:run make gen before the tests", "mark:completed", "complete"],
        "2.1": [format!("wait_for:{}:60", users_file.display()), "mark:completed", "complete"]
    }));
    let out = fx.run(&["--json", "--jobs", "2"]);
    assert_eq!(out.status.code(), Some(0));
    let learned: Vec<String> = of_kind(&events(&out), "learning")
        .iter()
        .map(|e| {
            format!(
                "{} {}",
                e["task"].as_str().unwrap(),
                e["text"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(learned, ["1.1 run make gen before the tests"]);
    let file = learnings(&fx);
    assert_eq!(file.matches("run make gen").count(), 1, "{file}");
}

#[test]
fn a_learning_made_in_a_lane_arrives_without_the_files_header() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
        ("2.1", "Docs", "pending"),
    ]));
    with_spectr_on_path(&fx);
    fx.script(json!({
        "1.1": ["learn:run make gen before the tests", "mark:completed", "complete"],
        "default": ["mark:completed", "complete"]
    }));
    let out = fx.run(&["--json", "--jobs", "2"]);
    assert_eq!(out.status.code(), Some(0));
    let ev = events(&out);
    let learned: Vec<String> = of_kind(&ev, "learning")
        .iter()
        .map(|e| {
            format!(
                "{} {}",
                e["task"].as_str().unwrap(),
                e["text"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(learned, ["1.1 run make gen before the tests"]);
    let file = learnings(&fx);
    assert_eq!(
        file.matches("What earlier tasks found out").count(),
        1,
        "the header once, as the header: {file}"
    );
    assert!(!file.contains("- [1.1] # Learnings"), "{file}");
    assert!(
        file.ends_with("- [1.1] run make gen before the tests\n"),
        "{file}"
    );
    let later = fx.prompt("1.2", 1).unwrap();
    assert!(
        later.contains("- [1.1] run make gen before the tests"),
        "{later}"
    );
    for task in ["1.1", "1.2", "2.1"] {
        let p = fx.prompt(task, 1).unwrap();
        assert!(!p.contains("] # Learnings"), "{task}: {p}");
        assert!(!p.contains("What earlier tasks found out"), "{task}: {p}");
    }
}

#[test]
fn learnings_survive_a_revert_and_a_persons_edit_is_what_later_prompts_get() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
    ]));
    fx.script(json!({
        "1.1": [["result:<learning>the db needs a migration</learning>\\n<promise>FAILED: no db</promise>"],
                ["mark:completed", "complete"]],
        "default": ["mark:completed", "complete"]
    }));
    let out = fx.run(&["--json"]);
    assert_eq!(out.status.code(), Some(0));
    let retry = fx.prompt("1.1", 2).unwrap();
    assert!(retry.contains("the db needs a migration"), "{retry}");

    // A person rewrites the file; the next run's prompts carry their text.
    std::fs::write(
        fx.change_dir.join(".ralph/learnings.md"),
        "- EDITED BY HAND\n",
    )
    .unwrap();
    std::fs::write(
        fx.change_dir.join("tasks.jsonc"),
        tasks_v1(&[("1.3", "Core", "pending")]),
    )
    .unwrap();
    assert_eq!(fx.run(&["--json"]).status.code(), Some(0));
    let p = fx.prompt("1.3", 1).unwrap();
    assert!(
        p.contains("EDITED BY HAND") && !p.contains("migration"),
        "{p}"
    );
}

#[test]
fn the_prompt_names_the_verify_command_and_the_protocol() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx.script(json!({"default": ["mark:completed", "complete"]}));
    assert_eq!(
        fx.run(&["--verify", "test -f README.txt"]).status.code(),
        Some(0)
    );
    let p = fx.prompt("1.1", 1).unwrap();
    assert!(p.contains("`test -f README.txt`"), "{p}");
    assert!(p.contains("fix what fails and run it again"), "{p}");
    assert!(
        p.contains("focus on the scenarios relevant to this task"),
        "{p}"
    );
    assert!(p.contains("FAILED is only for what you cannot fix"), "{p}");
    assert!(p.contains("task done 1.1"), "{p}");

    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx.script(json!({"default": ["mark:completed", "complete"]}));
    assert_eq!(fx.run(&[]).status.code(), Some(0));
    let p = fx.prompt("1.1", 1).unwrap();
    assert!(p.contains("No verification command is set"), "{p}");
}

#[test]
fn a_template_may_place_verify_and_learnings() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    std::fs::write(
        fx.root.join("spectr/ralph-prompt.md"),
        "Task ID: {{task_id}}\nTasks file: {{tasks_file}}\nV={{verify}}\nL={{learnings}}\n",
    )
    .unwrap();
    fx.script(json!({"default": ["mark:completed", "complete"]}));
    assert_eq!(fx.run(&["--verify", "true"]).status.code(), Some(0));
    let p = fx.prompt("1.1", 1).unwrap();
    assert!(
        p.contains("V=This run verifies every task with `true`"),
        "{p}"
    );
    assert!(p.contains("L=Learnings are kept in"), "{p}");
}

#[test]
fn task_started_says_task_n_of_m_and_a_retry_keeps_its_place() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
        ("2.1", "Docs", "completed"),
        ("3.1", "Tests", "pending"),
    ]));
    fx.script(json!({"1.2": [["fail:once"], ["mark:completed", "complete"]], "default": ["mark:completed", "complete"]}));
    let out = fx.run(&["--json"]);
    assert_eq!(out.status.code(), Some(0));
    let places: Vec<String> = of_kind(&events(&out), "task_started")
        .iter()
        .map(|e| {
            format!(
                "{}#{} {}/{}",
                e["task"].as_str().unwrap(),
                e["attempt"],
                e["index"],
                e["count"]
            )
        })
        .collect();
    assert_eq!(places, ["1.1#1 1/3", "1.2#1 2/3", "1.2#2 2/3", "3.1#1 3/3"]);

    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("2.1", "Docs", "pending"),
    ]));
    fx.script(json!({"default": ["mark:completed", "complete"]}));
    let out = fx.run(&[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("[2.1] Docs: Do task 2.1 (attempt 1) · task 2 of 2"),
        "{text}"
    );
}

#[test]
fn the_agent_marks_its_task_with_spectr_task_done() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
    ]));
    with_spectr_on_path(&fx);
    // Another change with an unfinished run: only SPECTR_RALPH_CHANGE, which the
    // run sets for its agents, tells the command which change is meant.
    let other = fx.root.join("spectr/changes/other-change");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("proposal.md"), "# Other\n").unwrap();
    std::fs::write(other.join(".ralph-session.json"), "{}").unwrap();
    // The agent never says COMPLETE: the status edit alone completes the task.
    fx.script(json!({"default": ["task_done", "hang"]}));
    let before = fx.tasks_text();
    // The timeout is a hang guard: without the variable the agent would hang.
    let out = fx.run(&["--json", "--max-retries", "0", "--task-timeout", "30s"]);
    assert_eq!(out.status.code(), Some(0));
    let ev = events(&out);
    for e in of_kind(&ev, "task_completed") {
        assert_eq!(e["outcome"]["via"], "status", "{e}");
    }
    assert_eq!(fx.status("1.1"), "completed");
    // Byte-exact: only the two status values changed.
    let after = fx.tasks_text();
    assert_eq!(
        after,
        before.replace("\"pending\"", "\"completed\""),
        "only the status values change"
    );
}

#[test]
fn task_done_by_hand_sets_statuses_and_refuses_bad_ids() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
    ]));
    let out = spectr(&fx, &["task", "done", "1.2"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("Task 1.2 marked completed"));
    assert_eq!(fx.status("1.2"), "completed");
    assert_eq!(
        spectr(&fx, &["task", "done", "1.2", "--status", "in_progress"])
            .status
            .code(),
        Some(0)
    );
    assert_eq!(fx.status("1.2"), "in_progress");
    let out = spectr(&fx, &["task", "done", "9.9"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no task '9.9'") && err.contains("1.1, 1.2"),
        "{err}"
    );
    // The change by name, and from the environment the run gives its agents.
    let out = fx
        .spectr()
        .env("SPECTR_RALPH_CHANGE", "no-such-change")
        .args(["task", "done", "1.1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "the variable is obeyed");
    assert_eq!(
        spectr(&fx, &["task", "done", "1.1", "--change", "add-w"])
            .status
            .code(),
        Some(0)
    );
    assert_eq!(fx.status("1.1"), "completed");
}

#[test]
fn two_active_changes_need_a_name_unless_one_has_a_run() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    let other = fx.root.join("spectr/changes/other-change");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("proposal.md"), "# Other\n").unwrap();
    let out = spectr(&fx, &["learn", "x"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("add-widget, other-change") && err.contains("--change"),
        "{err}"
    );
    // An unfinished run picks its change.
    fx.script(json!({"1.1": [["fail:no"]]}));
    assert_eq!(
        fx.run(&["--json", "--max-retries", "0"]).status.code(),
        Some(1)
    );
    let out = spectr(&fx, &["learn", "the", "cache", "is", "stale"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        learnings(&fx).contains("- the cache is stale"),
        "{}",
        learnings(&fx)
    );
}

#[test]
fn status_shows_where_the_run_stands() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
        ("2.1", "Docs", "pending"),
    ]));
    let out = spectr(&fx, &["status"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("add-widget: 0 of 3 tasks completed"),
        "{text}"
    );
    assert!(text.contains("Run: no session"), "{text}");
    // What a run (one task at a time by default) starts first.
    assert!(text.contains("Next: 1.1\n"), "{text}");
    // spectr.yaml's jobs: what such a run starts at once.
    std::fs::write(fx.root.join("spectr.yaml"), "ralph:\n  jobs: 2\n").unwrap();
    let text = String::from_utf8_lossy(&spectr(&fx, &["status"]).stdout).to_string();
    assert!(text.contains("Next: 1.1, 2.1\n"), "{text}");
    std::fs::remove_file(fx.root.join("spectr.yaml")).unwrap();

    fx.script(json!({"1.1": [["fail:never"]], "default": ["mark:completed", "complete"]}));
    assert_eq!(
        fx.run(&["--json", "--max-retries", "0", "--on-exhaust", "skip"])
            .status
            .code(),
        Some(1)
    );
    let out = spectr(&fx, &["status", "--json"]);
    let st: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(st["completed"], 1);
    assert_eq!(st["total"], 3);
    assert_eq!(st["session"], true);
    assert_eq!(
        st["skipped"],
        json!(["1.1", "1.2"]),
        "1.1 and its dependent"
    );
    assert_eq!(st["next"], json!([]));
    let text = String::from_utf8_lossy(&spectr(&fx, &["status"]).stdout).to_string();
    assert!(
        text.contains("Skipped: 1.1, 1.2") && text.contains("Next: nothing left"),
        "{text}"
    );
}

#[test]
fn without_an_id_and_without_a_terminal_it_lists_the_ids_and_exits_2() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    let out = fx
        .spectr()
        .args(["ralph", "--agent", "claude"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("active changes: add-widget"), "{err}");
    assert!(fx.prompt("1.1", 1).is_none());
}

#[test]
fn spectr_yaml_ralph_section_sets_defaults_and_flags_win() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    std::fs::write(
        fx.root.join("spectr.yaml"),
        "ralph:\n  verify: test -f keep.txt\n  max_retries: 0\n  on_exhaust: skip\n",
    )
    .unwrap();
    fx.script(json!({"1.1": [["fail:no"], ["mark:completed", "complete"]]}));
    let out = fx.run(&["--json"]);
    let ev = events(&out);
    assert_eq!(of_kind(&ev, "run_started")[0]["max_retries"], 0);
    assert_eq!(of_kind(&ev, "task_skipped").len(), 1, "on_exhaust: skip");
    assert_eq!(out.status.code(), Some(1));
    let p = fx.prompt("1.1", 1).unwrap();
    assert!(p.contains("`test -f keep.txt`"), "{p}");

    // A flag wins over the file.
    let out = fx.run(&[
        "--json",
        "--fresh",
        "--max-retries",
        "1",
        "--verify",
        "true",
    ]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(of_kind(&events(&out), "run_started")[0]["max_retries"], 1);
    assert!(fx.prompt("1.1", 2).unwrap().contains("`true`"));

    // A typo is an error naming the file and line.
    std::fs::write(fx.root.join("spectr.yaml"), "ralph:\n  max_retry: 2\n").unwrap();
    let out = fx.run(&[]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("spectr.yaml:2:") && err.contains("max_retry"),
        "{err}"
    );
}

#[test]
fn a_new_learning_is_shown_in_the_human_output() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx.script(json!({"default": ["mark:completed",
        "result:Done.\\n<learning>widgets live in src/w</learning>\\n<promise>COMPLETE</promise>"]}));
    let out = fx.run(&[]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("[1.1] learning: widgets live in src/w"),
        "{text}"
    );
}

fn context_of(fx: &Fixture, task: &str, n: u32) -> String {
    std::fs::read_to_string(fx.state.join("context").join(format!("{task}-{n}.txt")))
        .unwrap_or_else(|e| panic!("no context saved for {task} #{n}: {e}"))
}

/// `spectr context`, run by an agent that lost its context, prints its
/// prompt again: the same text, retry reason, verification and learnings
/// included; it finds the task from the run.
#[test]
fn spectr_context_prints_the_running_tasks_prompt_again() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
    ]));
    with_spectr_on_path(&fx);
    fx.script(json!({
        "1.1": [
            ["learn:the db needs a migration", "fail:no db yet"],
            ["context", "mark:completed", "complete"]
        ],
        "default": ["context", "mark:completed", "complete"]
    }));
    let out = fx.run(&["--json", "--verify", "true"]);
    assert_eq!(out.status.code(), Some(0));
    let prompt = fx.prompt("1.1", 2).unwrap();
    assert!(prompt.contains("no db yet") && prompt.contains("the db needs a migration"));
    assert!(prompt.contains("`true`"), "{prompt}");
    assert_eq!(context_of(&fx, "1.1", 1), prompt);
    assert_eq!(context_of(&fx, "1.2", 1), fx.prompt("1.2", 1).unwrap());
    // The prompt names the command.
    assert!(prompt.contains("spectr context"), "{prompt}");
}

/// In a lane the agent's folder is the lane: `spectr context` still prints
/// the prompt it got (the lane's tasks file, the run's learnings and
/// verification), for each of two tasks running at once.
#[test]
fn spectr_context_in_lanes_prints_each_tasks_own_prompt() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("2.1", "Docs", "pending"),
    ]));
    with_spectr_on_path(&fx);
    let ralph = fx.change_dir.join(".ralph");
    std::fs::create_dir_all(&ralph).unwrap();
    std::fs::write(ralph.join(".gitignore"), "*\n").unwrap();
    std::fs::write(
        ralph.join("learnings.md"),
        "# Learnings\n\n- [0.1] widgets live in src/w\n",
    )
    .unwrap();
    let sync = |name: &str| fx.state.join("sync").join(name).display().to_string();
    fx.script(json!({
        "1.1": [format!("touch:{}", sync("a")), format!("wait_for:{}:30", sync("b")),
                "context", "mark:completed", "complete"],
        "2.1": [format!("touch:{}", sync("b")), format!("wait_for:{}:30", sync("a")),
                "context", "mark:completed", "complete"]
    }));
    let out = fx.run(&["--json", "--jobs", "2", "--verify", "true"]);
    assert_eq!(out.status.code(), Some(0));
    for task in ["1.1", "2.1"] {
        let prompt = fx.prompt(task, 1).unwrap();
        assert!(prompt.contains("widgets live in src/w"), "{prompt}");
        assert!(prompt.contains("lanes/"), "a lane's tasks file: {prompt}");
        assert_eq!(context_of(&fx, task, 1), prompt, "{task}");
    }
}

/// Outside a run: the task is named with `--task`; without it, or with an
/// id that is not a task, a clear error (exit 2).
#[test]
fn spectr_context_by_hand_needs_a_task() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
    ]));
    let out = spectr(&fx, &["context"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--task"), "{err}");
    let out = spectr(&fx, &["context", "--task", "1.2"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Task ID: 1.2") && text.contains("PROPOSAL-MARKER"),
        "{text}"
    );
    assert!(
        text.contains("DESIGN-MARKER") && text.contains("SPEC-MARKER"),
        "{text}"
    );
    let out = spectr(&fx, &["context", "--task", "9.9"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("9.9") && err.contains("1.1, 1.2"), "{err}");
}

/// `spectr status` while the fake agent holds 1.1 (it waits for a file the
/// test creates): Next names what the loop starts once 1.1 ends.
fn status_while_1_1_runs(fx: &Fixture, extra: &[&str]) -> String {
    let started = fx.state.join("1.1-started");
    let release = fx.state.join("release-1.1");
    fx.script(json!({
        "1.1": [format!("touch:{}", started.display()),
                format!("wait_for:{}:60", release.display()),
                "mark:completed", "complete"],
        "default": ["mark:completed", "complete"]
    }));
    let mut cmd = fx.ralph();
    cmd.args(["--json"]).args(extra);
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut run = Background::spawn(cmd);
    fx.wait_for("the agent to start 1.1", || started.exists());
    let text = String::from_utf8_lossy(&spectr(fx, &["status"]).stdout).to_string();
    std::fs::write(&release, "").unwrap();
    assert!(run.wait().success());
    text
}

#[test]
fn status_names_the_task_the_loop_starts_after_the_running_one() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
        ("2.1", "Docs", "pending"),
    ]));
    let text = status_while_1_1_runs(&fx, &[]);
    assert!(text.contains("Working on: 1.1 (attempt 1)"), "{text}");
    // One at a time: 1.2 follows 1.1 (its lane comes first), not 2.1.
    assert!(text.contains("Next: 1.2\n"), "{text}");

    // One lane: its next task is queued, not "nothing left".
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
    ]));
    let text = status_while_1_1_runs(&fx, &[]);
    assert!(text.contains("Next: 1.2\n"), "{text}");

    // The last task: nothing follows it (not "nothing left that can run").
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    let text = status_while_1_1_runs(&fx, &[]);
    assert!(text.contains("Next: nothing after 1.1 "), "{text}");
}

#[test]
fn status_with_two_slots_names_what_each_frees_slot_takes() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
        ("2.1", "Docs", "pending"),
        ("2.2", "Docs", "pending"),
        ("3.1", "More", "pending"),
    ]));
    fx.script(json!({"default": ["mark:completed", "complete"]}));
    let text = status_while_1_1_runs(&fx, &["--jobs", "2"]);
    // 2.1 ran beside 1.1 and may be done or running; 1.1's slot then takes
    // 1.2 (lane order), never 3.1 ahead of it.
    let next = text
        .lines()
        .find_map(|l| l.strip_prefix("Next: "))
        .unwrap_or_default()
        .to_string();
    assert!(next.starts_with("1.2"), "{text}");
    assert!(!next.contains("1.1"), "{text}");
}

#[test]
fn status_counts_one_task_in_the_singular() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    let out = spectr(&fx, &["status"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("add-widget: 0 of 1 task completed, 0 in progress, 1 pending\n"),
        "{text}"
    );
}
