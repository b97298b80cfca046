//! Steering a run from another shell (issue 34): `spectr ralph
//! pause|resume|stop|skip <change>` reach the run through its control
//! socket, with no terminal anywhere; an agent of the run cannot steer it.

mod common;

use common::*;
use serde_json::{Value, json};

fn three() -> String {
    tasks_v1(&[
        ("1.1", "S", "pending"),
        ("1.2", "S", "pending"),
        ("1.3", "S", "pending"),
    ])
}

fn notice(seen: &[Value], text: &str) -> bool {
    seen.iter()
        .any(|e| e["event"] == "notice" && e["message"].as_str().is_some_and(|m| m.contains(text)))
}

fn started(seen: &[Value], task: &str) -> bool {
    seen.iter()
        .any(|e| e["event"] == "agent_started" && e["task"] == task)
}

#[test]
fn pause_resume_and_stop_from_another_shell() {
    let fx = Fixture::new(&three());
    let go = fx.state.join("go");
    // 1.2 waits for a word that never comes: the run is stopped in it.
    let never = fx.state.join("never");
    fx.script(json!({
        "1.1": [[format!("wait_for:{}:60", go.display()), "mark:completed", "complete"]],
        "1.2": [[format!("wait_for:{}:60", never.display()), "mark:completed", "complete"]],
        "default": ["mark:completed", "complete"],
    }));
    let mut cmd = fx.ralph();
    cmd.args(["--json", "--yes"]);
    let mut run = JsonRun::spawn(cmd);
    run.until("1.1 started", |seen| started(seen, "1.1"));

    let paused = spectr(&fx, &["ralph", "pause", CHANGE]);
    assert_eq!(paused.status.code(), Some(0));
    assert!(
        stdout_text(&paused).contains("pauses once its running tasks end"),
        "{}",
        stdout_text(&paused)
    );
    run.until("who paused it", |seen| {
        notice(seen, "spectr ralph pause (pid ")
    });
    std::fs::write(&go, "").unwrap();
    run.until("the pause", |seen| {
        seen.iter().any(|e| e["event"] == "paused")
    });
    assert!(!started(&run.seen, "1.2"), "nothing starts while paused");

    let resumed = spectr(&fx, &["ralph", "resume", CHANGE]);
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr_text(&resumed));
    run.until("1.2 started", |seen| started(seen, "1.2"));
    assert!(notice(&run.seen, "spectr ralph resume (pid "));

    let stopped = spectr(&fx, &["ralph", "stop", CHANGE]);
    assert_eq!(stopped.status.code(), Some(0), "{}", stderr_text(&stopped));
    assert_eq!(
        run.run.wait().code(),
        Some(130),
        "stopped as Ctrl+C stops it"
    );
    assert!(
        !fx.change_dir.join(".ralph/control.sock").exists(),
        "the socket goes with the run"
    );
    assert_eq!(fx.status("1.1"), "completed");

    // No run now: said so, exit 2.
    let none = spectr(&fx, &["ralph", "pause", CHANGE]);
    assert_eq!(none.status.code(), Some(2));
    assert!(
        stderr_text(&none).contains("no run of add-widget is listening"),
        "{}",
        stderr_text(&none)
    );
}

