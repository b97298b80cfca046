//! Unattended runs end to end (issue 22): the run's budget, the notify
//! command, and the report of a finished run. Fake agent only.

mod common;

use common::*;
use serde_json::json;

fn five_tasks() -> String {
    tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
        ("1.3", "Core", "pending"),
        ("1.4", "Core", "pending"),
        ("1.5", "Core", "pending"),
    ])
}

#[test]
fn the_budget_stops_after_exactly_the_attempts_it_allows_and_a_resume_remembers_it() {
    let fx = Fixture::new(&five_tasks());
    fx.script(json!({"default": ["cost:0.40", "mark:completed", "complete"]}));
    let out = fx.run(&["--budget-usd", "1.00", "--json"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr_text(&out));
    let ev = events(&out);
    // $0.40, $0.80, $1.20: the third attempt starts under the budget, no fourth.
    assert_eq!(started(&ev), ["1.1#1", "1.2#1", "1.3#1"]);
    let reached = of_kind(&ev, "budget_reached");
    assert_eq!(reached.len(), 1, "{ev:?}");
    assert_eq!(reached[0]["budget"]["usd"], json!(1.0));
    let spent = reached[0]["spent"]["usd"].as_f64().unwrap();
    assert!((spent - 1.2).abs() < 1e-9, "{spent}");
    let summary = &of_kind(&ev, "summary")[0];
    assert_eq!(summary["end"], "budget");
    assert_eq!(summary["session"]["saved"], true);
    assert!(fx.session_path().is_file(), "the session is kept");

    // The same budget again: the session remembers what was spent.
    let out = fx.run(&["--budget-usd", "1.00", "--resume"]);
    assert_eq!(out.status.code(), Some(3));
    let text = stdout_text(&out);
    assert!(
        text.contains(
            "Budget of $1.00 reached ($1.20 spent); run again with a larger --budget-usd to go on"
        ),
        "{text}"
    );
    assert!(text.contains("$1.20 of $1.00 budget"), "{text}");
    assert!(fx.prompt("1.4", 1).is_none(), "no attempt started");

    // A larger one goes on from there.
    let out = fx.run(&["--budget-usd", "1.50", "--resume", "--json"]);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(started(&events(&out)), ["1.4#1"]);
    assert_eq!(fx.status("1.5"), "pending");
}

#[test]
fn the_token_budget_counts_input_and_output_tokens() {
    let fx = Fixture::new(&five_tasks());
    fx.script(json!({"default": ["mark:completed", "complete"]}));
    // Each attempt reports 1,000 input, 200 output and 500 cache-read tokens
    // (the fake agent's Claude receipt): 1,200 count, cache reads do not.
    // 2,500 allows a third attempt (2,400 spent); counting the cache
    // (1,700 an attempt) would have stopped after two.
    let out = fx.run(&["--budget-tokens", "2500", "--json"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr_text(&out));
    let ev = events(&out);
    let receipt = &of_kind(&ev, "task_completed")[0]["receipt"];
    assert_eq!(receipt["tokens"]["input"], 1000, "{receipt}");
    assert_eq!(receipt["tokens"]["output"], 200, "{receipt}");
    assert_eq!(receipt["tokens"]["cache_read"], 500, "{receipt}");
    assert_eq!(started(&ev), ["1.1#1", "1.2#1", "1.3#1"]);
    let reached = &of_kind(&ev, "budget_reached")[0];
    assert_eq!(reached["spent"]["tokens"], 3600, "{reached}");
    assert_eq!(reached["budget"]["tokens"], 2500, "{reached}");
}

/// The notify command every test gives: stdin appended to `notified.jsonl`.
fn appending(fx: &Fixture) -> (String, std::path::PathBuf) {
    let file = fx.state.join("notified.jsonl");
    (format!("cat >> '{}'", file.display()), file)
}

/// The events the notify command received, each checked to be one JSON
/// object on a line of its own.
fn notified(file: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

fn kinds(events: &[serde_json::Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["event"].as_str().unwrap_or("?").to_string())
        .collect()
}

#[test]
fn notify_gets_the_budget_reached_and_the_summary_as_json() {
    let fx = Fixture::new(&five_tasks());
    fx.script(json!({"default": ["cost:0.60", "mark:completed", "complete"]}));
    let (cmd, file) = appending(&fx);
    let out = fx.run(&["--budget-usd", "1", "--notify", &cmd]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr_text(&out));
    let got = notified(&file);
    assert_eq!(kinds(&got), ["budget_reached", "summary"]);
    assert_eq!(got[1]["end"], "budget");
    assert_eq!(got[1]["totals"]["completed"], 2);
    // Its output and how it ended are in the run's log.
    let log = std::fs::read_dir(fx.change_dir.join(".ralph/transcripts"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
        .join("notify.log");
    let log = std::fs::read_to_string(&log).unwrap();
    assert_eq!(log.matches("--- exited 0").count(), 2, "{log}");
}

#[test]
fn notify_gets_a_long_rate_limit_wait_and_the_end_of_an_interrupted_run() {
    let fx = Fixture::new(&five_tasks());
    fx.script(json!({"default": ["rate_limit:3600"]}));
    let (cmd, file) = appending(&fx);
    let mut cmd_line = fx.ralph();
    cmd_line.args(["--json", "--notify", &cmd]);
    let mut run = JsonRun::spawn(cmd_line);
    run.until("the rate-limit wait", |ev| {
        ev.iter().any(|e| e["event"] == "rate_limit_wait")
    });
    fx.wait_for("the wait to be notified", || {
        kinds(&notified(&file)).contains(&"rate_limit_wait".to_string())
    });
    run.run.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(run.run.wait().code(), Some(130));
    let got = notified(&file);
    assert_eq!(kinds(&got), ["rate_limit_wait", "summary"]);
    assert!(got[0]["wait_secs"].as_u64().unwrap() > 60, "{:?}", got[0]);
    assert_eq!(got[1]["end"], "interrupted");
}

#[test]
fn a_hanging_notify_command_is_stopped_and_the_run_ends_as_it_would() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx.script(json!({"default": ["mark:completed", "complete"]}));
    let pid_file = fx.state.join("notify.pid");
    let cmd = format!("echo $$ > '{}'; exec sleep 300", pid_file.display());
    let mut ralph = fx.ralph();
    ralph
        .args(["--notify", &cmd])
        .env("SPECTR_TEST_NOTIFY_TIMEOUT_MS", "300");
    let out = output_shown(ralph);
    assert_eq!(
        out.status.code(),
        Some(0),
        "a notify failure never fails the run"
    );
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        !alive(pid),
        "the hanging command was stopped with its group"
    );
    let transcripts = fx.change_dir.join(".ralph/transcripts");
    let log = std::fs::read_dir(transcripts)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
        .join("notify.log");
    let log = std::fs::read_to_string(&log).unwrap();
    assert!(
        log.contains("still running after 300 ms: stopped with its process group"),
        "{log}"
    );
}

#[test]
fn notify_gets_the_retry_skip_abort_question() {
    use common::pty::{DOWN, exit_code, spawn};
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("2.1", "Docs", "pending"),
    ]));
    fx.script(json!({"1.1": [["fail:never works"]], "default": ["mark:completed", "complete"]}));
    let (cmd, file) = appending(&fx);
    let mut s = spawn(
        &fx,
        &[
            "--max-retries",
            "0",
            "--on-exhaust",
            "prompt",
            "--notify",
            &cmd,
        ],
    );
    s.expect("retry, skip").unwrap();
    fx.wait_for("the question to be notified", || {
        kinds(&notified(&file)).contains(&"question".to_string())
    });
    s.send(DOWN).unwrap();
    s.send("\r").unwrap();
    s.expect("Summary:").unwrap();
    assert_eq!(exit_code(&mut s), Some(1));
    let got = notified(&file);
    assert_eq!(kinds(&got), ["question", "summary"]);
    assert_eq!(got[0]["task"], "1.1");
    assert_eq!(got[1]["end"], "incomplete");
}

