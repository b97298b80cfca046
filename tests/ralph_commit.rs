//! `--commit task` (issue 32): one reviewable commit per completed task on
//! the branch the run started on, the same with and without lanes, whether
//! the agent commits or not; the user's own uncommitted work never in one.

mod common;

use common::*;
use serde_json::{Value, json};

fn with_identity(fx: &Fixture) {
    git(&fx.root, &["config", "user.name", "Ada Lovelace"]);
    git(&fx.root, &["config", "user.email", "ada@example.com"]);
}

fn three_tasks() -> String {
    tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
        ("2.1", "Docs", "pending"),
    ])
}

/// 1.1's agent does not commit, 1.2's commits once, 2.1's twice.
fn script(fx: &Fixture) {
    fx.script(json!({
        "1.1": [["write:src/core.rs=core", "mark:completed", "complete"]],
        "1.2": [["write:src/more.rs=more", "git_commit:agent did 1.2", "mark:completed", "complete"]],
        "2.1": [["write:docs/a.md=a", "git_commit:agent did 2.1 (a)", "write:docs/b.md=b", "git_commit:agent did 2.1 (b)", "mark:completed", "complete"]],
    }));
}

/// Subjects of the branch's first-parent history, newest first.
fn subjects(fx: &Fixture) -> Vec<String> {
    git(&fx.root, &["log", "--first-parent", "--format=%s", "main"])
        .lines()
        .map(str::to_string)
        .collect()
}

