//! tasks.md keeps up with tasks.jsonc: every status spectr writes ticks or
//! clears the box `spectr accept` made the task from (only that byte), a
//! tasks.md edited out of step is left alone with one warning, `list` and
//! `status` bring a lagging tasks.md up to date, and the loop (one at a time
//! and in lanes) ends with tasks.md's boxes matching tasks.jsonc.

mod common;

use common::stderr_text as stderr;
use common::*;
use serde_json::json;
use std::path::Path;
use std::process::Output;

/// A checklist with sub-items: accept numbers its boxes 2.6, then 2.7..2.11
/// for `2.6a`..`2.6e`, and 2.12 for the line written `2.7`.
const MD: &str = "# Tasks: Add widget\r
\r
Intro text with a [ ] bracket pair that is no box.\r
\r
## 1. Core\r
\r
- [ ] 1.1 Add the parser\r
- [x] 1.2 Wire it into the CLI\r
  with a continuation line\r
\r
## 2. Details\r
\r
- [ ] 2.1 First detail\r
- [ ] 2.2 Second detail\r
- [ ] 2.3 Third detail\r
- [ ] 2.4 Fourth detail\r
- [ ] 2.5 Fifth detail\r
- [ ] 2.6 Parent of sub-items\r
  - [ ] 2.6a Sub-item a\r
  - [ ] 2.6b Sub-item b\r
  - [ ] 2.6c Sub-item c\r
  - [ ] 2.6d Sub-item d\r
  - [ ] 2.6e Sub-item e\r
- [ ] 2.7 After the sub-items\r
\r
```text\r
- [ ] 9.9 not a task (in a fence)\r
```\r
";

/// MD with a third section: more than 20 tasks in several sections, so
/// accept splits it into tasks-N.jsonc files (v2).
fn md_split() -> String {
    let mut md = MD.to_string();
    md.push_str("\r\n## 3. More\r\n\r\n");
    for n in 1..=8 {
        md.push_str(&format!("* [ ] 3.{n} More work {n}\r\n"));
    }
    md
}

/// `md` with the box of the line holding `text` set to `mark`.
fn with_box(md: &str, text: &str, mark: char) -> String {
    let mut hits = 0;
    let out: Vec<String> = md
        .split_inclusive('\n')
        .map(|line| {
            if !line.contains(text) {
                return line.to_string();
            }
            hits += 1;
            let at = line.find('[').expect("a box") + 1;
            let mut l = line.to_string();
            l.replace_range(at..at + 1, &mark.to_string());
            l
        })
        .collect();
    assert_eq!(hits, 1, "{text} is on one line");
    out.concat()
}

/// A committed project whose change was accepted from `md`.
fn accepted(md: &str) -> Fixture {
    let fx = Fixture::with_files(&[("tasks.md", md)], true);
    let out = spectr(&fx, &["accept", CHANGE]);
    assert!(out.status.success());
    git(&fx.root, &["add", "-A"]);
    git(&fx.root, &["commit", "-qm", "accept"]);
    fx
}

fn md(fx: &Fixture) -> String {
    std::fs::read_to_string(fx.change_dir.join("tasks.md")).unwrap()
}

fn done(fx: &Fixture, id: &str, status: &str) -> Output {
    let out = spectr(fx, &["task", "done", id, "--status", status]);
    assert!(out.status.success(), "{}", stderr(&out));
    out
}

/// Replaces the status of `id` in whichever tasks file holds it, as a person
/// editing tasks.jsonc by hand would.
fn hand_edit(fx: &Fixture, id: &str, status: &str) {
    let set = spectr::model::TaskSet::load(&fx.change_dir).unwrap();
    let task = set.task(&spectr::model::TaskId::from(id)).unwrap();
    let path = set.files[task.file].path.clone();
    let text = std::fs::read_to_string(&path).unwrap();
    let needle = format!("\"id\": \"{id}\",");
    let at = text.find(&needle).unwrap();
    let status_at = at + text[at..].find("\"status\": \"").unwrap() + 11;
    let end = status_at + text[status_at..].find('"').unwrap();
    let mut text = text;
    text.replace_range(status_at..end, status);
    std::fs::write(&path, text).unwrap();
}