/// A scripted run worth a report: a failure reverted and retried, a
/// learning, files written, costs and tokens.
fn reported_run() -> Fixture {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
        ("2.1", "Docs", "pending"),
    ]));
    fx.script(json!({
        "1.1": [
            ["write:src/core.rs=broken", "cost:0.05", "fail:tests red"],
            ["write:src/core.rs=fn core() {}", "learn:run cargo test before COMPLETE", "cost:0.07", "mark:completed", "complete"],
        ],
        "1.2": [["write:src/more.rs=more", "append:README.txt=more", "cost:0.04", "mark:completed", "complete"]],
        "2.1": [["write:docs/guide.md=# Guide", "cost:0.02", "mark:completed", "complete"]],
    }));
    with_spectr_on_path(&fx);
    let out = fx.run(&[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    fx
}

/// Times, durations and the temporary folder differ from run to run.
fn normalise_report(text: &str, fx: &Fixture) -> String {
    let root = fx.root.display().to_string();
    let text = text.replace(&root, "<root>");
    let mut out = String::new();
    for line in text.lines() {
        // A task's commit id: its date makes it differ from run to run.
        let line = match line
            .strip_prefix("Commit: `")
            .and_then(|rest| rest.split_once('`'))
        {
            Some((id, _)) if id.len() == 10 => line.replace(id, "<commit>"),
            _ => line.to_string(),
        };
        let line = line.as_str();
        // `0.3s`, `12s`, `1m 02s`: any duration in a table cell.
        let cells: Vec<String> = line
            .split(" | ")
            .map(|c| {
                let c2 = c.trim();
                let is_dur = !c2.is_empty()
                    && c2.chars().next().is_some_and(|ch| ch.is_ascii_digit())
                    && (c2.ends_with('s') || c2.ends_with('m') || c2.ends_with('h'))
                    && c2
                        .chars()
                        .all(|ch| ch.is_ascii_digit() || ".smh ".contains(ch));
                if is_dur {
                    "<time>".to_string()
                } else {
                    c.to_string()
                }
            })
            .collect();
        out.push_str(&cells.join(" | "));
        out.push('\n');
    }
    out
}

#[test]
fn the_markdown_report_of_a_scripted_run_matches_its_golden_file() {
    let fx = reported_run();
    let out = output_shown({
        let mut c = fx.spectr();
        c.args(["report", "add-widget"]);
        c
    });
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let got = normalise_report(&stdout_text(&out), &fx);
    let golden =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/report-sample.md");
    if std::env::var_os("SPECTR_UPDATE_GOLDEN").is_some_and(|v| v == "1") {
        std::fs::write(&golden, &got).unwrap();
    }
    let want = std::fs::read_to_string(&golden).unwrap_or_default();
    assert_eq!(
        got, want,
        "the report changed; if meant, refresh with SPECTR_UPDATE_GOLDEN=1 cargo test --test ralph_unattended"
    );
}

/// Every element closed, every attribute quoted, every entity known: the
/// page parses as XML (stricter than any HTML parser).
fn assert_well_formed(page: &str) {
    let body = page
        .strip_prefix("<!DOCTYPE html>")
        .expect("starts with its doctype");
    let mut reader = quick_xml::Reader::from_str(body);
    reader.config_mut().check_end_names = true;
    let mut depth = 0i32;
    let mut elements = 0;
    loop {
        match reader.read_event() {
            Ok(quick_xml::events::Event::Eof) => break,
            Ok(quick_xml::events::Event::Start(e)) => {
                depth += 1;
                elements += 1;
                for a in e.attributes() {
                    let a = a.unwrap_or_else(|e| panic!("bad attribute: {e}"));
                    a.normalized_value(quick_xml::XmlVersion::Implicit1_0)
                        .expect("attribute value unescapes");
                }
            }
            Ok(quick_xml::events::Event::End(_)) => depth -= 1,
            Ok(quick_xml::events::Event::Empty(_)) => elements += 1,
            Ok(quick_xml::events::Event::GeneralRef(r)) => {
                // Only what XML itself knows: a character or the five.
                let known = r.is_char_ref() || matches!(&*r, "amp" | "lt" | "gt" | "quot" | "apos");
                assert!(known, "unknown entity &{};", &*r);
                if r.is_char_ref() {
                    r.resolve_char_ref().expect("a valid character reference");
                }
            }
            Ok(_) => {}
            Err(e) => panic!(
                "not well-formed at byte {}: {e}\n{}",
                reader.buffer_position(),
                page
            ),
        }
    }
    assert_eq!(depth, 0, "every element is closed");
    assert!(elements > 50, "a real page: {elements} elements");
}

#[test]
fn the_html_report_parses_and_refers_to_nothing_outside() {
    let fx = reported_run();
    let file = fx.state.join("report.html");
    let out = output_shown({
        let mut c = fx.spectr();
        c.args(["report", "add-widget", "--html"]).arg(&file);
        c
    });
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    assert!(stdout_text(&out).contains("# Run report: add-widget"));
    let page = std::fs::read_to_string(&file).unwrap();
    assert_well_formed(&page);
    for outside in ["http://", "https://", "@import", "src=", "href=", "url("] {
        assert!(!page.contains(outside), "{outside} in the page");
    }
    // The timeline: one bar per attempt, coloured by outcome.
    assert_eq!(page.matches("<rect class=\"completed\"").count(), 3);
    assert_eq!(page.matches("<rect class=\"failed\"").count(), 1);
    assert!(page.contains("<svg"), "inline SVG");
    // MiniJinja escapes `/` as a character reference.
    let text = page.replace("&#x2f;", "/");
    assert!(text.contains("git show refs/spectr/ralph/@main/add-widget/1.1/1/failed --stat"));
    assert!(page.contains("run cargo test before COMPLETE"));
}

#[test]
fn the_report_of_a_parallel_run_says_what_each_lane_merged() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("2.1", "Docs", "pending"),
    ]));
    fx.script(json!({
        "1.1": [["write:src/core.rs=core", "mark:completed", "complete"]],
        "2.1": [["write:docs/guide.md=guide", "mark:completed", "complete"]],
    }));
    let out = fx.run(&["--jobs", "2"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let out = output_shown({
        let mut c = fx.spectr();
        c.args(["report", "add-widget"]);
        c
    });
    let text = stdout_text(&out);
    assert!(text.contains("| lane | merged | conflicted |"), "{text}");
    assert!(text.contains("| 1 | 1.1 | – |"), "{text}");
    assert!(text.contains("| 2 | 2.1 | – |"), "{text}");
    assert!(text.contains("- attempt 1: `src/core.rs`"), "{text}");
}

/// Two lanes append to one file from the same start: one merges, the other
/// conflicts. Past `--max-conflicts 0` under `--on-exhaust skip` nobody is
/// asked, so the notify command is called for it; the report names the
/// lane that conflicted.
#[test]
fn notify_gets_a_conflict_past_the_limit_and_the_report_names_the_conflicted_lane() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("2.1", "Docs", "pending"),
    ]));
    std::fs::write(fx.root.join("NOTES.md"), "# Notes\n").unwrap();
    git(&fx.root, &["add", "NOTES.md"]);
    git(&fx.root, &["commit", "-qm", "notes"]);
    let sync = |name: &str| fx.state.join("sync").join(name).display().to_string();
    std::fs::create_dir_all(fx.state.join("sync")).unwrap();
    let steps = |me: &str, other: &str| {
        json!([[
            format!("touch:{}", sync(me)),
            format!("wait_for:{}:30", sync(other)),
            format!("append:NOTES.md=- note from {me}"),
            "mark:completed",
            "complete"
        ]])
    };
    fx.script(json!({"1.1": steps("one", "two"), "2.1": steps("two", "one")}));
    let (cmd, file) = appending(&fx);
    let out = fx.run(&[
        "--jobs",
        "2",
        "--max-conflicts",
        "0",
        "--on-exhaust",
        "skip",
        "--notify",
        &cmd,
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_text(&out));
    let text = stdout_text(&out);
    let got = notified(&file);
    assert_eq!(kinds(&got), ["conflict_limit", "summary"], "{text}");
    let limit = &got[0];
    assert_eq!(limit["then"], "skip");
    assert_eq!(limit["files"], json!(["NOTES.md"]));
    assert_eq!(limit["conflicts"], 1);
    assert_eq!(limit["max_conflicts"], 0);
    let loser = limit["task"].as_str().unwrap().to_string();
    assert!(
        text.contains(&format!(
            "[{loser}] its work conflicted 1 time when merged back in NOTES.md (--max-conflicts 0); skipping it (--on-exhaust skip)"
        )),
        "{text}"
    );
    let out = output_shown({
        let mut c = fx.spectr();
        c.args(["report", "add-widget"]);
        c
    });
    let report = stdout_text(&out);
    let lane = if loser == "1.1" { "1" } else { "2" };
    assert!(
        report.contains(&format!("| {lane} | – | {loser} |")),
        "{report}"
    );
}

