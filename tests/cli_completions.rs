//! The completion scripts in `completions/` must match what the current clap
//! definition generates. After changing the CLI, refresh them with
//!
//!     SPECTR_UPDATE_COMPLETIONS=1 cargo test --test cli_completions
//!
//! and commit the result.

mod common;

use clap::ValueEnum;
use clap_complete::Shell;
use spectr::cli::completions::{file_name, script};
use std::path::Path;

const UPDATE_ENV: &str = "SPECTR_UPDATE_COMPLETIONS";

#[test]
fn completion_scripts_are_current() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("completions");
    let update = std::env::var_os(UPDATE_ENV).is_some_and(|v| v == "1");
    let mut stale = Vec::new();
    for shell in Shell::value_variants() {
        let path = dir.join(file_name(*shell));
        let want = script(*shell);
        if update {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &want).unwrap();
            continue;
        }
        if std::fs::read(&path).ok().as_deref() != Some(want.as_slice()) {
            stale.push(path.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "completion scripts out of date with the CLI definition: {}\n\
         regenerate them with: {UPDATE_ENV}=1 cargo test --test cli_completions",
        stale.join(", ")
    );
}

#[test]
fn every_shell_has_a_script_that_asks_spectr() {
    for shell in Shell::value_variants() {
        let text = String::from_utf8(script(*shell)).unwrap();
        assert!(
            text.contains("SPECTR_COMPLETE") && text.contains("spectr"),
            "{shell:?} script does not ask spectr:\n{text}"
        );
    }
}

#[test]
fn binary_prints_the_generated_script() {
    for (arg, shell) in [
        ("bash", Shell::Bash),
        ("zsh", Shell::Zsh),
        ("powershell", Shell::PowerShell),
    ] {
        let out = assert_cmd::Command::new(env!("CARGO_BIN_EXE_spectr"))
            .args(["completions", arg])
            .timeout(std::time::Duration::from_secs(60))
            .output()
            .unwrap();
        assert!(out.status.success());
        assert_eq!(out.stdout, script(shell), "{arg}");
    }
    let out = assert_cmd::Command::new(env!("CARGO_BIN_EXE_spectr"))
        .args(["completions", "tcsh"])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// What `spectr` answers for the words typed, as fish asks it (one
/// candidate a line, a tab before its description), in `dir`.
fn candidates(dir: &Path, words: &[&str]) -> Vec<(String, String)> {
    let out = assert_cmd::Command::new(env!("CARGO_BIN_EXE_spectr"))
        .current_dir(dir)
        .env("SPECTR_COMPLETE", "fish")
        .env_remove("SPECTR_RALPH_CHANGE")
        .env_remove("SPECTR_ROOT")
        .arg("--")
        .args(words)
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| match l.split_once('\t') {
            Some((c, help)) => (c.to_string(), help.to_string()),
            None => (l.to_string(), String::new()),
        })
        .collect()
}

fn names(c: &[(String, String)]) -> Vec<&str> {
    c.iter().map(|(n, _)| n.as_str()).collect()
}

/// The fixture's change `add-widget` (tasks 1.1 done, 1.2 and 2.1 not) and
/// a second change `other-change` (task 9.1).
fn two_changes() -> common::Fixture {
    let fx = common::Fixture::new(&common::tasks_v1(&[
        ("1.1", "Core", "completed"),
        ("1.2", "Core", "pending"),
        ("2.1", "Docs", "in_progress"),
    ]));
    let other = fx.root.join("spectr/changes/other-change");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("proposal.md"), "# Change: Other things\n").unwrap();
    std::fs::write(
        other.join("tasks.jsonc"),
        common::tasks_v1(&[("9.1", "Other", "pending")]),
    )
    .unwrap();
    fx
}

#[test]
fn the_engine_offers_every_subcommand() {
    let fx = two_changes();
    let got = candidates(&fx.root, &["spectr", ""]);
    for sub in [
        "list",
        "accept",
        "ralph",
        "completions",
        "task",
        "learn",
        "status",
        "context",
    ] {
        assert!(names(&got).contains(&sub), "{sub} missing: {got:?}");
    }
}

#[test]
fn ralph_completes_the_active_change_ids() {
    let fx = two_changes();
    let got = candidates(&fx.root, &["spectr", "ralph", ""]);
    assert!(
        got.contains(&("add-widget".into(), "Add widget".into()))
            && got.contains(&("other-change".into(), "Other things".into())),
        "{got:?}"
    );
    let got = candidates(&fx.root, &["spectr", "ralph", "oth"]);
    assert_eq!(names(&got), ["other-change"]);
    // And wherever a change is named.
    for words in [
        &["spectr", "accept", ""][..],
        &["spectr", "status", "--change", ""],
        &["spectr", "task", "done", "1.2", "--change", ""],
    ] {
        let got = candidates(&fx.root, words);
        assert!(
            names(&got).contains(&"add-widget") && names(&got).contains(&"other-change"),
            "{words:?}: {got:?}"
        );
    }
    // Outside a project: nothing, and no error (`a` would match the
    // hidden verb `answer`).
    let elsewhere = tempfile::tempdir().unwrap();
    let got = candidates(elsewhere.path(), &["spectr", "ralph", "ad"]);
    assert!(got.is_empty(), "{got:?}");
}

