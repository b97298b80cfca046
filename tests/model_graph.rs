//! The task graph: lanes, run order, ready tasks, dependents.

mod common;
use common::model::*;
use spectr::model::graph::container_status;
use spectr::model::{TaskGraph, TaskId, TaskSet, TaskStatus};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;

fn id(s: &str) -> TaskId {
    TaskId::from(s)
}

fn strs(v: &[TaskId]) -> Vec<&str> {
    v.iter().map(TaskId::as_str).collect()
}

/// A status table: every leaf pending except those listed.
fn statuses(set: &TaskSet, set_to: &[(&str, TaskStatus)]) -> BTreeMap<TaskId, TaskStatus> {
    let mut m: BTreeMap<TaskId, TaskStatus> = set
        .leaves()
        .map(|t| (t.id.clone(), TaskStatus::Pending))
        .collect();
    for (i, s) in set_to {
        m.insert(id(i), *s);
    }
    m
}

fn ready(
    g: &TaskGraph,
    st: &BTreeMap<TaskId, TaskStatus>,
    blocked: &[&str],
    selection: Option<&[&str]>,
) -> Vec<String> {
    let blocked: BTreeSet<TaskId> = blocked.iter().map(|s| id(s)).collect();
    let selection: Option<BTreeSet<TaskId>> = selection.map(|s| s.iter().map(|x| id(x)).collect());
    g.ready(
        &|t| st.get(t).copied().unwrap_or(TaskStatus::Pending),
        &blocked,
        selection.as_ref(),
    )
    .into_iter()
    .map(|t| t.to_string())
    .collect()
}

#[test]
fn v1_lanes_are_first_id_segments() {
    let set = TaskSet::load(&fixture("add-relative-line-numbers")).unwrap();
    let g = TaskGraph::new(&set);
    let lanes: Vec<(&str, Vec<&str>)> = g
        .lanes()
        .iter()
        .map(|l| (l.key.as_str(), strs(&l.tasks)))
        .collect();
    assert_eq!(
        lanes,
        [
            ("1", vec!["1.1", "1.2", "1.3", "1.4", "1.5", "1.6"]),
            ("2", vec!["2.1", "2.2"]),
            ("3", vec!["3.1", "3.2", "3.3", "3.4"]),
            ("4", vec!["4.1"]),
        ]
    );
    assert_eq!(g.len(), 13);
    // Everything completed in the fixture: nothing is ready.
    assert!(
        g.ready(&|t| set.task(t).unwrap().status, &BTreeSet::new(), None)
            .is_empty()
    );
}

#[test]
fn v2_lanes_are_root_entries_and_containers_never_run() {
    let set = TaskSet::load(&fixture("add-multi-repo-discovery")).unwrap();
    let g = TaskGraph::new(&set);
    let keys: Vec<&str> = g.lanes().iter().map(|l| l.key.as_str()).collect();
    assert_eq!(keys, ["1", "2", "3", "4", "5", "6"]);
    assert_eq!(g.len(), 22);
    assert_eq!(g.order().count(), 22);
    assert!(g.order().all(|t| !set.task(t).unwrap().is_container()));
    assert_eq!(g.lane_of(&id("1")).unwrap().key, "1");
    assert_eq!(g.lane_of(&id("3.2")).unwrap().key, "3");
    assert!(g.lane_of(&id("9")).is_none());
    assert_eq!(strs(g.leaves_under(&id("4"))), ["4.1", "4.2", "4.3", "4.4"]);

    // Section 6 is upstream's "99.99.99 Final section (after all tasks)".
    let st = statuses(&set, &[]);
    assert_eq!(
        ready(&g, &st, &[], None),
        ["1.1", "2.1", "3.1", "4.1", "5.1"]
    );
    assert!(g.runs_last(&g.lanes()[5]));
    assert!(!g.runs_last(&g.lanes()[0]));
    assert_eq!(
        container_status(&set, &id("1")),
        Some(TaskStatus::Completed)
    );
}

const TREE: &str = r#"{"tasks": [
    {"id": "2", "children": [{"id": "2.2"}, {"id": "2.1"}]},
    {"id": "1", "children": [
        {"id": "1.10"},
        {"id": "1.2", "children": [{"id": "1.2.2"}, {"id": "1.2.1"}]},
        {"id": "1.1"}
    ]},
    {"id": "10.1"},
    {"id": "10.2"}
]}"#;