#[test]
fn a_change_without_a_run_has_no_report_and_says_why() {
    let fx = Fixture::new(&five_tasks());
    let out = output_shown({
        let mut c = fx.spectr();
        c.args(["report", "add-widget"]);
        c
    });
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr_text(&out).contains("no run of add-widget to report"));
}

/// The progress row shows what was spent of the budget, updated with each
/// attempt's receipt.
#[test]
fn the_progress_row_shows_spent_of_the_budget() {
    use common::pty;
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
    ]));
    let go = fx.state.join("go");
    fx.script(json!({
        "1.1": [["cost:0.40", "mark:completed", "complete"]],
        "1.2": [[format!("wait_for:{}", go.display()), "cost:0.40".to_string(), "mark:completed".to_string(), "complete".to_string()]],
    }));
    let args = format!("{} --yes --budget-usd 1.00", Fixture::RALPH_ARGS.join(" "));
    let mut s = pty::spawn_sized(&fx, 120, 24, &args);
    let mut seen = String::new();
    let deadline = std::time::Instant::now() + pty::HANG_GUARD;
    while !seen.contains("$0.40 of $1.00 budget") {
        seen.push_str(&pty::drain(&mut s));
        assert!(
            std::time::Instant::now() < deadline,
            "no budget on the progress row:\n{seen}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::fs::write(&go, "").unwrap();
    let rest = s.expect(expectrl::Eof).expect("the run ends");
    seen.push_str(&String::from_utf8_lossy(rest.as_bytes()));
    assert_eq!(pty::exit_code(&mut s), Some(0));
    assert!(seen.contains("$0.80 of $1.00 budget"), "{seen}");
}

/// The guide's three notify examples, as written, run the way spectr runs them
/// (`sh -c CMD`, the event on stdin), with stand-ins for `notify-send` and
/// `curl` on PATH that record what they were given.
#[test]
fn the_readme_notify_examples_work_as_written() {
    let readme = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/src/unattended.md"
    ))
    .unwrap();
    let examples: Vec<&str> = readme
        .lines()
        .filter_map(|l| l.strip_prefix("spectr ralph my-change --notify '"))
        .filter_map(|l| l.strip_suffix('\''))
        .collect();
    assert_eq!(examples.len(), 3, "README's notify examples: {examples:?}");
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let record = |name: &str| {
        let path = bin.join(name);
        let out = dir.path().join(format!("{name}.out"));
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\nprintf '%s\\n' \"$@\" > '{}'\ncat >> '{}'\n",
                out.display(),
                out.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        out
    };
    let (notify_send, curl) = (record("notify-send"), record("curl"));
    let event = r#"{"event":"question","task":"1.1","reason":"failed: tests fail"}"#;
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for cmd in &examples {
        let mut child = std::process::Command::new("sh")
            .args(["-c", cmd])
            .env("PATH", &path)
            .env("HOME", dir.path())
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(event.as_bytes())
            .unwrap();
        assert!(child.wait().unwrap().success(), "{cmd}");
    }
    let shown = std::fs::read_to_string(&notify_send).unwrap();
    assert_eq!(shown, format!("spectr ralph\n{event}\n"));
    let posted = std::fs::read_to_string(&curl).unwrap();
    assert!(posted.contains("--data-binary\n@-\n"), "{posted}");
    assert!(posted.ends_with(event), "the body is the event: {posted}");
    let appended = std::fs::read_to_string(dir.path().join("spectr-events.jsonl")).unwrap();
    assert_eq!(appended, event);
}