fn check_task_done_ticks_by_accepts_numbering(md_text: &str) {
    let fx = accepted(md_text);
    let mut want = md_text.to_string();
    assert_eq!(md(&fx), want, "accept leaves tasks.md as it is");

    // 2.7 is the line written `2.6a`, not the one written `2.7`.
    let out = done(&fx, "2.7", "completed");
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
    want = with_box(&want, "2.6a Sub-item a", 'x');
    assert_eq!(md(&fx), want);
    // 2.12 is the line written `2.7`.
    done(&fx, "2.12", "completed");
    want = with_box(&want, "2.7 After the sub-items", 'x');
    assert_eq!(md(&fx), want);
    done(&fx, "2.11", "completed");
    want = with_box(&want, "2.6e Sub-item e", 'x');
    assert_eq!(md(&fx), want);
    // Anything but completed clears; in_progress is a cleared box too.
    done(&fx, "1.2", "pending");
    want = with_box(&want, "1.2 Wire it into the CLI", ' ');
    assert_eq!(md(&fx), want);
    done(&fx, "2.7", "in_progress");
    want = with_box(&want, "2.6a Sub-item a", ' ');
    assert_eq!(md(&fx), want);
    done(&fx, "2.6", "in_progress");
    assert_eq!(md(&fx), want, "a cleared box stays cleared");
    assert_eq!(fx.status("2.12"), "completed");
    assert_eq!(fx.status("2.7"), "in_progress");
    assert_eq!(fx.status("1.2"), "pending");
}

#[test]
fn task_done_ticks_the_box_accept_numbered_flat() {
    check_task_done_ticks_by_accepts_numbering(MD);
}

#[test]
fn task_done_ticks_the_box_accept_numbered_split() {
    let md_text = md_split();
    let fx = accepted(&md_text);
    assert!(fx.change_dir.join("tasks-3.jsonc").exists(), "split (v2)");
    drop(fx);
    check_task_done_ticks_by_accepts_numbering(&md_text);
    let fx = accepted(&md_text);
    done(&fx, "3.8", "completed");
    assert_eq!(md(&fx), with_box(&md_text, "3.8 More work 8", 'x'));
}

#[test]
fn a_task_already_completed_by_hand_gets_its_box_from_task_done() {
    let fx = accepted(MD);
    hand_edit(&fx, "2.3", "completed");
    let out = done(&fx, "2.3", "completed");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("already completed"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(md(&fx), with_box(MD, "2.3 Third detail", 'x'));
}

#[test]
fn a_tasks_md_edited_out_of_step_is_left_alone_with_one_warning() {
    let cases = [
        (
            "a line inserted",
            MD.replace(
                "- [ ] 2.5 Fifth",
                "- [ ] 2.5b Inserted by hand\r\n- [ ] 2.5 Fifth",
            ),
            "line 17",
        ),
        (
            "the last line of a section removed",
            MD.replace("- [ ] 2.7 After the sub-items\r\n", ""),
            "task 2.12 of tasks.jsonc (\"After the sub-items\") has no checkbox",
        ),
        (
            "a task's text changed",
            MD.replace("2.2 Second detail", "2.2 Second step"),
            "reads \"Second step\" where task 2.2 of tasks.jsonc is \"Second detail\"",
        ),
    ];
    for (what, edited, why) in cases {
        let fx = accepted(MD);
        std::fs::write(fx.change_dir.join("tasks.md"), &edited).unwrap();
        let out = done(&fx, "2.12", "completed");
        assert_eq!(
            fx.status("2.12"),
            "completed",
            "{what}: the status is written"
        );
        assert_eq!(md(&fx), edited, "{what}: tasks.md is left alone");
        let err = stderr(&out);
        assert_eq!(err.matches("warning:").count(), 1, "{what}: {err}");
        assert!(
            err.contains("tasks.md is left as it is") && err.contains(why),
            "{what}: {err}"
        );
        assert!(err.contains("`spectr accept add-widget`"), "{what}: {err}");
        // `list` and `status` leave it alone as well, with the same warning.
        for cmd in [&["list"][..], &["status"][..]] {
            let out = spectr(&fx, cmd);
            assert!(out.status.success());
            assert_eq!(md(&fx), edited, "{what}: {cmd:?}");
            assert_eq!(stderr(&out).matches("left as it is").count(), 1, "{what}");
        }
    }

    // Accepted again, the boxes follow once more (statuses kept).
    let fx = accepted(MD);
    let edited = MD.replace("- [ ] 2.5 Fifth", "- [ ] 2.5b Inserted\r\n- [ ] 2.5 Fifth");
    std::fs::write(fx.change_dir.join("tasks.md"), &edited).unwrap();
    done(&fx, "2.12", "completed");
    assert!(spectr(&fx, &["accept", CHANGE]).status.success());
    // The inserted line is 2.6 now; the line written `2.7` is 2.13.
    assert_eq!(fx.status("2.13"), "completed");
    // The listing says the box lags (and writes nothing); `task sync` ticks it.
    let out = spectr(&fx, &["list"]);
    assert!(
        stderr(&out).contains("1 box says otherwise"),
        "{}",
        stderr(&out)
    );
    assert_eq!(md(&fx), edited);
    assert!(
        spectr(&fx, &["task", "sync", "--change", CHANGE])
            .status
            .success()
    );
    let out = spectr(&fx, &["list"]);
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
    assert_eq!(md(&fx), with_box(&edited, "2.7 After the sub-items", 'x'));
}

/// `list` and `status` read: a tasks.md lagging tasks.jsonc (hand edits of
/// tasks.jsonc) is said, with what brings it up to date, and never written;
/// `spectr task sync` ticks it.
#[test]
fn list_and_status_say_a_lagging_tasks_md_and_task_sync_brings_it_up_to_date() {
    let fx = accepted(MD);
    hand_edit(&fx, "2.12", "completed");
    hand_edit(&fx, "2.8", "completed");
    assert_eq!(md(&fx), MD, "a hand edit of tasks.jsonc alone");
    let inode = |p: &Path| std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(p).unwrap());
    let before = inode(&fx.change_dir.join("tasks.md"));
    for cmd in [&["list"][..], &["status"][..], &["status", "--json"][..]] {
        let out = spectr(&fx, cmd);
        assert!(out.status.success(), "{cmd:?}");
        let err = stderr(&out);
        assert_eq!(
            err.matches("tasks.md lags tasks.jsonc").count(),
            1,
            "{cmd:?}: {err}"
        );
        assert!(
            err.contains("2 boxes") && err.contains("2.8, 2.12"),
            "{cmd:?}: {err}"
        );
        assert!(
            err.contains("spectr task sync --change add-widget"),
            "{cmd:?}: {err}"
        );
        assert_eq!(md(&fx), MD, "{cmd:?} wrote tasks.md");
        assert_eq!(inode(&fx.change_dir.join("tasks.md")), before, "{cmd:?}");
    }
    let out = spectr(&fx, &["task", "sync", "--change", CHANGE]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout_text(&out).contains("2 boxes set to match tasks.jsonc (2.8, 2.12)"),
        "{}",
        stdout_text(&out)
    );
    let want = with_box(
        &with_box(MD, "2.7 After the sub-items", 'x'),
        "2.6b Sub-item b",
        'x',
    );
    assert_eq!(md(&fx), want);
    // In step: nothing said, nothing written (the file not even replaced).
    let before = inode(&fx.change_dir.join("tasks.md"));
    for cmd in [&["list"][..], &["status"][..]] {
        let out = spectr(&fx, cmd);
        assert!(
            !stderr(&out).contains("warning"),
            "{cmd:?}: {}",
            stderr(&out)
        );
    }
    let out = spectr(&fx, &["task", "sync", "--change", CHANGE]);
    assert!(
        stdout_text(&out).contains("in step already"),
        "{}",
        stdout_text(&out)
    );
    assert_eq!(inode(&fx.change_dir.join("tasks.md")), before);
}

