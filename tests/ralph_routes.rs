//! `ralph: routes:` (issue 35): which agent runs which tasks, from
//! spectr.yaml; the first route a task matches wins, the run's agent runs
//! the rest. The fake agent stands in for both (as `claude` and as `qwen`,
//! speaking each one's format).

mod common;

use common::*;
use serde_json::json;

fn three(fx_routes: &str) -> Fixture {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("2.1", "Docs", "pending"),
        ("3.1", "Core", "pending"),
    ]));
    fx.install_fake_as("qwen");
    std::fs::write(fx.root.join("spectr.yaml"), fx_routes).unwrap();
    fx.script(json!({"default": ["mark:completed", "complete"]}));
    fx
}

const ROUTES: &str = "ralph:\n  routes:\n    - section: Docs\n      agent: qwen\n      model: qwen-small\n    - id: \"3.*\"\n      agent_args: [--from-route]\n";

#[test]
fn each_task_runs_on_the_agent_its_route_names() {
    let fx = three(ROUTES);
    let out = fx.run(&["--json", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    for id in ["1.1", "2.1", "3.1"] {
        assert_eq!(fx.status(id), "completed");
    }
    // Each agent got its own command line.
    let args = |t| fx.agent_args(t, 1).join(" ");
    assert!(args("1.1").contains("--permission-mode"), "{}", args("1.1"));
    assert!(
        args("2.1").contains("--yolo") && args("2.1").contains("qwen-small"),
        "{}",
        args("2.1")
    );
    assert!(
        !args("2.1").contains("--permission-mode"),
        "{}",
        args("2.1")
    );
    // The same agent as the run's, with the route's arguments.
    assert!(args("3.1").contains("--from-route"), "{}", args("3.1"));
    assert!(!args("1.1").contains("--from-route"), "{}", args("1.1"));
    let events: Vec<serde_json::Value> = stdout_text(&out)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let agent_of = |t: &str| {
        events
            .iter()
            .find(|e| e["event"] == "agent_started" && e["task"] == t)
            .map(|e| e["agent"].clone())
            .unwrap()
    };
    assert!(
        agent_of("1.1").is_null(),
        "the run's own agent is not named again"
    );
    let qwen = agent_of("2.1");
    assert!(
        qwen.as_str()
            .is_some_and(|a| a.starts_with("Qwen Code (qwen) ") && a.ends_with(" · qwen-small")),
        "{qwen}"
    );
    assert!(
        events.iter().any(|e| e["event"] == "notice"
            && e["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("Routes: section \"Docs\" -> Qwen Code (qwen)"))),
        "the routes are said at the start"
    );
}

#[test]
fn the_dry_run_names_each_routed_tasks_agent() {
    let fx = three(ROUTES);
    let out = fx.run(&["--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let text = stdout_text(&out);
    let row = |id: &str| {
        text.lines()
            .find(|l| l.split_whitespace().nth(1) == Some(id))
            .unwrap_or_else(|| panic!("{id} in {text}"))
            .to_owned()
    };
    assert!(row("2.1").contains("[Qwen Code (qwen)"), "{text}");
    assert!(row("3.1").contains("[Claude Code (claude)"), "{text}");
    assert!(!row("1.1").contains('['), "{text}");
}

#[test]
fn a_route_that_cannot_be_followed_is_refused_before_any_agent_runs() {
    let two = "ralph:\n  routes:\n    - section: Docs\n      id: \"2.*\"\n      agent: qwen\n";
    let fx = three(two);
    let out = fx.run(&["--yes"]);
    assert_eq!(out.status.code(), Some(2));
    let said = stderr_text(&out);
    assert!(
        said.contains(
            "spectr.yaml:2: ralph.routes, route 1: give exactly one of section, id or tag"
        ),
        "{said}"
    );
    let unknown = "ralph:\n  routes:\n    - tag: \"#docs\"\n      agent: kiro\n";
    std::fs::write(fx.root.join("spectr.yaml"), unknown).unwrap();
    let out = fx.run(&["--yes"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr_text(&out).contains("unknown agent 'kiro'"),
        "{}",
        stderr_text(&out)
    );
    // An agent whose command line is --agent-cmd's: only the run's.
    let acp = "ralph:\n  routes:\n    - tag: \"#docs\"\n      agent: acp\n";
    std::fs::write(fx.root.join("spectr.yaml"), acp).unwrap();
    let out = fx.run(&["--yes"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr_text(&out)
            .contains("`custom` and `acp` are routed only when they are the run's agent"),
        "{}",
        stderr_text(&out)
    );
    // An agent that is not installed: found out before anything runs.
    let missing = "ralph:\n  routes:\n    - section: Docs\n      agent: gemini\n";
    std::fs::write(fx.root.join("spectr.yaml"), missing).unwrap();
    let out = fx.run(&["--yes"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr_text(&out).contains("ralph.routes (section \"Docs\")"),
        "{}",
        stderr_text(&out)
    );
    assert!(fx.prompt("1.1", 1).is_none(), "no agent ran");
}

#[test]
fn a_limit_hours_away_moves_the_task_to_the_fallback_agent_without_a_retry() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
    ]));
    fx.install_fake_as("qwen");
    std::fs::write(
        fx.root.join("spectr.yaml"),
        "ralph:\n  fallback: [qwen]\n  max_rate_wait: 10m\n",
    )
    .unwrap();
    // Claude's first attempt hits a limit an hour away; every other
    // attempt (on qwen) completes.
    fx.script(json!({
        "1.1": [["rate_limit:3600"], ["mark:completed", "complete"]],
        "default": ["mark:completed", "complete"],
    }));
    let out = fx.run(&["--json", "--yes", "--max-retries", "0"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let events: Vec<serde_json::Value> = stdout_text(&out)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let moved: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["event"] == "agent_fallback")
        .collect();
    assert_eq!(moved.len(), 2, "1.1's second attempt and 1.2: {moved:?}");
    assert_eq!(moved[0]["task"], "1.1");
    assert!(
        moved[0]["from"]
            .as_str()
            .unwrap()
            .starts_with("Claude Code (claude)")
    );
    assert!(
        moved[0]["to"]
            .as_str()
            .unwrap()
            .starts_with("Qwen Code (qwen)")
    );
    assert!(moved[0]["until"].as_u64().is_some());
    assert!(
        !events.iter().any(|e| e["event"] == "rate_limit_wait"),
        "nothing waited for the reset"
    );
    // Claude, then qwen, for 1.1; qwen for 1.2 (claude's reset is far).
    assert!(
        fx.agent_args("1.1", 1)
            .join(" ")
            .contains("--permission-mode")
    );
    assert!(fx.agent_args("1.1", 2).join(" ").contains("--yolo"));
    assert!(fx.agent_args("1.2", 1).join(" ").contains("--yolo"));
    assert!(
        events.iter().any(|e| e["event"] == "notice"
            && e["message"].as_str().is_some_and(|m| m.starts_with(
                "Fallback: a limit further away than 10m moves a task on to Qwen Code (qwen)"
            ))),
        "the fallback is said at the start"
    );
    // The report names each attempt's agent and the move.
    let report = spectr(&fx, &["report", CHANGE]);
    let told = stdout_text(&report);
    assert!(
        told.contains("(on Qwen Code (qwen)")
            && told.contains(": Claude Code (claude)")
            && told.contains("was at its limit)"),
        "{told}"
    );
    // Human output says the move.
    let fx2 = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    fx2.install_fake_as("qwen");
    std::fs::write(fx2.root.join("spectr.yaml"), "ralph:\n  fallback: [qwen]\n").unwrap();
    fx2.script(json!({"1.1": [["rate_limit:3600"], ["mark:completed", "complete"]]}));
    let out = fx2.run(&["--yes"]);
    assert_eq!(out.status.code(), Some(0));
    let text = stdout_text(&out);
    assert!(
        text.contains("⇄ [1.1] Claude Code (claude)")
            && text.contains(": this attempt runs on Qwen Code (qwen)"),
        "{text}"
    );
}
