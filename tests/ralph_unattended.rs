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
    let out = fx.run(&["--budget-tokens", "1", "--json"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr_text(&out));
    let ev = events(&out);
    assert_eq!(started(&ev), ["1.1#1"]);
    let reached = &of_kind(&ev, "budget_reached")[0];
    assert!(reached["spent"]["tokens"].as_u64().unwrap() >= 1, "{reached}");
}