#[test]
fn the_box_is_written_atomically_and_a_tasks_md_that_cannot_be_written_only_warns() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let fx = accepted(MD);
    let path = fx.change_dir.join("tasks.md");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
    let before = std::fs::metadata(&path).unwrap();
    done(&fx, "1.1", "completed");
    let after = std::fs::metadata(&path).unwrap();
    // Replaced by a rename (never rewritten in place), its mode kept, and no
    // temporary file left beside it.
    assert_ne!(before.ino(), after.ino());
    assert_eq!(after.mode() & 0o777, 0o640);
    let stray: Vec<String> = std::fs::read_dir(&fx.change_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("tmp"))
        .collect();
    assert!(stray.is_empty(), "{stray:?}");
    assert_eq!(md(&fx), with_box(MD, "1.1 Add the parser", 'x'));

    // Read-only: the status is still written; tasks.md is left, with a warning.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
    let out = done(&fx, "2.1", "completed");
    assert_eq!(fx.status("2.1"), "completed");
    assert_eq!(md(&fx), with_box(MD, "1.1 Add the parser", 'x'));
    let err = stderr(&out);
    assert!(
        err.contains("could not tick the boxes of") && err.contains("read-only"),
        "{err}"
    );
}

/// Every box ticked but those of `open` (texts of their lines).
fn all_ticked_but(md_text: &str, open: &[&str]) -> String {
    let mut want = md_text.to_string();
    for line in md_text.lines() {
        let line = line.trim_start();
        let Some(rest) = line
            .strip_prefix("- [ ] ")
            .or_else(|| line.strip_prefix("* [ ] "))
        else {
            continue;
        };
        if rest.starts_with("9.9") || open.iter().any(|o| rest.starts_with(o)) {
            continue;
        }
        want = with_box(&want, rest.trim_end(), 'x');
    }
    want
}

