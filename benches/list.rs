//! `spectr list` logic over a generated project of 1,000 changes (goal: under
//! 100 ms). Half the changes are flat (10 tasks), half split into 5 files
//! (25 tasks), all written by `spectr accept`'s own code.
//! `load_only` (TaskSet::load alone, one thread) and `read_only` (just reading
//! the files) show where the time goes.
//!
//! Run: `cargo bench --bench list`.

use spectr::cli::list::{render_json, render_text, summarize_all};
use spectr::model::accept;
use spectr::model::spectr_yaml::SpectrConfig;
use spectr::model::{Change, Project};
use std::path::Path;

fn main() {
    divan::main();
}

const CHANGES: usize = 1_000;

struct Fixture {
    // Kept alive for the folder's lifetime.
    _tmp: tempfile::TempDir,
    project: Project,
}

fn tasks_md(sections: usize, per: usize) -> String {
    let mut md = String::from("# Tasks\n");
    for s in 1..=sections {
        md.push_str(&format!("\n## {s}. Section {s}\n\n"));
        for t in 1..=per {
            let mark = if t % 3 == 0 { "x" } else { " " };
            md.push_str(&format!(
                "- [{mark}] {s}.{t} Do step {t} of section {s}, with enough words\n  to wrap onto a second line like real tasks\n"
            ));
        }
    }
    md
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().expect("temp dir");
    let changes = tmp.path().join("spectr/changes");
    let config = SpectrConfig::default();
    for i in 0..CHANGES {
        let id = format!("add-feature-{i:04}");
        let dir = changes.join(&id);
        std::fs::create_dir_all(dir.join("specs/cap")).expect("mkdir");
        std::fs::write(
            dir.join("proposal.md"),
            format!("# Change: Feature {i}\n\n## Why\nBench.\n"),
        )
        .expect("proposal");
        std::fs::write(
            dir.join("specs/cap/spec.md"),
            "## ADDED Requirements\n\n### Requirement: X\n",
        )
        .expect("spec");
        let md = if i % 2 == 0 {
            tasks_md(2, 5)
        } else {
            tasks_md(5, 5)
        };
        std::fs::write(dir.join("tasks.md"), md).expect("tasks.md");
        let change = Change { id, dir };
        accept::plan(&change, &config)
            .and_then(|p| p.write())
            .expect("accept");
    }
    let project =
        Project::discover_with(tmp.path(), Some(tmp.path().as_os_str())).expect("project");
    Fixture { _tmp: tmp, project }
}

#[divan::bench(sample_count = 20)]
fn list_text(bencher: divan::Bencher) {
    let f = fixture();
    let root: &Path = &f.project.root;
    bencher.bench(|| {
        let summaries = summarize_all(&f.project, false).expect("list");
        assert_eq!(summaries.len(), CHANGES);
        render_text(&summaries, root)
    });
}

#[divan::bench(sample_count = 20)]
fn list_json(bencher: divan::Bencher) {
    let f = fixture();
    let root: &Path = &f.project.root;
    bencher.bench(|| {
        let summaries = summarize_all(&f.project, true).expect("list");
        render_json(&summaries, root).expect("json")
    });
}

#[divan::bench(sample_count = 10)]
fn load_only(bencher: divan::Bencher) {
    let f = fixture();
    let changes = f.project.active_changes().expect("changes");
    bencher.bench(|| {
        changes
            .iter()
            .map(|c| {
                spectr::model::TaskSet::load(&c.dir)
                    .expect("load")
                    .tasks
                    .len()
            })
            .sum::<usize>()
    });
}

#[divan::bench(sample_count = 10)]
fn read_only(bencher: divan::Bencher) {
    let f = fixture();
    let changes = f.project.active_changes().expect("changes");
    bencher.bench(|| {
        let mut n = 0;
        for c in &changes {
            for e in std::fs::read_dir(&c.dir).expect("dir") {
                let p = e.expect("e").path();
                if p.extension().is_some_and(|x| x == "jsonc") {
                    n += std::fs::read_to_string(&p).expect("read").len();
                }
            }
        }
        n
    });
}
