//! What `spectr ralph` shows a person: by default a task is its header, the
//! agent's stream and one verdict line carrying the receipt; spectr's own
//! bookkeeping (transcript paths, checkpoint refs, status changes, merges,
//! retries) is behind `-v`. A failed attempt always says where its work is.

mod common;

use common::*;
use serde_json::json;

/// Task 1.1 fails once, then completes; 1.2 completes.
fn fail_then_pass() -> Fixture {
    let fx = Fixture::new(&two_tasks());
    fx.script(json!({
        "1.1": [
            ["say:first try", "fail:tests are red"],
            ["say:second try", "mark:completed", "complete"]
        ],
        "default": ["say:on it", "mark:completed", "complete"]
    }));
    fx
}

fn lines_of(out: &std::process::Output) -> Vec<String> {
    stdout_text(out).lines().map(str::to_string).collect()
}

#[test]
fn a_task_is_its_header_the_agents_stream_and_one_verdict_line() {
    let fx = fail_then_pass();
    let out = fx.run(&[]);
    assert_eq!(out.status.code(), Some(0));
    let lines = lines_of(&out);
    let text = lines.join("\n");
    for hidden in [
        "transcript: ",
        "] checkpoint refs/",
        "status -> ",
        "↻ [1.1] retrying",
        "result  ",
        "receipt  ",
    ] {
        assert!(
            !text.contains(hidden),
            "{hidden:?} shown by default:\n{text}"
        );
    }
    let of_task = |id: &str| -> Vec<&String> {
        lines
            .iter()
            .filter(|l| l.contains(&format!("[{id}]")))
            .collect()
    };
    // 1.2: header, the agent's stream (its session, words and tools,
    // indented under the tag), one verdict line, then its commit (`--commit
    // task`, the default); nothing of spectr's between.
    let task = of_task("1.2");
    assert!(task[0].starts_with("[1.2] Core: Do task 1.2 (attempt 1)"));
    let committed = task[task.len() - 1];
    assert!(
        committed.starts_with("● [1.2] committed ") && committed.ends_with(" · 1 file"),
        "{committed}"
    );
    let task = &task[..task.len() - 1];
    let stream = &task[1..task.len() - 1];
    assert!(stream[0].starts_with("[1.2]   · session "), "{task:#?}");
    assert_eq!(stream[1], "[1.2]   on it");
    assert!(
        stream.len() == 4 && stream.iter().all(|l| l.starts_with("[1.2]   ")),
        "{task:#?}"
    );
    // The one verdict line: time, turns, tokens, cost, what decided it.
    let verdict = task[task.len() - 1];
    assert!(
        verdict.starts_with("✓ [1.2] completed · ")
            && verdict.contains(" turns · ")
            && verdict.contains(" in / ")
            && verdict.contains(" · $")
            && verdict.ends_with(" · marked completed in the tasks file"),
        "{verdict}"
    );
    // The failed attempt says what failed it and where its work is kept.
    let failed = lines
        .iter()
        .find(|l| l.starts_with("✗ [1.1] attempt 1 · "))
        .unwrap_or_else(|| panic!("no verdict for the failed attempt:\n{text}"));
    assert!(failed.ends_with(" · failed: tests are red"), "{failed}");
    assert!(
        lines.iter().any(|l| l.starts_with("↺ [1.1] ")
            && l.ends_with(
                "the attempt's work is kept at refs/spectr/ralph/@main/add-widget/1.1/1/failed"
            )),
        "{text}"
    );
    // The summary keeps its essentials.
    for end in [
        "All selected tasks completed.",
        "Summary: 2 completed · 0 failed",
        "Transcripts: ",
        "  refs/spectr/ralph/@main/add-widget/1.1/1/failed",
    ] {
        assert!(lines.iter().any(|l| l.starts_with(end)), "{end}:\n{text}");
    }
}

#[test]
fn verbose_shows_spectrs_bookkeeping_too() {
    let fx = fail_then_pass();
    let out = fx.run(&["-v"]);
    assert_eq!(out.status.code(), Some(0));
    let text = stdout_text(&out);
    let transcripts = fx.change_dir.join(".ralph/transcripts");
    for shown in [
        format!("  transcript: {}", transcripts.display()),
        "[1.1] checkpoint refs/spectr/ralph/@main/add-widget/1.1/1/checkpoint (".to_string(),
        "[1.1] checkpoint refs/spectr/ralph/@main/add-widget/1.1/2/checkpoint (".to_string(),
        "[1.1] status -> completed".to_string(),
        "↻ [1.1] retrying (attempt 2) with the reason: tests are red".to_string(),
    ] {
        assert!(
            text.contains(&shown),
            "{shown:?} not shown with -v:\n{text}"
        );
    }
    // Still one verdict per attempt, and no result line repeating it.
    assert_eq!(text.matches("✓ [1.1] completed · ").count(), 1, "{text}");
    assert!(!text.contains("result  "), "{text}");
}