#[test]
fn depth_first_numeric_order_and_lanes() {
    let (_t, dir) = change(&[("tasks.jsonc", TREE)]);
    let set = TaskSet::load(&dir).unwrap();
    let g = TaskGraph::new(&set);
    let lanes: Vec<(&str, Vec<&str>)> = g
        .lanes()
        .iter()
        .map(|l| (l.key.as_str(), strs(&l.tasks)))
        .collect();
    assert_eq!(
        lanes,
        [
            ("1", vec!["1.1", "1.2.1", "1.2.2", "1.10"]),
            ("2", vec!["2.1", "2.2"]),
            ("10", vec!["10.1", "10.2"]),
        ]
    );
    assert_eq!(
        g.order().map(TaskId::as_str).collect::<Vec<_>>(),
        [
            "1.1", "1.2.1", "1.2.2", "1.10", "2.1", "2.2", "10.1", "10.2"
        ]
    );
    // Deterministic: building twice gives the same lanes.
    assert_eq!(TaskGraph::new(&set).lanes(), g.lanes());
}

#[test]
fn ready_walks_each_lane_in_order() {
    let (_t, dir) = change(&[("tasks.jsonc", TREE)]);
    let set = TaskSet::load(&dir).unwrap();
    let g = TaskGraph::new(&set);
    use TaskStatus::*;

    let st = statuses(&set, &[]);
    assert_eq!(ready(&g, &st, &[], None), ["1.1", "2.1", "10.1"]);

    // An in-progress leaf is still the lane's next task.
    let st = statuses(
        &set,
        &[
            ("1.1", Completed),
            ("1.2.1", InProgress),
            ("2.1", Completed),
        ],
    );
    assert_eq!(ready(&g, &st, &[], None), ["1.2.1", "2.2", "10.1"]);

    // A blocked (skipped) task stops its lane only.
    assert_eq!(ready(&g, &st, &["1.2.1"], None), ["2.2", "10.1"]);
    // A blocked task that is already completed is passed over.
    assert_eq!(ready(&g, &st, &["1.1"], None), ["1.2.1", "2.2", "10.1"]);

    // Leaves outside the selection are passed over and don't block.
    let sel = ["1.10", "10.2"];
    assert_eq!(ready(&g, &st, &[], Some(&sel)), ["1.10", "10.2"]);
    assert_eq!(ready(&g, &st, &["1.10"], Some(&sel)), ["10.2"]);

    // Out-of-order completion: the lane's first unfinished leaf is next.
    let st = statuses(&set, &[("1.2.2", Completed), ("1.10", Completed)]);
    assert_eq!(ready(&g, &st, &[], None), ["1.1", "2.1", "10.1"]);

    let all_done: BTreeMap<TaskId, TaskStatus> =
        set.leaves().map(|t| (t.id.clone(), Completed)).collect();
    assert!(ready(&g, &all_done, &[], None).is_empty());
}

#[test]
fn dependents_are_later_leaves_of_the_lane() {
    let (_t, dir) = change(&[("tasks.jsonc", TREE)]);
    let set = TaskSet::load(&dir).unwrap();
    let g = TaskGraph::new(&set);
    assert_eq!(strs(&g.dependents(&id("1.1"))), ["1.2.1", "1.2.2", "1.10"]);
    assert_eq!(strs(&g.dependents(&id("1.2.1"))), ["1.2.2", "1.10"]);
    assert_eq!(strs(&g.dependents(&id("1.10"))), Vec::<&str>::new());
    assert_eq!(strs(&g.dependents(&id("2.1"))), ["2.2"]);
    // A container: what follows its last leaf.
    assert_eq!(strs(&g.dependents(&id("1.2"))), ["1.10"]);
    assert_eq!(strs(&g.dependents(&id("1"))), Vec::<&str>::new());
    assert!(g.dependents(&id("nope")).is_empty());
}

