//! The live page in a real browser (headless Chromium, as Debian ships it):
//! it shows the tasks and their agents' lines; a click on skip at a
//! question skips the task and the run goes on; pause and stop work; an
//! agent's markup is shown as text and never runs; the page fits a phone.
//! Skipped, saying so, without Chromium; failing under
//! `SPECTR_REQUIRE_BROWSER=1` (`.ci/run` sets it once Chromium is there).

mod common;

use common::browser::{Browser, browser_required, chromium};
use common::*;
use serde_json::json;

fn browser() -> Option<Browser> {
    match chromium() {
        Some(program) => Some(Browser::launch(&program)),
        None => {
            assert!(
                !browser_required(),
                "a browser is required here (SPECTR_REQUIRE_BROWSER) and chromium is not installed: apt-get install chromium"
            );
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "\n*** BROWSER TEST SKIPPED ({}): chromium is not installed (apt-get install chromium) ***\n",
                std::thread::current().name().unwrap_or("?")
            );
            None
        }
    }
}

/// The URL `--serve` kept for the run of the fixture's change.
fn page_url(fx: &Fixture) -> String {
    let kept = fx.change_dir.join(".ralph/page-url");
    fx.wait_for("the page's URL", || kept.exists());
    std::fs::read_to_string(kept).unwrap().trim().to_owned()
}

#[test]
fn the_page_shows_the_run_answers_its_question_and_shows_markup_as_text() {
    let Some(mut b) = browser() else { return };
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "A", "pending"),
        ("1.2", "A", "pending"),
        ("2.1", "B", "pending"),
    ]));
    let go = fx.state.join("go");
    fx.script(json!({
        "1.1": [["say:<script>alert(1)</script><img src=x onerror=alert(2)>", "fail:never works"]],
        "2.1": [["say:working on 2.1", format!("wait_for:{}:60", go.display()), "mark:completed", "complete"]],
        "default": ["mark:completed", "complete"],
    }));
    let mut cmd = fx.ralph();
    cmd.args([
        "--json",
        "--yes",
        "--jobs",
        "2",
        "--max-retries",
        "0",
        "--serve",
    ]);
    let mut run = JsonRun::spawn(cmd);
    let url = page_url(&fx);
    b.open(&url);
    b.wait_for(
        "the question on the page",
        "document.getElementById('question').style.display === 'block'",
    );
    b.wait_for(
        "2.1's agent line",
        "[...document.querySelectorAll('[data-task=\"2.1\"] pre')].some(p => p.textContent.includes('working on 2.1'))",
    );
    // The agent's markup, as text: shown, and neither element exists.
    let shown = b.eval("document.querySelector('[data-task=\"1.1\"] pre').textContent");
    assert!(
        shown
            .as_str()
            .unwrap()
            .contains("<script>alert(1)</script><img src=x onerror=alert(2)>"),
        "{shown}"
    );
    assert_eq!(b.eval("document.querySelectorAll('img').length"), json!(0));
    assert_eq!(
        b.eval("document.scripts.length"),
        json!(1),
        "only the page's own"
    );
    // A finished task offers no restart or skip.
    assert_eq!(
        b.eval("document.querySelector('[data-task=\"1.1\"] .head .row').offsetParent === null"),
        json!(true)
    );
    // The totals as the run goes: 1.1's failed attempt counted.
    b.wait_for(
        "the totals",
        "document.getElementById('totals').textContent === '0 of 3 done · 1 attempt · $0.012'",
    );
    // A phone's width: nothing wider than the screen.
    assert_eq!(
        b.eval("document.documentElement.scrollWidth <= window.innerWidth"),
        json!(true)
    );
    let shot = b.screenshot();
    assert!(shot.starts_with(b"\x89PNG"), "a PNG");
    let target = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
    let _ = std::fs::create_dir_all(&target);
    std::fs::write(target.join("live-page.png"), &shot).unwrap();

    b.click("#question button[data-answer=skip]");
    run.until("the answer from the page", |seen| {
        seen.iter()
            .any(|e| e["event"] == "answered" && e["task"] == "1.1" && e["answer"] == "skip")
    });
    assert!(
        run.seen.iter().any(|e| e["event"] == "notice"
            && e["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("live page (pid "))),
        "who answered is shown"
    );
    b.wait_for(
        "the question gone",
        "document.getElementById('question').style.display === 'none'",
    );
    std::fs::write(&go, "").unwrap();
    assert_eq!(run.run.wait().code(), Some(1), "1.1 skipped: exit 1");
    assert_eq!(fx.status("2.1"), "completed");
    b.wait_for(
        "the run's end on the page",
        "document.getElementById('totals').textContent.startsWith('Ended (incomplete)')",
    );
    let alerts = b
        .events
        .iter()
        .filter(|(m, p)| m == "Page.javascriptDialogOpening" && p["type"] == "alert")
        .count();
    assert_eq!(alerts, 0, "no agent output ran");
}

#[test]
fn pause_and_stop_from_the_page() {
    let Some(mut b) = browser() else { return };
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "A", "pending"),
        ("1.2", "A", "pending"),
    ]));
    let go = fx.state.join("go");
    let never = fx.state.join("never");
    fx.script(json!({
        "1.1": [[format!("wait_for:{}:60", go.display()), "mark:completed", "complete"]],
        "1.2": [[format!("wait_for:{}:60", never.display()), "mark:completed", "complete"]],
    }));
    let mut cmd = fx.ralph();
    cmd.args(["--json", "--yes", "--serve"]);
    let mut run = JsonRun::spawn(cmd);
    let url = page_url(&fx);
    b.open(&url);
    b.wait_for(
        "the page live",
        "document.getElementById('conn').textContent.startsWith('live')",
    );
    b.wait_for(
        "1.1 running",
        "!!document.querySelector('[data-task=\"1.1\"].running')",
    );
    b.click("#pause");
    run.until("the pause asked", |seen| {
        seen.iter()
            .any(|e| e["message"].as_str().is_some_and(|m| m.contains(": pause")))
    });
    std::fs::write(&go, "").unwrap();
    run.until("paused", |seen| seen.iter().any(|e| e["event"] == "paused"));
    b.wait_for(
        "Resume offered",
        "document.getElementById('pause').textContent === 'Resume'",
    );
    b.click("#pause");
    run.until("1.2 started", |seen| {
        seen.iter()
            .any(|e| e["event"] == "task_started" && e["task"] == "1.2")
    });
    // A learning for the next tasks, from the page, once the page has
    // caught up with the run (on a loaded machine it lags the events).
    b.wait_for(
        "1.2 running on the page",
        "!!document.querySelector('[data-task=\"1.2\"].running') && !document.getElementById('teach').disabled",
    );
    b.eval("document.getElementById('learning').value = 'run make fixtures first'");
    b.click("#teach");
    run.until("the learning taken", |seen| {
        seen.iter().any(|e| {
            e["message"]
                .as_str()
                .is_some_and(|m| m.contains(": learn: run make fixtures first"))
        })
    });
    let learned = std::fs::read_to_string(fx.change_dir.join(".ralph/learnings.md")).unwrap();
    assert!(learned.contains("run make fixtures first"), "{learned}");
    // Stop asks first (accepted here), then stops as Ctrl+C does.
    b.click("#stop");
    assert_eq!(run.run.wait().code(), Some(130));
    assert!(
        b.events
            .iter()
            .any(|(m, p)| m == "Page.javascriptDialogOpening" && p["type"] == "confirm"),
        "stop asked first"
    );
    assert_eq!(fx.status("1.1"), "completed");
}