/// Lanes 1 and 2 each write a file of their own and complete.
fn two_lanes_script() -> serde_json::Value {
    json!({
        "1.1": ["write:a.txt=a", "mark:completed", "complete"],
        "2.1": ["write:b.txt=b", "mark:completed", "complete"]
    })
}

#[test]
fn a_lane_task_hides_its_work_tree_and_merge_unless_verbose() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("2.1", "Docs", "pending"),
    ]));
    fx.script(two_lanes_script());
    let quiet = stdout_text(&fx.run(&["--jobs", "2"]));
    assert!(!quiet.contains("work tree: "), "{quiet}");
    assert!(!quiet.contains("⇄ ["), "{quiet}");
    assert!(quiet.contains("Tasks 1.x: merged 1.1"), "{quiet}");

    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("2.1", "Docs", "pending"),
    ]));
    fx.script(two_lanes_script());
    let loud = stdout_text(&fx.run(&["--jobs", "2", "--verbose"]));
    assert!(loud.contains("  work tree: "), "{loud}");
    assert!(
        loud.contains("⇄ [1.1] merged into your work tree: "),
        "{loud}"
    );
}

#[test]
fn the_screen_model_rewraps_on_a_resize() {
    use common::screen::Screen;
    // A row drawn 19 wide, then the window narrowed to 10: going back one
    // screen row leaves its head behind (what the progress rows did).
    let mut s = Screen::new(20);
    s.feed("done\r\n0123456789abcdefghi");
    s.resize(10);
    s.feed("\r\x1b[J");
    assert_eq!(s.lines(), ["done", "0123456789"]);
    // Going up over both screen rows leaves nothing.
    let mut s = Screen::new(20);
    s.feed("done\r\n0123456789abcdefghi");
    s.resize(10);
    s.feed("\r\x1b[1A\x1b[Jnext\r\n");
    assert_eq!(s.lines(), ["done", "next"]);
    // Colours and the cursor's visibility are no text.
    let mut s = Screen::new(80);
    s.feed("\x1b[?25l\x1b[32m✓\x1b[0m ok\r\n\x1b[?25h");
    assert_eq!(s.text(), "✓ ok");
}