#[test]
fn an_agent_cannot_steer_its_own_run() {
    let fx = Fixture::new(&three());
    with_spectr_on_path(&fx);
    fx.script(json!({
        "1.1": [[format!("spectr:ralph stop {CHANGE}"), format!("spectr:ralph pause {CHANGE}"), "mark:completed", "complete"]],
        "default": ["mark:completed", "complete"],
    }));
    let out = fx.run(&["--json", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "the run went on to the end");
    for id in ["1.1", "1.2", "1.3"] {
        assert_eq!(fx.status(id), "completed");
    }
    let text = stdout_text(&out);
    assert!(!text.contains("spectr ralph stop (pid"), "{text}");
    assert!(
        text.contains("an agent of this run cannot steer it"),
        "{text}"
    );
}

#[test]
fn skip_needs_the_task_when_several_run_and_takes_the_one_named() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "A", "pending"),
        ("2.1", "B", "pending"),
    ]));
    let go = fx.state.join("go");
    let wait = format!("wait_for:{}:60", go.display());
    fx.script(json!({
        "1.1": [[wait.clone(), "mark:completed", "complete"]],
        "2.1": [[wait, "mark:completed", "complete"]],
    }));
    let mut cmd = fx.ralph();
    cmd.args(["--json", "--yes", "--jobs", "2"]);
    let mut run = JsonRun::spawn(cmd);
    run.until("both started", |seen| {
        started(seen, "1.1") && started(seen, "2.1")
    });

    let which = spectr(&fx, &["ralph", "skip", CHANGE]);
    assert_eq!(which.status.code(), Some(1));
    assert!(
        stderr_text(&which).contains("several tasks are running (1.1, 2.1): name one with --task"),
        "{}",
        stderr_text(&which)
    );

    let skipped = spectr(&fx, &["ralph", "skip", CHANGE, "--task", "2.1"]);
    assert_eq!(skipped.status.code(), Some(0), "{}", stderr_text(&skipped));
    run.until("2.1 skipped", |seen| {
        seen.iter()
            .any(|e| e["event"] == "task_skipped" && e["task"] == "2.1")
    });
    std::fs::write(&go, "").unwrap();
    // A skipped task leaves the change unfinished: exit 1.
    assert_eq!(run.run.wait().code(), Some(1));
    assert_eq!(fx.status("1.1"), "completed");
    assert_ne!(fx.status("2.1"), "completed");
}

#[test]
fn a_verb_needs_its_change_and_a_change_named_like_a_verb_still_runs() {
    let fx = Fixture::new(&three());
    let bare = spectr(&fx, &["ralph", "stop"]);
    assert_eq!(bare.status.code(), Some(2), "{}", stderr_text(&bare));
    // After `--`, a word is the change's name: here no change is called so.
    let named = spectr(&fx, &["ralph", "--", "stop"]);
    assert_eq!(named.status.code(), Some(2));
    assert!(
        stderr_text(&named).contains("stop"),
        "{}",
        stderr_text(&named)
    );
}

#[test]
fn a_question_waits_without_a_terminal_and_is_answered_from_another_shell() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "A", "pending"),
        ("2.1", "B", "pending"),
        ("2.2", "B", "pending"),
    ]));
    let calls = fx.state.join("calls.jsonl");
    let notify = format!("cat >> '{}'", calls.display());
    let (mut run, go) = question_with_a_busy_lane(&fx, &["--wait-for-answer", "--notify", &notify]);
    run.until("the run saying how to answer it", |seen| {
        notice(
            seen,
            "waiting for an answer: spectr ralph answer add-widget retry|skip|abort --task 1.1",
        )
    });
    // The other lane goes on while the question waits.
    std::fs::write(&go, "").unwrap();
    run.until("2.2 done meanwhile", |seen| {
        seen.iter()
            .any(|e| e["event"] == "task_completed" && e["task"] == "2.2")
    });
    assert!(
        !run.seen.iter().any(|e| e["event"] == "answered"),
        "nobody answered yet"
    );

    // `--notify` was called with the commands that answer it.
    let question_call = || {
        std::fs::read_to_string(&calls).ok().and_then(|text| {
            text.lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .find(|v| v["event"] == "question")
        })
    };
    fx.wait_for("the notify call", || question_call().is_some());
    let question = question_call().unwrap();
    let skip = question["commands"]["skip"].as_str().unwrap().to_owned();
    assert_eq!(skip, "spectr ralph answer add-widget skip --task 1.1");
    assert_eq!(question["commands"]["stop"], "spectr ralph stop add-widget");

    // About another task: refused, nothing changes.
    let wrong = spectr(&fx, &["ralph", "answer", CHANGE, "retry", "--task", "2.1"]);
    assert_eq!(wrong.status.code(), Some(1));
    assert!(
        stderr_text(&wrong).contains("the open question is about task 1.1, not 2.1"),
        "{}",
        stderr_text(&wrong)
    );

    let words: Vec<&str> = skip.split(' ').skip(1).collect();
    let answered = spectr(&fx, &words);
    assert_eq!(
        answered.status.code(),
        Some(0),
        "{}",
        stderr_text(&answered)
    );
    assert!(
        stdout_text(&answered).contains("takes `skip` for its open question about 1.1"),
        "{}",
        stdout_text(&answered)
    );
    run.until("the summary", |seen| {
        seen.iter().any(|e| e["event"] == "summary")
    });
    assert_eq!(run.run.wait().code(), Some(1), "a task skipped: exit 1");
    let seen = &run.seen;
    assert!(
        seen.iter()
            .any(|e| e["event"] == "answered" && e["task"] == "1.1" && e["answer"] == "skip"),
        "{seen:?}"
    );
    assert!(
        notice(seen, "spectr ralph answer (pid "),
        "who answered is shown"
    );
    assert_eq!(fx.status("2.1"), "completed");
    assert_eq!(fx.status("2.2"), "completed");
    assert_ne!(fx.status("1.1"), "completed");

    // No run, no question.
    let late = spectr(&fx, &["ralph", "answer", CHANGE, "retry"]);
    assert_eq!(late.status.code(), Some(2));
}