#[test]
fn task_done_completes_the_unfinished_task_ids_of_its_change() {
    let fx = two_changes();
    // Two active changes: `--change` on the line says which.
    let got = candidates(
        &fx.root,
        &["spectr", "task", "done", "--change", "add-widget", ""],
    );
    let ids: Vec<&str> = names(&got)
        .into_iter()
        .filter(|n| !n.starts_with('-'))
        .collect();
    assert_eq!(ids, ["1.2", "2.1"], "{got:?}");
    assert!(
        got.contains(&("1.2".into(), "Do task 1.2".into())),
        "{got:?}"
    );
    let got = candidates(
        &fx.root,
        &["spectr", "task", "done", "--change=other-change", "9"],
    );
    assert_eq!(names(&got), ["9.1"]);
    // Or the run's change, as `spectr task done` itself picks it.
    let out = assert_cmd::Command::new(env!("CARGO_BIN_EXE_spectr"))
        .current_dir(&fx.root)
        .env("SPECTR_COMPLETE", "fish")
        .env("SPECTR_RALPH_CHANGE", "other-change")
        .args(["--", "spectr", "task", "done", ""])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("9.1\t"));
    // `learn --task` and `context --task` too.
    let got = candidates(
        &fx.root,
        &["spectr", "context", "--change", "add-widget", "--task", ""],
    );
    assert_eq!(names(&got), ["1.2", "2.1"]);
}

/// `shell -c script` in the fixture's project with `spectr` on PATH; None
/// when the shell is not installed.
fn in_shell(fx: &common::Fixture, shell: &str, script: &str) -> Option<String> {
    let found = std::process::Command::new(shell)
        .arg("-c")
        .arg("exit 0")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        eprintln!("{shell} is not installed: skipped");
        return None;
    }
    common::with_spectr_on_path(fx);
    let out = assert_cmd::Command::new(shell)
        .current_dir(&fx.root)
        .env("PATH", fx.path_env())
        .env_remove("SPECTR_RALPH_CHANGE")
        .env_remove("SPECTR_ROOT")
        .arg("-c")
        .arg(script)
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert!(out.status.success(), "{shell}: {out:?}");
    Some(String::from_utf8(out.stdout).unwrap())
}

fn shipped(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("completions")
        .join(name)
        .display()
        .to_string()
}

#[test]
fn bash_completes_ids_through_the_shipped_script() {
    let fx = two_changes();
    // What bash does on TAB after `spectr ralph a` and `spectr task done `.
    let script = format!(
        r#"source {}
complete_line() {{
    COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); COMP_TYPE=9
    COMPREPLY=()
    _clap_complete_spectr spectr "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"
    printf '%s\n' "${{COMPREPLY[@]}}"
    echo --
}}
complete_line spectr ralph a
complete_line spectr task done --change add-widget ''
"#,
        shipped("spectr.bash")
    );
    let Some(out) = in_shell(&fx, "bash", &script) else {
        return;
    };
    let mut answers = out.split("--\n");
    let ralph: Vec<&str> = answers.next().unwrap().lines().collect();
    assert_eq!(ralph, ["add-widget"], "{out}");
    let done: Vec<&str> = answers
        .next()
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('-'))
        .collect();
    assert_eq!(done, ["1.2", "2.1"], "{out}");
}

#[test]
fn fish_completes_ids_through_the_shipped_script() {
    let fx = two_changes();
    let script = format!(
        "source {}; complete -C 'spectr ralph '",
        shipped("spectr.fish")
    );
    let Some(out) = in_shell(&fx, "fish", &script) else {
        return;
    };
    assert!(
        out.lines().any(|l| l == "add-widget\tAdd widget")
            && out.lines().any(|l| l == "other-change\tOther things"),
        "{out}"
    );
}

#[test]
fn zsh_loads_the_shipped_script_and_asks_spectr() {
    let fx = two_changes();
    // Driving zsh's completion needs a terminal; the script must load, and
    // what it runs on TAB must answer with the ids.
    let script = format!(
        "autoload -U compinit && compinit -u && source {} && \
         SPECTR_COMPLETE=zsh _CLAP_COMPLETE_INDEX=2 spectr -- spectr ralph ''",
        shipped("_spectr")
    );
    let Some(out) = in_shell(&fx, "zsh", &script) else {
        return;
    };
    assert!(
        out.contains("add-widget") && out.contains("other-change"),
        "{out}"
    );
}