#[test]
fn a_run_ends_with_tasks_md_matching_tasks_jsonc() {
    let fx = accepted(MD);
    with_spectr_on_path(&fx);
    // Agents mark through `spectr task done`, by hand, or not at all (the
    // loop writes the status after a completion signal); 2.9 (`2.6c`) fails
    // and is skipped with what follows it in its lane.
    fx.script(json!({
        "1.1": ["task_done:in_progress", "task_done", "complete"],
        "2.9": [["fail:no"]],
        "2.1": ["complete"],
        "default": ["mark:in_progress", "mark:completed", "complete"]
    }));
    let out = fx.run(&["--json", "--max-retries", "0", "--on-exhaust", "skip"]);
    assert_eq!(out.status.code(), Some(1), "2.9 was skipped");
    let want = all_ticked_but(MD, &["2.6c", "2.6d", "2.6e", "2.7 After"]);
    assert_eq!(md(&fx), want);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("left as it is"));
}

#[test]
fn a_run_in_lanes_ends_with_tasks_md_matching_tasks_jsonc() {
    let md_text = md_split();
    let fx = accepted(&md_text);
    with_spectr_on_path(&fx);
    fx.script(json!({"default": ["task_done:in_progress", "task_done", "complete"]}));
    let out = fx.run(&["--json", "--jobs", "3"]);
    assert_eq!(out.status.code(), Some(0));
    let ev = events(&out);
    assert!(of_kind(&ev, "task_failed").is_empty(), "no box conflicts");
    assert_eq!(of_kind(&ev, "task_completed").len(), 21);
    assert_eq!(md(&fx), all_ticked_but(&md_text, &[]));
    // Ticked in the user's tree by the loop, not merged from the lanes: the
    // tree holds nothing else from tasks.md.
    assert_eq!(spectr(&fx, &["list"]).status.code(), Some(0));
    assert_eq!(md(&fx), all_ticked_but(&md_text, &[]));
}

#[test]
fn openspec_tasks_md_is_the_tasks_file_and_is_not_synced_again() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("project");
    let dir = root.join("openspec/changes/add-story");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("proposal.md"), "# Add story\n").unwrap();
    // Story 1 half ticked: as a story it is pending, and nothing clears the
    // ticked line (OpenSpec's own format writes this file).
    let text = "## 1. Setup\n- [x] 1.1 Create the module\n- [ ] 1.2 Wire it in\n\n## 2. Docs\n- [ ] 2.1 Write the README\n";
    std::fs::write(dir.join("tasks.md"), text).unwrap();
    for args in [&["list"][..], &["status", "--change", "add-story"][..]] {
        let out = std::process::Command::new(spectr_bin())
            .args(args)
            .current_dir(&root)
            .env_remove("SPECTR_ROOT")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
        assert_eq!(std::fs::read_to_string(dir.join("tasks.md")).unwrap(), text);
    }
    let set = spectr::model::TaskSet::load(&dir).unwrap();
    assert_eq!(set.tasks_md_in_step(), None);
}

#[test]
fn a_lanes_boxes_are_mirrored_not_merged_so_a_persons_edit_of_tasks_md_stays() {
    let fx = accepted(MD);
    with_spectr_on_path(&fx);
    // 1.1 and 2.1 each hold their lane until the person's edit is made.
    let started = |id: &str| fx.state.join(format!("{id}-started"));
    let release = fx.state.join("release");
    let held = |id: &str| {
        json!([
            format!("touch:{}", started(id).display()),
            format!("wait_for:{}:60", release.display()),
            "task_done",
            "complete"
        ])
    };
    fx.script(json!({
        "1.1": held("1.1"),
        "2.1": held("2.1"),
        "default": ["task_done", "complete"]
    }));
    let mut cmd = fx.ralph();
    cmd.args(["--json", "--jobs", "2"]);
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let run = Background::from_child(cmd.spawn().unwrap());
    fx.wait_for("the agents to start 1.1 and 2.1", || {
        started("1.1").exists() && started("2.1").exists()
    });
    // A person adds a note under 1.1 (the line next to its box) while the
    // agent works on 1.1 in its lane.
    let note = "- [ ] 1.1 Add the parser\r\n  see the notes in design.md\r\n";
    let edited = MD.replace("- [ ] 1.1 Add the parser\r\n", note);
    std::fs::write(fx.change_dir.join("tasks.md"), &edited).unwrap();
    std::fs::write(&release, "").unwrap();
    let out = run.wait_with_output();
    assert_eq!(out.status.code(), Some(0));
    let ev = events(&out);
    assert!(of_kind(&ev, "task_failed").is_empty(), "no conflict");
    // The note stays, and the boxes follow tasks.jsonc.
    assert_eq!(md(&fx), all_ticked_but(&edited, &[]));
}