#[test]
fn container_status_aggregates_leaves() {
    let (_t, dir) = change(&[(
        "tasks.jsonc",
        r#"{"tasks": [
            {"id": "1", "status": "completed", "children": [
                {"id": "1.1", "status": "completed"},
                {"id": "1.2", "status": "pending", "children": [
                    {"id": "1.2.1", "status": "completed"},
                    {"id": "1.2.2", "status": "completed"}
                ]}
            ]},
            {"id": "2", "children": [{"id": "2.1", "status": "pending"}]},
            {"id": "3", "children": [{"id": "3.1", "status": "in_progress"}, {"id": "3.2"}]},
            {"id": "4", "children": [{"id": "4.1", "status": "completed"}, {"id": "4.2"}]}
        ]}"#,
    )]);
    let set = TaskSet::load(&dir).unwrap();
    // From leaves, whatever the containers' own (stale) values say.
    assert_eq!(
        container_status(&set, &id("1")),
        Some(TaskStatus::Completed)
    );
    assert_eq!(
        container_status(&set, &id("1.2")),
        Some(TaskStatus::Completed)
    );
    assert_eq!(container_status(&set, &id("2")), Some(TaskStatus::Pending));
    assert_eq!(
        container_status(&set, &id("3")),
        Some(TaskStatus::InProgress)
    );
    assert_eq!(
        container_status(&set, &id("4")),
        Some(TaskStatus::InProgress)
    );
    assert_eq!(
        container_status(&set, &id("3.1")),
        Some(TaskStatus::InProgress)
    );
    assert_eq!(container_status(&set, &id("9")), None);
}

#[test]
fn openspec_stories_run_in_one_lane_each() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("openspec/changes/add-story");
    fs::create_dir_all(&dir).unwrap();
    fs::write(
        dir.join("tasks.md"),
        "## 1. A\n- [x] a\n## 2. B\n- [ ] b\n## 10. C\n- [ ] c\n",
    )
    .unwrap();
    let set = TaskSet::load(&dir).unwrap();
    let g = TaskGraph::new(&set);
    assert_eq!(
        g.order().map(TaskId::as_str).collect::<Vec<_>>(),
        ["1", "2", "10"]
    );
    assert_eq!(
        g.ready(&|t| set.task(t).unwrap().status, &BTreeSet::new(), None),
        [id("2"), id("10")]
    );
}

#[test]
fn the_final_section_waits_for_every_other_lane() {
    use TaskStatus::*;
    let set = TaskSet::load(&fixture("add-multi-repo-discovery")).unwrap();
    let g = TaskGraph::new(&set);
    let done_but = |open: &[&str]| -> BTreeMap<TaskId, TaskStatus> {
        set.leaves()
            .map(|t| {
                let s = if open.contains(&t.id.as_str()) {
                    Pending
                } else {
                    Completed
                };
                (t.id.clone(), s)
            })
            .collect()
    };
    assert_eq!(ready(&g, &done_but(&["6.1"]), &[], None), ["6.1"]);
    assert_eq!(ready(&g, &done_but(&["3.4", "6.1"]), &[], None), ["3.4"]);
    // A skipped task keeps the final section from ever running...
    assert!(ready(&g, &done_but(&["3.4", "6.1"]), &["3.4"], None).is_empty());
    // ...so it is among the skipped task's dependents.
    assert_eq!(strs(&g.dependents(&id("3.3"))), ["3.4", "6.1"]);
    assert_eq!(strs(&g.dependents(&id("6.1"))), Vec::<&str>::new());
    // Tasks outside the selection don't hold it back.
    let sel = ["6.1"];
    assert_eq!(
        ready(&g, &done_but(&["3.4", "6.1"]), &[], Some(&sel)),
        ["6.1"]
    );
    // In progress counts as not done.
    let mut st = done_but(&["6.1"]);
    st.insert(id("2.2"), InProgress);
    assert_eq!(ready(&g, &st, &[], None), ["2.2"]);
}

#[test]
fn a_change_made_only_of_final_sections_runs_normally() {
    let (_t, dir) = change(&[(
        "tasks.jsonc",
        r#"{"tasks": [
            {"id": "1.1", "section": "99.99.99 Final section (after all tasks)"},
            {"id": "2.1", "section": "99.99.99 Final section (after all tasks)"}
        ]}"#,
    )]);
    let set = TaskSet::load(&dir).unwrap();
    let g = TaskGraph::new(&set);
    assert!(!g.runs_last(&g.lanes()[0]));
    let st = statuses(&set, &[]);
    assert_eq!(ready(&g, &st, &[], None), ["1.1", "2.1"]);
}