/// A run killed before its summary still has totals: counted from the
/// attempts its journal holds.
#[test]
fn the_report_of_a_run_killed_before_its_summary_counts_its_totals() {
    let fx = reported_run();
    let journal = fx.run_journal();
    let text = std::fs::read_to_string(&journal).unwrap();
    let cut: String = text
        .lines()
        .filter(|l| !l.contains("\"event\":\"summary\""))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_ne!(cut, text, "the journal had a summary");
    std::fs::write(&journal, cut).unwrap();
    let out = output_shown({
        let mut c = fx.spectr();
        c.args(["report", "add-widget"]);
        c
    });
    let report = stdout_text(&out);
    assert!(report.contains("- End: unfinished"), "{report}");
    assert!(
        report.contains("Counted from the attempts the journal holds"),
        "{report}"
    );
    // 3 completed, none failed, skipped or remaining, 4 attempts, $0.18.
    assert!(report.contains("| 3 | 0 | 0 | 0 | 4 |"), "{report}");
    assert!(report.contains("$0.18"), "{report}");
}

#[test]
fn a_journal_line_that_cannot_be_read_is_counted_in_the_singular() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx.script(json!({"1.1": [["mark:completed", "complete"]]}));
    assert_eq!(fx.run(&[]).status.code(), Some(0));
    let journal = fx.run_journal();
    // A line cut off by a kill.
    let mut text = std::fs::read_to_string(&journal).unwrap();
    text.push_str("{\"event\":\"task_sta\n");
    std::fs::write(&journal, text).unwrap();
    let out = output_shown({
        let mut c = fx.spectr();
        c.args(["report", "add-widget"]);
        c
    });
    assert_eq!(out.status.code(), Some(0));
    let err = stderr_text(&out);
    assert!(
        err.contains(": 1 line could not be read (cut off by a kill, or from a newer spectr) and is left out\n"),
        "{err}"
    );
}

