//! Bad input reaches the user as a clear error, never as a panic, a wrapped
//! number or raw terminal escapes (issue 8 items 21, 23, 24; issue 11 items 6
//! and 8).

mod common;
use common::*;
use common::{stderr_text as stderr, stdout_text as stdout};
use std::path::Path;
use std::process::{Command, Output};

/// No byte that could drive a terminal: C0 controls but tab and newline, DEL,
/// C1 controls.
fn assert_no_controls(what: &str, text: &str) {
    let bad: Vec<char> = text
        .chars()
        .filter(|&c| c.is_control() && c != '\n' && c != '\t')
        .collect();
    assert!(bad.is_empty(), "{what} holds controls {bad:?}:\n{text}");
}

const ESCAPES: &str = "\u{1b}]0;PWNED\u{7}\u{1b}[2J\u{9b}31m";

/// A tasks file whose section and description carry the escapes of issue 8's
/// repro (as JSON escapes, the way a hostile file would hold them).
fn hostile_tasks() -> String {
    let esc = serde_json::to_string(ESCAPES).unwrap();
    let esc = &esc[1..esc.len() - 1];
    format!(
        "{{ \"version\": 1, \"tasks\": [ {{ \"id\": \"1.1\", \"section\": \"S{esc}\", \"description\": \"first{esc}\\nsecond line\", \"status\": \"pending\" }} ] }}\n"
    )
}

#[test]
fn out_of_range_numbers_are_refused_before_anything_is_written() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "S", "pending")]));
    for (flag, value, says) in [
        (
            "--command-timeout",
            "18446744073709551615",
            "from 1 to 604800",
        ),
        ("--max-retries", "4294967295", "from 0 to 1000"),
        ("--task-timeout", "604801s", "from 1s to 7d"),
        ("--idle-timeout", "30d", "from 1s to 7d"),
        ("--max-turns", "0", "from 1 to 10000"),
        ("--max-budget-usd", "NaN", "above 0"),
    ] {
        let out = fx.run(&[flag, value]);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}");
        let err = stderr(&out);
        assert!(err.contains(flag) && err.contains(says), "{flag}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    assert!(
        !fx.change_dir.join(".ralph").exists(),
        "nothing was written"
    );
    assert!(!fx.session_path().exists());
}

#[test]
fn out_of_range_numbers_in_spectr_yaml_are_refused_too() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "S", "pending")]));
    for (key, value, says) in [
        ("max_retries", "4294967295", "from 0 to 1000"),
        (
            "command_timeout",
            "18446744073709551615",
            "from 1 to 604800",
        ),
        ("task_timeout", "8d", "from 1s to 7d"),
    ] {
        std::fs::write(
            fx.root.join("spectr.yaml"),
            format!("ralph:\n  {key}: {value}\n"),
        )
        .unwrap();
        let out = fx.run(&[]);
        assert_eq!(out.status.code(), Some(2), "{key}: {value}");
        let err = stderr(&out);
        assert!(
            err.contains(&format!("ralph.{key}")) && err.contains(says),
            "{key}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
        assert!(
            !fx.change_dir.join(".ralph").exists(),
            "{key}: something was written"
        );
    }
}

