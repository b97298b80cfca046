//! Parse and graph a large generated change: 10,000 tasks across 100 split
//! files (upstream's v2 layout and formatting). Goal: under 20 ms.
//!
//! Run with `cargo bench --bench model`.

use spectr::model::{TaskGraph, TaskId, TaskSet, TaskStatus};

fn main() {
    divan::main();
}

mod support;

const SECTIONS: usize = 100;
const PER_SECTION: usize = 100;

fn big_change() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    support::generate(tmp.path());
    let set = TaskSet::load(tmp.path()).unwrap();
    assert_eq!(set.leaves().count(), SECTIONS * PER_SECTION);
    assert_eq!(set.files.len(), SECTIONS + 1);
    tmp
}

/// The figure the issue asks for: read + parse all 101 files, resolve `$ref`s
/// and includes, then build the graph.
#[divan::bench(sample_count = 30)]
fn parse_and_graph_10k_tasks_100_files(bencher: divan::Bencher) {
    let tmp = big_change();
    bencher.bench(|| {
        let set = TaskSet::load(tmp.path()).unwrap();
        TaskGraph::new(&set).len()
    });
}

#[divan::bench(sample_count = 30)]
fn graph_only_10k_tasks(bencher: divan::Bencher) {
    let tmp = big_change();
    let set = TaskSet::load(tmp.path()).unwrap();
    bencher.bench(|| TaskGraph::new(&set).len());
}

#[divan::bench(sample_count = 30)]
fn ready_10k_tasks(bencher: divan::Bencher) {
    let tmp = big_change();
    let set = TaskSet::load(tmp.path()).unwrap();
    let graph = TaskGraph::new(&set);
    let status: std::collections::HashMap<&TaskId, TaskStatus> =
        set.tasks.iter().map(|t| (&t.id, t.status)).collect();
    bencher.bench(|| {
        graph
            .ready(
                &|id| status.get(id).copied().unwrap_or(TaskStatus::Pending),
                &Default::default(),
                None,
            )
            .len()
    });
}

/// One status edit (leaf + its container, two files, atomic writes).
#[divan::bench(sample_count = 30)]
fn set_status_in_10k_tasks(bencher: divan::Bencher) {
    let tmp = big_change();
    let mut set = TaskSet::load(tmp.path()).unwrap();
    let id = TaskId::from("50.50");
    let mut flip = false;
    bencher.bench_local(|| {
        flip = !flip;
        let s = if flip {
            TaskStatus::Completed
        } else {
            TaskStatus::Pending
        };
        set.set_status(&id, s).unwrap();
    });
}