#[test]
fn a_resume_without_a_terminal_that_would_stop_again_says_what_changes_the_outcome() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("2.1", "Docs", "pending"),
    ]));
    fx.script(json!({"default": ["mark:completed", "complete"], "2.1": [["fail:broken"]]}));
    let first = fx.run(&["--yes", "--max-retries", "1"]);
    assert_eq!(first.status.code(), Some(1), "{first:?}");
    // The resume, as cron would run it: no terminal, the same command.
    let again = fx.run(&["--yes", "--max-retries", "1"]);
    assert_eq!(again.status.code(), Some(1), "{again:?}");
    let text = stdout_text(&again);
    assert!(
        !text.contains("run the same command again"),
        "it would stop the same way again:\n{text}"
    );
    for way in [
        "--on-exhaust retry",
        "--on-exhaust skip",
        "--fresh",
        "spectr task done 2.1 --change add-widget",
    ] {
        assert!(text.contains(way), "no `{way}` in:\n{text}");
    }
    // And the way it names does change it.
    let skipped = fx.run(&["--yes", "--max-retries", "1", "--on-exhaust", "skip"]);
    let text = stdout_text(&skipped);
    assert!(
        text.contains("[2.1] skipped: retries exhausted") && text.contains("1 skipped"),
        "{text}"
    );
}