#[test]
fn wrong_values_are_told_in_plain_words() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "S", "pending")]));
    for (flag, value, says) in [
        ("--task-timeout", "10", "`10` needs a unit: 10s, 10m or 10h"),
        (
            "--idle-timeout",
            "banana",
            "`banana` is not a duration: write a number and a unit, such as 90s, 30m or 1h",
        ),
        ("--max-retries", "many", "a whole number from 0 to 1000"),
    ] {
        let out = fx.run(&[flag, value]);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}");
        let err = stderr(&out);
        assert!(err.contains(flag) && err.contains(says), "{flag}: {err}");
        assert!(!err.contains("expected number"), "{err}");
    }
    for (yaml, says) in [
        (
            "ralph:\n  max_retries: many\n",
            "spectr.yaml:2:16: ralph.max_retries: must be a whole number from 0 to 1000, not `many`",
        ),
        (
            "ralph:\n  idle_timeout: 600\n",
            "ralph.idle_timeout: `600` needs a unit: 600s, 600m or 600h",
        ),
        (
            "ralph:\n  checkpoints: maybe\n",
            "ralph.checkpoints: must be true or false, not `maybe`",
        ),
    ] {
        std::fs::write(fx.root.join("spectr.yaml"), yaml).unwrap();
        let out = fx.run(&[]);
        assert_eq!(out.status.code(), Some(2), "{yaml}");
        let err = stderr(&out);
        assert!(err.contains(says), "{yaml}: {err}");
        assert!(
            !err.contains("expected u32") && !err.contains("expected a boolean"),
            "{err}"
        );
    }
    assert!(
        !fx.change_dir.join(".ralph").exists(),
        "nothing was written"
    );
}

