//! A task's commit (`--commit task`, issue 32) shown everywhere the task
//! is: `spectr status` (human and `--json`) and `spectr report` (Markdown
//! and HTML), the report's files changed read from the commit itself.

mod common;

use common::*;
use serde_json::{Value, json};

/// The commit on main whose subject starts with `id `.
fn commit_of(fx: &Fixture, id: &str) -> String {
    let log = git(
        &fx.root,
        &["log", "--first-parent", "--format=%H %s", "main"],
    );
    log.lines()
        .find_map(|l| {
            let (hash, subject) = l.split_once(' ')?;
            subject
                .starts_with(&format!("{id} "))
                .then(|| hash.to_string())
        })
        .unwrap_or_else(|| panic!("no commit for {id}:\n{log}"))
}

fn report(fx: &Fixture, extra: &[&str]) -> String {
    let mut args = vec!["report", CHANGE];
    args.extend_from_slice(extra);
    let out = spectr(fx, &args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    stdout_text(&out)
}

/// 1.1 completes and is committed, 1.2 fails out of retries: the run
/// stops with its session kept.
fn one_committed_one_failed() -> Fixture {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
    ]));
    fx.script(json!({
        "1.1": [["write:src/core.rs=core", "mark:completed", "complete"]],
        "1.2": [["fail:not today"]],
    }));
    let out = fx.run(&["--yes", "--max-retries", "0"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_text(&out));
    assert!(fx.session_path().exists(), "the session is kept");
    fx
}

#[test]
fn status_shows_the_commit_of_each_committed_task() {
    let fx = one_committed_one_failed();
    let commit = commit_of(&fx, "1.1");
    let out = spectr(&fx, &["status", "--change", CHANGE]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let text = stdout_text(&out);
    // The short id, as the run's `● [1.1] committed <short>` line has it;
    // 1.2 has none.
    assert!(
        text.contains(&format!("\nCommitted: 1.1 {}\n", &commit[..10])),
        "{text}"
    );
    let out = spectr(&fx, &["status", "--change", CHANGE, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let v: Value = serde_json::from_str(stdout_text(&out).trim()).unwrap();
    assert_eq!(v["commits"], json!({ "1.1": commit }), "{v}");
}

#[test]
fn status_without_a_commit_says_none() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
    ]));
    fx.script(json!({
        "1.1": [["write:src/core.rs=core", "mark:completed", "complete"]],
        "1.2": [["fail:not today"]],
    }));
    let out = fx.run(&["--yes", "--max-retries", "0", "--commit", "off"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_text(&out));
    let text = stdout_text(&spectr(&fx, &["status", "--change", CHANGE]));
    assert!(!text.contains("Committed"), "{text}");
    let out = spectr(&fx, &["status", "--change", CHANGE, "--json"]);
    let v: Value = serde_json::from_str(stdout_text(&out).trim()).unwrap();
    assert_eq!(v["commits"], json!({}), "{v}");
}

#[test]
fn the_report_links_each_commit_and_takes_the_files_from_it() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
    ]));
    // The user's own uncommitted edit, which 1.1's change overlaps: left
    // out of its commit.
    std::fs::write(fx.root.join("keep.txt"), "tracked, mine\n").unwrap();
    fx.script(json!({
        "1.1": [["write:keep.txt=tracked, mine, and the task's", "write:src/core.rs=core", "mark:completed", "complete"]],
        "1.2": [["write:src/more.rs=more", "mark:completed", "complete"]],
    }));
    let out = fx.run(&["--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    // Made after the run: in the work tree now, never in 1.2's work.
    std::fs::write(fx.root.join("later.txt"), "mine, later\n").unwrap();
    let html = fx.state.join("report.html");
    let text = report(&fx, &["--html", html.to_str().unwrap()]);
    for id in ["1.1", "1.2"] {
        let c = commit_of(&fx, id);
        let short = &c[..10];
        assert!(
            text.contains(&format!(
                "Commit: `{short}` (inspect: `git show {short} --stat`; undo: `git revert {short}`)."
            )),
            "{id}: {text}"
        );
    }
    assert!(
        text.contains("- attempt 1: `src/core.rs` (in its commit)\n"),
        "{text}"
    );
    assert!(
        text.contains("- attempt 1: `src/more.rs` (in its commit)\n"),
        "{text}"
    );
    assert!(!text.contains("later.txt"), "{text}");
    assert!(
        text.contains(
            "Left out of its commit, where it overlaps your uncommitted work: `keep.txt`."
        ),
        "{text}"
    );
    let page = std::fs::read_to_string(&html).unwrap();
    let short = &commit_of(&fx, "1.2")[..10];
    assert!(page.contains(&format!("<code>{short}</code>")), "{page}");
    assert!(
        page.contains(&format!("<code>git show {short} --stat</code>")),
        "{page}"
    );
    assert!(page.contains("<code>keep.txt</code>"), "{page}");
    assert!(!page.contains("later.txt"), "{page}");
}

#[test]
fn a_commit_that_cannot_be_read_falls_back_to_the_checkpoints_and_says_so() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx.script(json!({
        "1.1": [["write:src/core.rs=core", "mark:completed", "complete"]],
    }));
    let out = fx.run(&["--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    // The commit gone (as after a reset and a gc): the journal names one
    // the repository does not hold.
    let commit = commit_of(&fx, "1.1");
    let gone = "0123456789".repeat(4);
    let journal = fx.run_journal();
    let text = std::fs::read_to_string(&journal).unwrap();
    assert!(text.contains(&commit), "the journal names the commit");
    std::fs::write(&journal, text.replace(&commit, &gone)).unwrap();
    let text = report(&fx, &[]);
    assert!(text.contains("Commit: `0123456789`"), "{text}");
    assert!(
        text.contains(
            "- attempt 1: `src/core.rs` (its commit could not be read: not in the repository; compared with the work tree now)\n"
        ),
        "{text}"
    );
}