#[test]
fn totals_an_agent_never_reported_say_not_reported_in_json_the_summary_and_the_report() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx.script(json!({"default": ["write:a.txt=a", "mark:completed", "complete"]}));
    // A text agent: no turns, no tokens, no cost.
    let agent = format!(
        "{} --format text --prompt-file {{prompt_file}}",
        fake_agent_bin()
    );
    let run = |json: bool| {
        let mut cmd = fx.spectr();
        cmd.env("NO_COLOR", "1")
            .args(["ralph", CHANGE, "--yes", "--fresh", "--agent-cmd", &agent])
            .stdin(std::process::Stdio::null());
        if json {
            cmd.arg("--json");
        }
        output_shown(cmd)
    };
    let human = run(false);
    assert_eq!(human.status.code(), Some(0), "{human:?}");
    let summary = stdout_text(&human)
        .lines()
        .find(|l| l.starts_with("Summary: "))
        .map(str::to_owned)
        .unwrap_or_default();
    assert!(
        !summary.contains("turns") && !summary.contains(" in / "),
        "{summary}"
    );
    let report = fx.spectr().args(["report", CHANGE]).output().unwrap();
    let report = stdout_text(&report);
    assert!(!report.contains("| 0 | 0 / 0 |"), "{report}");
    assert!(
        report.contains("| not reported | not reported |"),
        "{report}"
    );
    std::fs::write(
        fx.change_dir.join("tasks.jsonc"),
        tasks_v1(&[("1.1", "Core", "pending")]),
    )
    .unwrap();
    let machine = run(true);
    let events = events(&machine);
    let totals = &of_kind(&events, "summary")[0]["totals"];
    for field in [
        "turns",
        "input_tokens",
        "output_tokens",
        "cache_tokens",
        "cost_usd",
    ] {
        assert!(totals[field].is_null(), "{field}: {totals}");
    }
}