/// A remote lane's attempt held in its engine's queue shows as queued on
/// the page (its restart and skip offered), then as started, with its time
/// in the queue.
#[test]
fn a_remote_attempt_queued_by_its_engine_shows_as_queued_then_started() {
    let Some(mut b) = browser() else { return };
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    with_spectr_on_path(&fx);
    let done = fx.state.join("done");
    fx.script(
        json!({"1.1": [[format!("wait_for:{}:60", done.display()), "mark:completed", "complete"]]}),
    );
    let remote = bare_remote(&fx);
    let go = fx.state.join("go");
    let mut cmd = fx.ralph();
    cmd.env("SPECTR_TEST_REMOTE_QUEUED_AFTER_MS", "100").args([
        "--json",
        "--serve",
        "--lane-exec",
        &format!(
            "while [ ! -e '{}' ]; do sleep 0.05; done; {{cmd}}",
            go.display()
        ),
        "--lane-remote",
        remote.to_str().unwrap(),
    ]);
    let mut run = JsonRun::spawn(cmd);
    let url = page_url(&fx);
    b.open(&url);
    b.wait_for(
        "1.1 queued",
        "document.querySelector('[data-task=\"1.1\"]')?.className === 'task queued'",
    );
    let said = b.eval("document.querySelector('[data-task=\"1.1\"] .receipt').textContent");
    assert_eq!(said, json!("attempt 1 · queued by lane 1's engine"));
    assert_eq!(
        b.eval("document.querySelector('[data-task=\"1.1\"] .head .row').offsetParent !== null"),
        json!(true),
        "restart and skip offered"
    );
    std::fs::write(&go, "").unwrap();
    b.wait_for(
        "1.1 started after its queue",
        "document.querySelector('[data-task=\"1.1\"]').className === 'task running' && /^attempt 1 · started on .+ after \\d+ s in the queue$/.test(document.querySelector('[data-task=\"1.1\"] .receipt').textContent)",
    );
    std::fs::write(&done, "").unwrap();
    run.until("the summary", |seen| {
        seen.iter().any(|e| e["event"] == "summary")
    });
    assert_eq!(run.run.wait().code(), Some(0), "{:#?}", run.seen);
    assert!(
        run.seen.iter().any(|e| e["event"] == "attempt_running"),
        "{:#?}",
        run.seen
    );
}