#[test]
fn an_answer_with_no_question_open_is_refused() {
    let fx = Fixture::new(&three());
    let go = fx.state.join("go");
    fx.script(json!({
        "1.1": [[format!("wait_for:{}:60", go.display()), "mark:completed", "complete"]],
        "default": ["mark:completed", "complete"],
    }));
    let mut cmd = fx.ralph();
    cmd.args(["--json", "--yes"]);
    let mut run = JsonRun::spawn(cmd);
    run.until("1.1 started", |seen| started(seen, "1.1"));
    let none = spectr(&fx, &["ralph", "answer", CHANGE, "skip"]);
    assert_eq!(none.status.code(), Some(1));
    assert!(
        stderr_text(&none).contains("refused to answer: no question is open"),
        "{}",
        stderr_text(&none)
    );
    std::fs::write(&go, "").unwrap();
    assert_eq!(run.run.wait().code(), Some(0));
}

#[test]
fn spectr_watch_shows_the_run_from_its_start_and_ends_with_it() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "A", "pending"),
        ("2.1", "B", "pending"),
        ("2.2", "B", "pending"),
    ]));
    let (mut run, go) = question_with_a_busy_lane(&fx, &["--wait-for-answer"]);
    // Attached late, no terminal: the run so far, then live.
    let mut watch = fx.spectr();
    watch
        .env("NO_COLOR", "1")
        .args(["watch", CHANGE])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let watch = Background::spawn(watch);
    let answered = spectr(&fx, &["ralph", "answer", CHANGE, "skip", "--task", "1.1"]);
    assert_eq!(
        answered.status.code(),
        Some(0),
        "{}",
        stderr_text(&answered)
    );
    std::fs::write(&go, "").unwrap();
    assert_eq!(run.run.wait().code(), Some(1));
    let out = watch.wait_with_output();
    let (text, said) = (stdout_text(&out), stderr_text(&out));
    assert_eq!(
        out.status.code(),
        Some(1),
        "the run's exit code: {text}\n{said}"
    );
    assert!(
        said.contains("Watching the run of add-widget (pid "),
        "{said}"
    );
    assert!(
        said.contains("answer it with: spectr ralph answer add-widget retry|skip|abort --task 1.1"),
        "{said}"
    );
    // From the run's start (attached after it), to its summary.
    for seen in ["3 of 3 tasks to run", "never works", "Summary:"] {
        assert!(text.contains(seen), "{seen:?} missing:\n{text}");
    }
    assert!(
        text.contains("spectr ralph answer (pid "),
        "who answered: {text}"
    );
}