#[test]
fn the_report_of_tasks_run_one_at_a_time_before_a_parallel_resume_names_their_files() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("2.1", "Docs", "pending"),
        ("3.1", "Site", "pending"),
    ]));
    fx.script(json!({
        "1.1": [["write:core.txt=core", "mark:completed", "complete"]],
        "2.1": [["fail:not yet"], ["write:docs.txt=docs", "mark:completed", "complete"]],
        "3.1": [["write:site.txt=site", "mark:completed", "complete"]],
    }));
    let first = fx.run(&["--yes", "--max-retries", "0"]);
    assert_eq!(first.status.code(), Some(1), "{first:?}");
    let resumed = fx.run(&["--yes", "--jobs", "3", "--on-exhaust", "retry"]);
    assert_eq!(resumed.status.code(), Some(0), "{resumed:?}");
    let report = stdout_text(&fx.spectr().args(["report", CHANGE]).output().unwrap());
    let section = |id: &str| {
        let start = report
            .find(&format!("### {id} "))
            .unwrap_or_else(|| panic!("{report}"));
        let rest = &report[start..];
        let end = rest[4..].find("### ").map_or(rest.len(), |e| e + 4);
        rest[..end].to_string()
    };
    let core = section("1.1");
    assert!(core.contains("- attempt 1: `core.txt`"), "{core}");
    assert!(!core.contains("not merged"), "{core}");
}

#[test]
fn which_change_a_report_is_about_is_asked_the_way_report_takes_it() {
    let fx = Fixture::new(&five_tasks());
    let other = fx.root.join("spectr/changes/other-change");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("proposal.md"), "# Other\n").unwrap();
    let out = output_shown({
        let mut c = fx.spectr();
        c.args(["report"]).env_remove("SPECTR_RALPH_CHANGE");
        c
    });
    assert_eq!(out.status.code(), Some(2));
    let text = stderr_text(&out);
    assert!(!text.contains('{'), "a placeholder is left: {text}");
    assert!(text.contains("spectr report <change-id>"), "{text}");
    assert!(text.contains("SPECTR_RALPH_CHANGE"), "{text}");
    assert!(!text.contains("--change"), "report has no --change: {text}");
    let status = output_shown({
        let mut c = fx.spectr();
        c.args(["status"]).env_remove("SPECTR_RALPH_CHANGE");
        c
    });
    let text = stderr_text(&status);
    // status takes the change as report does, positionally.
    assert!(
        text.contains("spectr status <change-id>") && !text.contains('{'),
        "{text}"
    );
}