/// A run of `tasks` (each id with a long description) on a terminal 120
/// wide, whose agents wait until the window was narrowed to 50 between two
/// of spectr's draws, once each running task's progress text is drawn.
/// Returns the screen's lines at the end, and checks the run completed.
fn narrowed_during_a_run(tasks: &[(&str, &str)], extra: &str) -> Vec<String> {
    use common::pty;
    use common::screen::Screen;
    let long = "Teach the widget to say hello in every language its users speak, one by one";
    let list: Vec<(&str, &str, &str)> = tasks.iter().map(|(id, s)| (*id, *s, "pending")).collect();
    let mut file = tasks_v1(&list);
    for (id, _) in tasks {
        file = file.replace(&format!("Do task {id}\""), &format!("{long}\""));
    }
    let fx = Fixture::new(&file);
    let go = fx.state.join("go");
    fx.script(json!({"default": [
        format!("wait_for:{}", go.display()),
        "say:after the resize".to_string(),
        "mark:completed".to_string(),
        "complete".to_string()
    ]}));
    let args = format!("{} --yes {extra}", Fixture::RALPH_ARGS.join(" "));
    let mut s = pty::spawn_sized(&fx, 120, 24, &args);
    // Each task's progress text (its header line says `Core:`) is drawn.
    let mut seen = String::new();
    let deadline = std::time::Instant::now() + pty::HANG_GUARD;
    while !tasks
        .iter()
        .all(|(id, _)| seen.contains(&format!(" {id} Teach the widget")))
    {
        seen.push_str(&pty::drain(&mut s));
        assert!(
            std::time::Instant::now() < deadline,
            "no progress rows:\n{seen}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // Narrowed between two draws (spectr stopped meanwhile, so none of its
    // writes straddles the resize): each long row now wraps.
    pty::pause(&s);
    seen.push_str(&pty::drain(&mut s));
    let mut screen = Screen::new(120);
    screen.feed(&seen);
    s.set_window_size(50, 24).expect("resize the pty");
    screen.resize(50);
    pty::resume(&s);
    std::fs::write(&go, "").unwrap();
    let rest = s.expect(expectrl::Eof).expect("the run ends");
    screen.feed(&String::from_utf8_lossy(rest.as_bytes()));
    assert_eq!(pty::exit_code(&mut s), Some(0));
    let lines = screen.lines();
    let text = lines.join("\n");
    for (id, _) in tasks {
        assert!(
            lines
                .iter()
                .any(|l| l == &format!("[{id}]   after the resize")),
            "{text}"
        );
    }
    assert!(
        lines.iter().any(|l| l == "All selected tasks completed."),
        "{text}"
    );
    lines
}

/// A line left of a progress row: its spinner, or its `[done/total]`.
fn progress_fragment(line: &str) -> bool {
    const SPINNER: &str = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏⠿";
    line.chars().any(|c| SPINNER.contains(c))
        || ["[0/", "[1/", "[2/"].iter().any(|p| line.contains(p))
}

#[test]
fn a_window_narrowed_between_draws_leaves_no_fragment_of_the_progress_row() {
    let lines = narrowed_during_a_run(&[("1.1", "Core")], "");
    assert!(
        !lines.iter().any(|l| progress_fragment(l)),
        "a fragment of a progress row is left on the screen:\n{}",
        lines.join("\n")
    );
}

#[test]
fn a_window_narrowed_between_draws_leaves_no_fragment_of_two_lanes_rows() {
    let lines = narrowed_during_a_run(&[("1.1", "Core"), ("2.1", "Docs")], "--jobs 2");
    assert!(
        !lines.iter().any(|l| progress_fragment(l)),
        "a fragment of a progress row is left on the screen:\n{}",
        lines.join("\n")
    );
}

#[test]
fn a_stopped_attempt_says_why_once() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx.script(json!({"1.1": [["hang"]]}));
    let mut cmd = fx.ralph();
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let run = Background::spawn(cmd);
    fx.wait_for("the agent", || fx.prompt("1.1", 1).is_some());
    run.signal(nix::sys::signal::Signal::SIGTERM);
    let out = run.wait_with_output();
    assert_eq!(out.status.code(), Some(130));
    let text = stdout_text(&out);
    let verdict = text
        .lines()
        .find(|l| l.starts_with("✗ [1.1] attempt 1 · "))
        .unwrap_or_else(|| panic!("no verdict for the stopped attempt:\n{text}"));
    assert!(verdict.ends_with(" · stopped to quit"), "{verdict}");
    assert!(
        !verdict.contains("quit requested"),
        "the stop is told twice: {verdict}"
    );
}

/// With lanes, a lane's status write reaches your tasks file after its
/// verdict: that is the run's own bookkeeping, behind `-v`, not news of a
/// hand edit ("edited in tasks file").
#[test]
fn a_lanes_own_status_mirrored_home_is_not_shown_without_v() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("2.1", "Docs", "pending"),
        ("3.1", "Api", "pending"),
    ]));
    fx.script(json!({"default": ["say:on it", "mark:completed", "complete"]}));
    let out = fx.run(&["--jobs", "3"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let text = stdout_text(&out);
    assert!(!text.contains("status -> "), "{text}");
    assert!(!text.contains("edited in tasks file"), "{text}");
    let out = fx.run(&["--jobs", "3", "-v", "--fresh"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
}

/// A lane's number is its work tree's name (and its refs'): three groups
/// of tasks in two lanes, group 3 running in a lane that group 1 or 2 used
/// before, says the lane it runs in, not its group's number.
#[test]
fn a_tasks_lane_is_named_as_its_work_tree() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("2.1", "Docs", "pending"),
        ("3.1", "Api", "pending"),
    ]));
    fx.script(json!({"default": ["say:on it", "mark:completed", "complete"]}));
    let out = fx.run(&["--jobs", "2", "-v"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let text = stdout_text(&out);
    let lines: Vec<&str> = text.lines().collect();
    let mut checked = 0;
    for (i, line) in lines.iter().enumerate() {
        let Some((_, lane)) = line.split_once(" · lane ") else {
            continue;
        };
        let tree = lines[i + 1..]
            .iter()
            .find_map(|l| l.split_once("work tree: ").map(|(_, w)| w))
            .unwrap_or_else(|| panic!("no work tree after {line}:\n{text}"));
        assert!(
            tree.ends_with(&format!("/lane-{lane}")),
            "{line} ran in {tree}"
        );
        checked += 1;
    }
    assert_eq!(checked, 3, "{text}");
    assert!(text.contains("Tasks 3.x: merged 3.1"), "{text}");
    // The plan names groups, not lanes.
    let out = fx.run(&["--jobs", "2", "--dry-run", "--fresh"]);
    let plan = stdout_text(&out);
    assert!(
        plan.contains("Plan (3 independent groups of tasks):"),
        "{plan}"
    );
    assert!(plan.contains("  tasks 3.x:"), "{plan}");
}