/// The files a commit changes (name-status lines).
fn files_of(fx: &Fixture, rev: &str) -> Vec<String> {
    git(&fx.root, &["show", "--format=", "--name-only", rev])
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// The commit whose subject starts with `id `.
fn commit_of(fx: &Fixture, id: &str) -> String {
    git(
        &fx.root,
        &["log", "--first-parent", "--format=%H %s", "main"],
    )
    .lines()
    .find(|l| {
        l.split_once(' ')
            .is_some_and(|(_, s)| s.starts_with(&format!("{id} ")))
    })
    .map(|l| l[..40].to_string())
    .unwrap_or_else(|| panic!("no commit for {id}: {:?}", subjects(fx)))
}

fn run_and_check(jobs: &str) {
    let fx = Fixture::new(&three_tasks());
    with_identity(&fx);
    script(&fx);
    // The user's own work: an edit of a tracked file and a new file.
    std::fs::write(fx.root.join("keep.txt"), "tracked, and my edit\n").unwrap();
    std::fs::write(fx.root.join("mine.txt"), "my notes\n").unwrap();
    let out = fx.run(&["--json", "--yes", "--commit", "task", "--jobs", jobs]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let ev = events(&out);
    // One commit per task, linear, on main, none of the agent's.
    let mut got = subjects(&fx);
    let initial = got.pop();
    assert_eq!(initial.as_deref(), Some("initial"));
    got.sort();
    assert_eq!(
        got,
        ["1.1 Do task 1.1", "1.2 Do task 1.2", "2.1 Do task 2.1"],
        "{}",
        stderr_text(&out)
    );
    let merges = git(&fx.root, &["rev-list", "--merges", "main"]);
    assert!(merges.trim().is_empty(), "merge commits: {merges}");
    // Each holds exactly its task's work and its status edit.
    let tasks_file = "spectr/changes/add-widget/tasks.jsonc";
    for (id, files) in [
        ("1.1", vec!["src/core.rs", tasks_file]),
        ("1.2", vec!["src/more.rs", tasks_file]),
        ("2.1", vec!["docs/a.md", "docs/b.md", tasks_file]),
    ] {
        let c = commit_of(&fx, id);
        let mut want: Vec<String> = files.iter().map(|s| s.to_string()).collect();
        want.sort();
        assert_eq!(files_of(&fx, &c), want, "{id}");
        let body = git(&fx.root, &["log", "-1", "--format=%B", &c]);
        for t in [
            format!("Spectr-Change: {CHANGE}"),
            format!("Spectr-Task: {id}"),
            "Spectr-Attempts: 1".to_string(),
        ] {
            assert!(body.contains(&t), "{id}: {body}");
        }
        if id == "1.1" {
            // The agent's final answer, its promise tag left out.
            assert!(
                body.contains("\n\nThe task is done and verified.\n\n"),
                "{body}"
            );
            assert!(!body.contains("<promise>"), "{body}");
        }
        let author = git(&fx.root, &["log", "-1", "--format=%an <%ae>", &c]);
        assert_eq!(author.trim(), "Ada Lovelace <ada@example.com>");
        // The status edit is this task's alone.
        let text = git(&fx.root, &["show", &format!("{c}:{tasks_file}")]);
        assert!(text.contains(&format!("\"id\": \"{id}\"")), "{text}");
    }
    // The last commit's tasks file says every task completed.
    let last = git(&fx.root, &["show", &format!("main:{tasks_file}")]);
    assert_eq!(last.matches("\"completed\"").count(), 3, "{last}");
    // The user's work stays theirs, uncommitted; nothing of the tasks' is
    // left uncommitted.
    assert_eq!(
        git(&fx.root, &["status", "--porcelain=v1", "-uall"]),
        " M keep.txt\n?? mine.txt\n"
    );
    assert!(!git(&fx.root, &["show", "main:keep.txt"]).contains("my edit"));
    // Said as it happened.
    let committed = of_kind(&ev, "task_committed");
    assert_eq!(committed.len(), 3, "{committed:#?}");
    for c in &committed {
        assert!(c["commit"].as_str().is_some_and(|s| s.len() == 40), "{c}");
    }
    // The agents' own commits are kept under refs, not on the branch.
    let kept = git(
        &fx.root,
        &["for-each-ref", "--format=%(refname)", "refs/spectr/"],
    );
    if jobs == "1" {
        assert!(kept.contains("/1.2/1/lane-commits"), "{kept}");
        assert!(kept.contains("/2.1/1/lane-commits"), "{kept}");
    }
}

#[test]
fn one_task_at_a_time_leaves_one_commit_per_task() {
    run_and_check("1");
}

#[test]
fn lanes_leave_one_commit_per_task_too() {
    run_and_check("3");
}

/// `--commit task` with no identity but the repository's own config (no
/// global config, no identity variables, no `EMAIL`).
fn run_with_only_the_repos_identity(fx: &Fixture) -> std::process::Output {
    let mut cmd = fx.ralph();
    cmd.args(["--yes", "--commit", "task"])
        .env("HOME", fx.root.parent().unwrap())
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("GIT_AUTHOR_NAME")
        .env_remove("GIT_AUTHOR_EMAIL")
        .env_remove("GIT_COMMITTER_NAME")
        .env_remove("GIT_COMMITTER_EMAIL")
        .env("EMAIL", "");
    output_shown(cmd)
}

#[test]
fn a_run_that_would_commit_without_an_identity_stops_before_any_agent_runs() {
    let fx = Fixture::new(&three_tasks());
    script(&fx);
    git(&fx.root, &["config", "--unset", "user.name"]);
    git(&fx.root, &["config", "--unset", "user.email"]);
    let out = run_with_only_the_repos_identity(&fx);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let said = stderr_text(&out);
    assert!(said.contains("no identity"), "{said}");
    assert!(said.contains("git config --global user.name"), "{said}");
    assert!(said.contains("--commit off"), "{said}");
    assert!(fx.prompt("1.1", 1).is_none(), "an agent ran");
}

/// An author git would refuse (only a committer configured, and
/// `user.useConfigOnly` forbids guessing) stops the run at preflight too,
/// before any agent runs: not at the first commit.
#[test]
fn a_run_with_a_committer_but_no_author_stops_before_any_agent_runs() {
    let fx = Fixture::new(&three_tasks());
    script(&fx);
    git(&fx.root, &["config", "--unset", "user.name"]);
    git(&fx.root, &["config", "--unset", "user.email"]);
    git(&fx.root, &["config", "user.useConfigOnly", "true"]);
    git(&fx.root, &["config", "committer.name", "Ada Lovelace"]);
    git(&fx.root, &["config", "committer.email", "ada@example.com"]);
    let out = run_with_only_the_repos_identity(&fx);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let said = stderr_text(&out);
    assert!(said.contains("no identity"), "{said}");
    assert!(fx.prompt("1.1", 1).is_none(), "an agent ran");
}

/// A task's commit is the user's as their own `git commit-tree` would
/// write it: author and committer each from the environment or config,
/// the time in the local time zone, the message as given.
#[test]
fn a_task_commit_carries_the_users_identities_and_local_time_zone() {
    let fx = Fixture::new(&three_tasks());
    with_identity(&fx);
    script(&fx);
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let mut cmd = fx.ralph();
    cmd.args(["--yes", "--commit", "task"])
        // A POSIX zone (no tz database needed): UTC+5:30.
        .env("TZ", "IST-5:30")
        .env("GIT_AUTHOR_NAME", "Grace Hopper")
        .env("GIT_AUTHOR_EMAIL", "grace@example.com")
        .env_remove("GIT_COMMITTER_NAME")
        .env_remove("GIT_COMMITTER_EMAIL")
        .env_remove("GIT_AUTHOR_DATE")
        .env_remove("GIT_COMMITTER_DATE");
    let out = output_shown(cmd);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let after = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    for id in ["1.1", "1.2", "2.1"] {
        let c = commit_of(&fx, id);
        let who = git(&fx.root, &["log", "-1", "--format=%an <%ae>|%cn <%ce>", &c]);
        assert_eq!(
            who.trim(),
            "Grace Hopper <grace@example.com>|Ada Lovelace <ada@example.com>",
            "{id}"
        );
        let raw = git(&fx.root, &["cat-file", "commit", &c]);
        for line in raw
            .lines()
            .filter(|l| l.starts_with("author ") || l.starts_with("committer "))
        {
            let mut words = line.rsplit(' ');
            let (zone, secs) = (words.next().unwrap(), words.next().unwrap());
            assert_eq!(zone, "+0530", "{id}: {line}");
            let secs: u64 = secs.parse().unwrap();
            assert!((before..=after).contains(&secs), "{id}: {line}");
        }
    }
    let fsck = git(&fx.root, &["fsck", "--strict", "--no-dangling"]);
    assert!(fsck.trim().is_empty(), "{fsck}");
}

#[test]
fn with_commit_off_the_branch_never_moves() {
    let fx = Fixture::new(&three_tasks());
    script(&fx);
    for jobs in ["1", "3"] {
        let head = git(&fx.root, &["rev-parse", "main"]);
        let out = fx.run(&["--yes", "--fresh", "--commit", "off", "--jobs", jobs]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
        assert_eq!(git(&fx.root, &["rev-parse", "main"]), head, "--jobs {jobs}");
        std::fs::write(fx.change_dir.join("tasks.jsonc"), three_tasks()).unwrap();
    }
}

/// Lanes: 1.1 commits at once; 2.1 waits for the test's go meanwhile.
fn waiting_run(fx: &Fixture) -> (JsonRun, std::path::PathBuf) {
    with_identity(fx);
    let marker = fx.state.join("go");
    fx.script(json!({
        "1.1": [["write:src/core.rs=core", "mark:completed", "complete"]],
        "2.1": [["write:docs/a.md=a", format!("wait_for:{}:60", marker.display()), "mark:completed", "complete"]],
    }));
    let mut cmd = fx.ralph();
    cmd.args(["--json", "--yes", "--commit", "task", "--jobs", "2"]);
    let mut run = JsonRun::spawn(cmd);
    run.until("1.1 committed", |seen: &[Value]| {
        seen.iter()
            .any(|e| e["event"] == "task_committed" && e["task"] == "1.1")
    });
    fx.wait_for("2.1's agent", || fx.prompt("2.1", 1).is_some());
    (run, marker)
}

fn two_lanes() -> String {
    tasks_v1(&[("1.1", "Core", "pending"), ("2.1", "Docs", "pending")])
}

#[test]
fn a_persons_commit_meanwhile_is_built_on_never_rewritten() {
    let fx = Fixture::new(&two_lanes());
    let (mut run, go) = waiting_run(&fx);
    std::fs::write(fx.root.join("theirs.txt"), "a person's\n").unwrap();
    git(&fx.root, &["add", "theirs.txt"]);
    git(&fx.root, &["commit", "-qm", "a person's commit"]);
    std::fs::write(&go, "").unwrap();
    assert_eq!(run.run.wait().code(), Some(0));
    assert_eq!(
        subjects(&fx),
        [
            "2.1 Do task 2.1",
            "a person's commit",
            "1.1 Do task 1.1",
            "initial"
        ]
    );
    assert_eq!(git(&fx.root, &["status", "--porcelain=v1"]), "");
}

#[test]
fn a_branch_reset_under_the_run_stops_it_at_the_next_commit_with_nothing_lost() {
    let fx = Fixture::new(&two_lanes());
    let (mut run, go) = waiting_run(&fx);
    git(&fx.root, &["reset", "-q", "--soft", "main~1"]);
    let reset_to = git(&fx.root, &["rev-parse", "main"]);
    std::fs::write(&go, "").unwrap();
    run.until("the end", |seen: &[Value]| {
        seen.iter().any(|e| e["event"] == "summary")
    });
    assert_eq!(run.run.wait().code(), Some(1));
    let error = run
        .seen
        .iter()
        .find(|e| e["event"] == "error")
        .map(|e| e["message"].as_str().unwrap_or("").to_string())
        .unwrap_or_default();
    assert!(error.contains("no longer holds"), "{error}");
    assert!(error.contains("nothing is lost"), "{error}");
    // Nothing committed elsewhere, the work in the tree, the session kept.
    assert_eq!(git(&fx.root, &["rev-parse", "main"]), reset_to);
    assert_eq!(
        std::fs::read_to_string(fx.root.join("docs/a.md")).unwrap(),
        "a"
    );
    assert!(fx.session_path().exists());
}

/// A task the session holds completed but whose commit was never made (a
/// kill between the two; here a first run with commits off) is committed
/// first thing by the next run, even when nothing is left to run.
#[test]
fn a_completed_task_not_yet_committed_is_committed_by_the_next_run() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
    ]));
    fx.script(json!({
        "1.1": [["write:src/core.rs=core", "mark:completed", "complete"]],
        "1.2": [["fail:not today"]],
    }));
    let first = fx.run(&["--yes", "--commit", "off", "--max-retries", "0"]);
    assert_eq!(first.status.code(), Some(1), "{}", stderr_text(&first));
    assert_eq!(subjects(&fx), ["initial"]);
    // 1.2 done by hand: nothing is left to run.
    let done = spectr(&fx, &["task", "done", "1.2", "--change", CHANGE]);
    assert!(done.status.success(), "{done:?}");
    let out = fx.run(&["--json", "--resume", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    assert_eq!(subjects(&fx), ["1.1 Do task 1.1", "initial"]);
    assert_eq!(
        files_of(&fx, "main"),
        ["spectr/changes/add-widget/tasks.jsonc", "src/core.rs"]
    );
    assert_eq!(of_kind(&events(&out), "task_committed").len(), 1);
}

#[test]
fn with_branch_the_commits_go_to_a_new_branch_and_yours_stays() {
    let fx = Fixture::new(&three_tasks());
    script(&fx);
    let main = git(&fx.root, &["rev-parse", "main"]);
    let out = fx.run(&["--yes", "--branch", "ralph/widget"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    assert_eq!(git(&fx.root, &["rev-parse", "main"]), main, "main moved");
    assert_eq!(
        git(&fx.root, &["symbolic-ref", "HEAD"]).trim(),
        "refs/heads/ralph/widget"
    );
    let log = git(&fx.root, &["log", "--format=%s", "main..ralph/widget"]);
    assert_eq!(log.lines().count(), 3, "{log}");
    let said = stdout_text(&out);
    assert!(
        said.contains("git log --oneline main..ralph/widget"),
        "{said}"
    );
    assert!(
        said.contains("git switch main && git merge --ff-only ralph/widget"),
        "{said}"
    );
    // A branch of that name that HEAD is not on is never taken over.
    git(&fx.root, &["switch", "-q", "main"]);
    std::fs::write(fx.change_dir.join("tasks.jsonc"), three_tasks()).unwrap();
    let again = fx.run(&["--yes", "--fresh", "--branch", "ralph/widget"]);
    assert_eq!(again.status.code(), Some(2), "{again:?}");
    assert!(
        stderr_text(&again).contains("exists already"),
        "{}",
        stderr_text(&again)
    );
}

#[test]
fn push_sends_the_branch_after_every_commit_and_a_failed_push_never_stops_the_run() {
    let fx = Fixture::new(&three_tasks());
    script(&fx);
    let remote = fx.root.parent().unwrap().join("remote.git");
    git(
        fx.root.parent().unwrap(),
        &["init", "-q", "--bare", remote.to_str().unwrap()],
    );
    std::fs::write(
        fx.root.join("spectr.yaml"),
        format!("ralph:\n  push: {}\n", remote.display()),
    )
    .unwrap();
    let out = fx.run(&["--yes", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    assert_eq!(
        git(&remote, &["rev-parse", "main"]),
        git(&fx.root, &["rev-parse", "main"])
    );
    // The user's spectr.yaml is theirs: never in a commit.
    assert!(!git(&fx.root, &["ls-tree", "-r", "--name-only", "main"]).contains("spectr.yaml"));
    // A remote that cannot be reached: said, and the run goes on.
    std::fs::write(
        fx.root.join("spectr.yaml"),
        "ralph:\n  push: /nonexistent/remote.git\n",
    )
    .unwrap();
    std::fs::write(fx.change_dir.join("tasks.jsonc"), three_tasks()).unwrap();
    fx.script(json!({"default": ["write:{task}.txt=again", "mark:completed", "complete"]}));
    let out = fx.run(&["--yes", "--json", "--fresh"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let warned = of_kind(&events(&out), "notice")
        .iter()
        .filter(|n| {
            n["message"]
                .as_str()
                .unwrap_or("")
                .starts_with("could not push main")
        })
        .count();
    assert_eq!(warned, 3, "{}", stdout_text(&out));
    assert_eq!(of_kind(&events(&out), "task_committed").len(), 3);
}

/// Two lanes whose every task appends its line to one file: they conflict,
/// resolve, and take turns running tasks in the user's tree. Still one
/// commit per task, linear, each adding its own line, the agents' commits
/// off the branch.
#[test]
fn lanes_taking_turns_in_your_tree_leave_one_commit_per_task() {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "Core", "pending"),
        ("1.2", "Core", "pending"),
        ("1.3", "Core", "pending"),
        ("2.1", "Docs", "pending"),
        ("2.2", "Docs", "pending"),
        ("2.3", "Docs", "pending"),
    ]));
    with_identity(&fx);
    let mut script = serde_json::Map::new();
    for id in ["1.1", "1.2", "1.3", "2.1", "2.2", "2.3"] {
        script.insert(
            id.to_string(),
            json!([[
                format!("write:out/{id}.txt={id}"),
                "sleep:150",
                "resolve:NOTES.md",
                format!("append_once:NOTES.md=- note from task {id}"),
                format!("git_commit:agent did {id}"),
                "mark:completed",
                "complete"
            ]]),
        );
    }
    fx.script(Value::Object(script));
    let out = fx.run(&["--json", "--yes", "--commit", "task", "--jobs", "2"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let ev = events(&out);
    let turns = ev
        .iter()
        .filter(|e| {
            e["event"] == "task_started" && e["lane"].is_string() && e["worktree"].is_null()
        })
        .count();
    let resolves = of_kind(&ev, "resolving").len();
    assert!(turns + resolves > 0, "no contention: {ev:#?}");
    let mut got = subjects(&fx);
    assert_eq!(got.pop().as_deref(), Some("initial"));
    assert_eq!(got.len(), 6, "{got:?}");
    assert!(!got.iter().any(|s| s.starts_with("agent did")), "{got:?}");
    let merges = git(&fx.root, &["rev-list", "--merges", "main"]);
    assert!(merges.trim().is_empty(), "merge commits: {merges}");
    for id in ["1.1", "1.2", "1.3", "2.1", "2.2", "2.3"] {
        let c = commit_of(&fx, id);
        let added: Vec<String> = git(&fx.root, &["show", "--format=", &c, "--", "NOTES.md"])
            .lines()
            .filter(|l| l.starts_with('+') && !l.starts_with("+++"))
            .map(str::to_string)
            .collect();
        assert_eq!(added, [format!("+- note from task {id}")], "{id}");
        assert!(files_of(&fx, &c).contains(&format!("out/{id}.txt")), "{id}");
    }
    let notes = std::fs::read_to_string(fx.root.join("NOTES.md")).unwrap();
    assert_eq!(notes.lines().count(), 6, "{notes}");
    assert_eq!(git(&fx.root, &["status", "--porcelain=v1", "-uall"]), "");
}

/// A repository that asks for signed commits: refused before any agent
/// runs (a passphrase prompt would stall an unattended run), saying what
/// to set.
#[test]
fn a_run_asked_to_sign_its_commits_stops_before_any_agent_runs() {
    let fx = Fixture::new(&three_tasks());
    with_identity(&fx);
    script(&fx);
    git(&fx.root, &["config", "commit.gpgsign", "true"]);
    let out = fx.run(&["--yes", "--commit", "task"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let said = stderr_text(&out);
    assert!(said.contains("commit.gpgsign"), "{said}");
    assert!(said.contains("--commit off"), "{said}");
    assert!(fx.prompt("1.1", 1).is_none(), "an agent ran");
    // With --commit off the same repository runs.
    let out = fx.run(&["--yes", "--commit", "off"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
}

/// Hooks never run for spectr's own commits: neither one an agent planted
/// in `.git/hooks` nor one a config's `core.hooksPath` names.
#[test]
fn the_commits_spectr_makes_run_no_hook() {
    let fx = Fixture::new(&three_tasks());
    with_identity(&fx);
    let ran = fx.state.join("hook-ran");
    let hook = format!("#!/bin/sh\necho \"$0\" >> {}\n", ran.display());
    let hooks = fx.root.join(".git/hooks");
    let elsewhere = fx.state.join("hooks");
    std::fs::create_dir_all(&elsewhere).unwrap();
    for dir in [&hooks, &elsewhere] {
        for name in [
            "pre-commit",
            "commit-msg",
            "post-commit",
            "reference-transaction",
            "post-index-change",
        ] {
            let path = dir.join(name);
            std::fs::write(&path, &hook).unwrap();
            std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                .unwrap();
        }
    }
    // Agents that do not commit: a commit an agent makes is its own git's,
    // hooks and all.
    fx.script(json!({
        "default": [["write:src/{task}.rs=work", "mark:completed", "complete"]],
    }));
    for (i, hooks_path) in [None, Some(&elsewhere)].into_iter().enumerate() {
        if let Some(p) = hooks_path {
            git(&fx.root, &["config", "core.hooksPath", p.to_str().unwrap()]);
            std::fs::write(fx.change_dir.join("tasks.jsonc"), three_tasks()).unwrap();
            git(&fx.root, &["commit", "-qam", "again", "--no-verify"]);
            // The test's own commit ran them.
            let _ = std::fs::remove_file(&ran);
        }
        let out = fx.run(&["--yes", "--fresh", "--commit", "task"]);
        assert_eq!(out.status.code(), Some(0), "{i}: {}", stderr_text(&out));
        assert_eq!(
            subjects(&fx)
                .iter()
                .filter(|s| s.starts_with("1.1 "))
                .count(),
            i + 1
        );
        assert!(
            !ran.exists(),
            "{i}: a hook ran: {:?}",
            std::fs::read_to_string(&ran)
        );
    }
}

/// Lanes merge onto a given base (`git merge-tree --merge-base`, git 2.40):
/// with an older git (Debian 12 ships 2.39) `--jobs 2` is refused before
/// any agent runs, naming the git found; one task at a time still commits.
#[test]
fn lanes_with_a_git_before_2_40_are_refused_before_any_agent_runs() {
    let fx = Fixture::new(&three_tasks());
    with_identity(&fx);
    script(&fx);
    let real = std::process::Command::new("sh")
        .args(["-c", "command -v git"])
        .output()
        .unwrap();
    let real = String::from_utf8_lossy(&real.stdout).trim().to_string();
    let bin = fx.state.join("old-git");
    std::fs::create_dir_all(&bin).unwrap();
    let shim = bin.join("git");
    std::fs::write(
        &shim,
        format!(
            "#!/bin/sh\n{}",
            git_2_39_script(std::path::Path::new(&real))
        ),
    )
    .unwrap();
    std::fs::set_permissions(&shim, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), fx.path_env());
    let mut cmd = fx.ralph();
    cmd.args(["--yes", "--jobs", "2"]).env("PATH", &path);
    let out = output_shown(cmd);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let said = stderr_text(&out);
    assert!(said.contains("git 2.39") && said.contains("2.40"), "{said}");
    assert!(said.contains("--jobs"), "{said}");
    assert!(fx.prompt("1.1", 1).is_none(), "an agent ran");
    let mut cmd = fx.ralph();
    cmd.args(["--yes", "--jobs", "1"]).env("PATH", &path);
    let out = output_shown(cmd);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    assert_eq!(subjects(&fx).len(), 4, "{:?}", subjects(&fx));
}

/// A lane's task whose agent changed nothing but its status still gets its
/// commit: the status edit mirrored into your tree is its whole change, and
/// nothing of the run is left uncommitted.
#[test]
fn a_lane_task_with_only_its_status_edit_is_committed_too() {
    let fx = Fixture::new(&three_tasks());
    with_identity(&fx);
    fx.script(json!({
        "1.1": [["write:src/core.rs=core", "mark:completed", "complete"]],
        "default": [["mark:completed", "complete"]],
    }));
    let out = fx.run(&["--yes", "--commit", "task", "--jobs", "2"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let mut got = subjects(&fx);
    assert_eq!(got.pop().as_deref(), Some("initial"));
    got.sort();
    assert_eq!(
        got,
        ["1.1 Do task 1.1", "1.2 Do task 1.2", "2.1 Do task 2.1"]
    );
    assert_eq!(
        files_of(&fx, &commit_of(&fx, "2.1")),
        ["spectr/changes/add-widget/tasks.jsonc"]
    );
    assert_eq!(git(&fx.root, &["status", "--porcelain=v1", "-uall"]), "");
}

/// A git of the user's holds the index lock when a task is committed: the
/// commit stands, and the run says the index could not follow it and how
/// to put it in step, instead of leaving it staged the other way unsaid.
#[test]
fn an_index_that_cannot_follow_a_commit_is_said() {
    let fx = Fixture::new(&tasks_v1(&[("1.1", "Core", "pending")]));
    with_identity(&fx);
    fx.script(json!({"1.1": [["write:src/core.rs=core", "mark:completed", "complete"]]}));
    // The user's own git, holding the lock (no spectr marker beside it).
    std::fs::write(fx.root.join(".git/index.lock"), "").unwrap();
    let out = fx.run(&["--yes", "--commit", "task"]);
    std::fs::remove_file(fx.root.join(".git/index.lock")).unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let said = format!("{}{}", stdout_text(&out), stderr_text(&out));
    assert!(said.contains("could not follow the commit"), "{said}");
    assert!(
        said.contains("`git reset -q -- spectr/changes/add-widget/tasks.jsonc src/core.rs`"),
        "{said}"
    );
    assert!(said.contains("index.lock': File exists.)"), "{said}");
    assert_eq!(subjects(&fx)[0], "1.1 Do task 1.1");
}

/// `git add -A` runs of the work tree's snapshots in a run of `fx`'s
/// change (GIT_TRACE names every git command spectr runs).
fn snapshots_taken(fx: &Fixture, extra: &[&str]) -> usize {
    let trace = fx.root.join("../git-trace.txt");
    let _ = std::fs::remove_file(&trace);
    let out = fx
        .ralph()
        .args(["--json", "--yes", "--jobs", "1"])
        .args(extra)
        .env("GIT_TRACE", &trace)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    std::fs::read_to_string(&trace)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("built-in: git add -A --ignore-errors"))
        .count()
}

#[test]
fn in_a_clean_tree_the_snapshot_of_a_commit_is_the_next_checkpoint_and_a_retry_reverts_to_it() {
    // 1.2 fails once after breaking 1.1's file and leaving junk, then
    // completes: its revert goes back to the state 1.1's commit left.
    let make = || {
        let fx = Fixture::new(&tasks_v1(&[
            ("1.1", "Core", "pending"),
            ("1.2", "Core", "pending"),
        ]));
        with_identity(&fx);
        fx.script(json!({
            "1.1": [["write:src/a.rs=one", "complete"]],
            "1.2": [
                ["write:junk.txt=junk", "write:src/a.rs=broken", "fail:not yet"],
                ["write:src/b.rs=two", "complete"]
            ],
        }));
        fx
    };
    let off = snapshots_taken(&make(), &["--commit", "off"]);
    let fx = make();
    let on = snapshots_taken(&fx, &["--commit", "task"]);
    // Each commit snapshots the tree (2); the checkpoint of 1.2's first
    // attempt, right after 1.1's commit, takes that snapshot as its own.
    assert_eq!(
        on,
        off + 2 - 1,
        "snapshots: {on} with commits, {off} without"
    );
    let tasks_file = "spectr/changes/add-widget/tasks.jsonc";
    assert_eq!(
        files_of(&fx, &commit_of(&fx, "1.1")),
        ["spectr/changes/add-widget/tasks.jsonc", "src/a.rs"].map(String::from)
    );
    let mut want = vec!["src/b.rs".to_string(), tasks_file.to_string()];
    want.sort();
    assert_eq!(files_of(&fx, &commit_of(&fx, "1.2")), want);
    assert_eq!(
        std::fs::read_to_string(fx.root.join("src/a.rs")).unwrap(),
        "one"
    );
    assert!(!fx.root.join("junk.txt").exists());
    assert_eq!(git(&fx.root, &["status", "--porcelain=v1", "-uall"]), "");
    let body = git(
        &fx.root,
        &["log", "-1", "--format=%B", &commit_of(&fx, "1.2")],
    );
    assert!(body.contains("Spectr-Attempts: 2"), "{body}");
}