#[test]
fn the_largest_values_run() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "S", "pending")]));
    fx.script(serde_json::json!({"default": ["complete"]}));
    let out = fx.run(&[
        "--command-timeout",
        "604800",
        "--max-retries",
        "1000",
        "--task-timeout",
        "7d",
    ]);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        stdout(&out).contains("max retries 1000"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn invalid_utf8_names_file_line_column_and_the_fix() {
    let fx = Fixture::new("{}");
    std::fs::write(
        fx.change_dir.join("tasks.jsonc"),
        b"{\n  \"version\": 1,\n  \"tasks\": [ { \"id\": \"1.1\", \"description\": \"caf\xe9\" } ]\n}\n",
    )
    .unwrap();
    let out = fx.run(&["--dry-run"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("tasks.jsonc:3:48: not valid UTF-8 (byte 0xE9"),
        "{err}"
    );
    assert!(err.contains("save the file as UTF-8"), "{err}");

    // `spectr list` keeps listing, with the place on the change's line.
    let out = fx.spectr().arg("list").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(
        stdout(&out).contains("tasks.jsonc:3:48: not valid UTF-8"),
        "{}",
        stdout(&out)
    );

    // tasks.md, read by `accept`.
    std::fs::remove_file(fx.change_dir.join("tasks.jsonc")).unwrap();
    std::fs::write(
        fx.change_dir.join("tasks.md"),
        b"## 1. Setup\n- [ ] one\n- [ ] tw\xff\n",
    )
    .unwrap();
    let out = fx.spectr().args(["accept", CHANGE]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("tasks.md:3:9: not valid UTF-8 (byte 0xFF"),
        "{err}"
    );
    assert!(err.contains("save the file as UTF-8"), "{err}");
    let out = fx.spectr().arg("list").output().unwrap();
    assert!(stdout(&out).contains("tasks.md:3:9"), "{}", stdout(&out));
}

#[test]
fn invalid_utf8_in_the_session_file_names_line_and_column() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("session.json");
    std::fs::write(
        &path,
        b"{\n  \"version\": 1,\n  \"change\": \"c\xc3(\"\n}\n",
    )
    .unwrap();
    let e = spectr::ralph::session::Session::load(&path, "c").unwrap_err();
    let text = e.to_string();
    assert!(text.contains("session.json"), "{text}");
    assert!(
        text.contains("line 3, column 15: not valid UTF-8 (byte 0xC3"),
        "{text}"
    );
    assert!(text.contains("save the file as UTF-8"), "{text}");
}

#[test]
fn escapes_from_tasks_files_never_reach_the_terminal() {
    let fx = Fixture::new(&hostile_tasks());
    fx.script(serde_json::json!({"default": ["say:working", "complete"]}));

    let plan = fx.run(&["--dry-run"]);
    assert_eq!(plan.status.code(), Some(0));
    assert_no_controls("the plan", &stdout(&plan));
    // vte drops the whole OSC and CSI; the C1 CSI leaves its text behind.
    assert!(
        stdout(&plan).contains("    run          1.1      first31m …\n"),
        "{}",
        stdout(&plan)
    );

    let out = fx.run(&[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_no_controls("the run's output", &stdout(&out));
    assert_no_controls("the run's stderr", &stderr(&out));
    assert!(
        stdout(&out).contains("[1.1] S31m: first31m … (attempt 1)"),
        "{}",
        stdout(&out)
    );

    // --json keeps the data exactly (serde escapes it).
    let fx = Fixture::new(&hostile_tasks());
    let json = fx.run(&["--dry-run", "--json"]);
    let event = of_kind(&events(&json), "plan").remove(0);
    assert_eq!(
        event["lanes"][0]["tasks"][0]["description"],
        format!("first{ESCAPES}\nsecond line")
    );
    assert!(!json.stdout.contains(&0x1b), "escaped, not raw");
}

#[test]
fn escapes_in_list_lines_and_error_reports_are_removed() {
    let fx = Fixture::new("{}");
    let tasks = fx.change_dir.join("tasks.jsonc");
    std::fs::write(
        &tasks,
        "{ \"version\": 1, \"tasks\": [ { \"id\": \"1.1\", \"description\": \"d\u{1b}[2J\", \"status\": \"done\u{1b}]0;x\u{7}\" } ] }\n",
    )
    .unwrap();
    let out = fx.spectr().arg("list").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stdout(&out), "add-widget  0/1 tasks\n");
    assert_no_controls("list's warning", &stderr(&out));
    assert!(
        stderr(&out).contains("(\"done?]0;x?\")"),
        "{}",
        stderr(&out)
    );

    // The same file refused by ralph: the report quotes it, harmlessly.
    let out = fx.run(&["--dry-run"]);
    assert_eq!(out.status.code(), Some(2));
    assert_no_controls("ralph's error", &stderr(&out));
    assert!(stderr(&out).contains("\"done?]0;x?\""), "{}", stderr(&out));

    // An error line that quotes the file.
    std::fs::write(
        &tasks,
        "{ \"version\": 1, \"tasks\": [ { \"id\": \"1\", \"children\": \"$ref:x\u{1b}]0;t\u{7}.jsonc\" } ] }\n",
    )
    .unwrap();
    for args in [&["list"][..], &["list", "--long"]] {
        let out = fx.spectr().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(0));
        assert_no_controls("list", &stdout(&out));
        assert_no_controls("list's diagnostics", &stderr(&out));
        assert!(
            stdout(&out).contains("$ref file x?]0;t?.jsonc not found"),
            "{}",
            stdout(&out)
        );
    }
}

#[test]
fn control_characters_in_task_ids_are_refused() {
    let fx = Fixture::new(
        "{ \"version\": 1, \"tasks\": [ { \"id\": \"1.1\\u001b[2J\", \"status\": \"pending\" } ] }\n",
    );
    let out = fx.run(&["--dry-run"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("tasks.jsonc:1:36: `id` holds a control character"),
        "{err}"
    );
    assert_no_controls("the error", &err);
}

/// Upstream's own archived change has `"status": "complete"` (a typo) in 4
/// tasks: made here from the upstream fixture the same way.
fn upstream_with_typo(root: &Path) -> std::path::PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/spectr-upstream/changes/add-relative-line-numbers");
    let dir = root.join("spectr/changes/add-relative-line-numbers");
    std::fs::create_dir_all(&dir).unwrap();
    for name in ["proposal.md", "tasks.md", "tasks.jsonc"] {
        std::fs::copy(src.join(name), dir.join(name)).unwrap();
    }
    let text = std::fs::read_to_string(dir.join("tasks.jsonc")).unwrap();
    let mut seen = 0;
    let edited: Vec<String> = text
        .lines()
        .map(|l| {
            if l.trim() == "\"status\": \"completed\"" {
                seen += 1;
                if seen % 2 == 0 && seen <= 8 {
                    return l.replace("\"completed\"", "\"complete\"");
                }
            }
            l.to_string()
        })
        .collect();
    std::fs::write(dir.join("tasks.jsonc"), edited.join("\n") + "\n").unwrap();
    dir
}

#[test]
fn list_counts_unknown_statuses_as_pending_with_one_warning() {
    let tmp = tempfile::tempdir().unwrap();
    upstream_with_typo(tmp.path());
    let list = |args: &[&str]| {
        Command::new(spectr_bin())
            .args(args)
            .current_dir(tmp.path())
            .env_remove("SPECTR_ROOT")
            .output()
            .unwrap()
    };
    let out = list(&["list"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stdout(&out), "add-relative-line-numbers  9/13 tasks\n");
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "one warning: {err}");
    assert!(
        err.starts_with("warning: change 'add-relative-line-numbers': 4 tasks with an unknown status (\"complete\") counted as pending, at spectr/changes/add-relative-line-numbers/tasks.jsonc:49, spectr/changes/add-relative-line-numbers/tasks.jsonc:61,"),
        "{err}"
    );
    let out = list(&["list", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v[0]["taskStatus"],
        serde_json::json!({"total": 13, "completed": 9, "in_progress": 0, "pending": 4})
    );

    // ralph stays strict: the precise place, and the status meant.
    let out = list(&[
        "ralph",
        "add-relative-line-numbers",
        "--dry-run",
        "--agent-cmd",
        "true",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("tasks.jsonc:49:17: unknown status \"complete\""),
        "{err}"
    );
    assert!(err.contains("did you mean \"completed\"?"), "{err}");
}

/// An OpenSpec change whose stories are several checkbox lines each.
fn openspec_project() -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("project");
    let dir = root.join("openspec/changes/add-story");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("proposal.md"), "# Add story\n").unwrap();
    std::fs::write(
        dir.join("tasks.md"),
        "## 1. Setup\n- [ ] 1.1 Create the module\n- [ ] 1.2 Wire it in\n  with a note\n\n## 2. Docs\n- [ ] 2.1 Write the README\n",
    )
    .unwrap();
    git(&root, &["init", "-q", "-b", "main"]);
    git(&root, &["config", "user.name", "Spectr Tests"]);
    git(&root, &["config", "user.email", "tests@spectr.invalid"]);
    git(&root, &["add", "-A"]);
    git(&root, &["commit", "-qm", "initial"]);
    let bin = tmp.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(fake_agent_bin(), bin.join("claude")).unwrap();
    let script = tmp.path().join("script.json");
    std::fs::write(&script, r#"{"default": ["complete"]}"#).unwrap();
    (tmp, root)
}

fn ralph_openspec(tmp: &Path, root: &Path, extra: &[&str]) -> Output {
    let path = format!(
        "{}:{}",
        tmp.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new(spectr_bin())
        .args(["ralph", "add-story", "--agent", "claude"])
        .args(extra)
        .current_dir(root)
        .env("PATH", path)
        .env("NO_COLOR", "1")
        .env("SPECTR_FAKE_SCRIPT", tmp.join("script.json"))
        .env_remove("SPECTR_ROOT")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    eprintln!("{}\n{}", stdout(&out), stderr(&out));
    out
}

#[test]
fn multi_line_stories_keep_one_prefixed_line() {
    let (tmp, root) = openspec_project();
    let plan = ralph_openspec(tmp.path(), &root, &["--dry-run"]);
    assert_eq!(plan.status.code(), Some(0));
    let text = stdout(&plan);
    assert!(
        text.contains("    run          1        Setup · 2 steps\n"),
        "{text}"
    );
    assert!(
        text.contains("    run          2        Docs · 1 step\n"),
        "{text}"
    );
    assert!(!text.contains("1.2 Wire it in"), "{text}");

    let out = ralph_openspec(tmp.path(), &root, &[]);
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    assert!(
        text.contains("[1] Setup · 2 steps (attempt 1) · task 1 of 2\n"),
        "{text}"
    );
    // Stories are counted as stories, and committed by their titles.
    assert!(text.contains(": 2 of 2 stories to run ·"), "{text}");
    let log = git(&root, &["log", "--format=%s", "-2"]);
    assert_eq!(log, "2 Docs\n1 Setup\n", "{log}");
    // Every line of the run is one of ours: nothing starts unprefixed with a
    // story's second checkbox.
    assert!(
        !text.lines().any(|l| l.starts_with("- [")),
        "unprefixed lines:\n{text}"
    );

    // --json has the full text.
    let (tmp, root) = openspec_project();
    let out = ralph_openspec(tmp.path(), &root, &["--json"]);
    let started: Vec<serde_json::Value> = stdout(&out)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["event"] == "task_started")
        .collect();
    assert_eq!(
        started[0]["description"],
        "- [ ] 1.1 Create the module\n- [ ] 1.2 Wire it in\n  with a note"
    );
}

#[test]
fn on_a_terminal_a_long_description_is_cut_to_its_width() {
    let long = "word ".repeat(60);
    let fx = Fixture::new(&format!(
        "{{ \"version\": 1, \"tasks\": [ {{ \"id\": \"1.1\", \"section\": \"S\", \"description\": \"{long}END\", \"status\": \"pending\" }} ] }}\n"
    ));
    let mut s = common::pty::spawn_sized(
        &fx,
        60,
        20,
        &format!("ralph {CHANGE} --dry-run --agent-cmd true"),
    );
    let found = s.expect(expectrl::Eof).unwrap();
    let mut bytes = found.before().to_vec();
    for m in found.matches() {
        bytes.extend_from_slice(m);
    }
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let row = text
        .lines()
        .find(|l| l.contains("1.1"))
        .unwrap_or_else(|| panic!("no plan row:\n{text}"));
    let row = row.trim_end_matches('\r');
    assert!(row.ends_with('…'), "cut with …: {row:?}");
    assert!(!row.contains("END"), "{row:?}");
    assert!(row.chars().count() <= 60, "fits 60 columns: {row:?}");
}

/// A named pipe where a tasks file should be (`mkfifo tasks.jsonc`): said
/// for what it is, never opened (reading it would wait forever).
#[test]
fn a_fifo_as_a_tasks_file_is_named_for_what_it_is() {
    let fifo = |path: &Path| {
        let made = Command::new("mkfifo").arg(path).status().unwrap();
        assert!(made.success());
    };
    let fx = Fixture::new(&tasks_v1(&[("1.1", "S", "pending")]));
    let root = fx.change_dir.join("tasks.jsonc");
    std::fs::remove_file(&root).unwrap();
    fifo(&root);
    let mut cmd = fx.ralph();
    cmd.arg("--dry-run");
    let out = output_within(&mut cmd, std::time::Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let text = stderr(&out);
    assert!(text.contains("named pipe"), "{text}");
    assert!(text.contains(&root.display().to_string()), "{text}");
    assert!(!text.contains("not found"), "{text}");
    let mut accept = fx.spectr();
    accept.args(["accept", CHANGE]);
    let out = output_within(&mut accept, std::time::Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(stderr(&out).contains("named pipe"), "{}", stderr(&out));
    // The same for a `$ref` to one.
    std::fs::remove_file(&root).unwrap();
    std::fs::write(
        &root,
        "{ \"version\": 2, \"tasks\": [ { \"id\": \"1\", \"section\": \"S\", \"description\": \"d\", \"status\": \"pending\", \"children\": \"$ref:tasks-1.jsonc\" } ] }\n",
    )
    .unwrap();
    fifo(&fx.change_dir.join("tasks-1.jsonc"));
    let mut cmd = fx.ralph();
    cmd.arg("--dry-run");
    let out = output_within(&mut cmd, std::time::Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let text = stderr(&out);
    assert!(
        text.contains("tasks-1.jsonc") && text.contains("named pipe"),
        "{text}"
    );
    assert!(!text.contains("not found"), "{text}");
}
