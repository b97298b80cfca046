//! Byte-mutation fuzzing of every parser that reads a user's file: the
//! tasks.jsonc loader (v1, and v2 with `$ref` split files), OpenSpec's
//! tasks.md, `spectr accept`'s tasks.md parser, and the session file.
//!
//! Real files (the upstream fixtures and this repository's sample change) are
//! mutated at the byte level, invalid UTF-8 included: bit flips, byte sets,
//! inserts of bytes and of JSON / markdown tokens, deletes, truncation, and
//! splices of chunks from another file. Properties: nothing panics; an error
//! names the file and (for everything that points into a file) its line; and
//! on a file that still loads, a status edit changes nothing but status
//! literals.
//!
//! Seeded, so CI runs the same few hundred cases each time. More:
//! `PROPTEST_CASES=20000 cargo test --release --test fuzz_parsers`
//! (`PROPTEST_RNG_SEED=<n>` picks another seed). `tests/model_proptest.rs`
//! holds the generated-file properties (exact one-literal edits on built files,
//! token soup); this file sits beside it with real files and raw bytes.

mod common;
use common::model::FIXTURES;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};
use spectr::model::accept;
use spectr::model::spectr_yaml::SpectrConfig;
use spectr::model::{Change, TaskGraph, TaskId, TaskSet, TaskStatus};
use spectr::ralph::session::{Session, SessionOptions};
use std::fs;
use std::path::{Path, PathBuf};

const SAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/spectr/changes/add-greeting-cli"
);

fn config(default_cases: u32) -> Config {
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    Config {
        cases: env("PROPTEST_CASES").map_or(default_cases, |n| n.min(u32::MAX.into()) as u32),
        rng_seed: RngSeed::Fixed(env("PROPTEST_RNG_SEED").unwrap_or(0x5eed_0823)),
        failure_persistence: None,
        ..Config::default()
    }
}

/// The files of a change folder, by name.
fn files_of(dir: &Path, names: &[&str]) -> Vec<(String, Vec<u8>)> {
    names
        .iter()
        .map(|n| (n.to_string(), fs::read(dir.join(n)).expect("fixture file")))
        .collect()
}

fn v1() -> Vec<(String, Vec<u8>)> {
    files_of(
        &Path::new(FIXTURES).join("add-relative-line-numbers"),
        &["tasks.jsonc"],
    )
}

fn v2() -> Vec<(String, Vec<u8>)> {
    let names = [
        "tasks.jsonc",
        "tasks-1.jsonc",
        "tasks-2.jsonc",
        "tasks-3.jsonc",
        "tasks-4.jsonc",
        "tasks-5.jsonc",
        "tasks-6.jsonc",
    ];
    files_of(
        &Path::new(FIXTURES).join("add-multi-repo-discovery"),
        &names,
    )
}

fn sample() -> Vec<(String, Vec<u8>)> {
    files_of(Path::new(SAMPLE), &["tasks.jsonc"])
}

/// Every tasks.md we have.
fn markdowns() -> Vec<Vec<u8>> {
    let mut out = vec![fs::read(Path::new(SAMPLE).join("tasks.md")).unwrap()];
    for c in ["add-relative-line-numbers", "add-multi-repo-discovery"] {
        out.push(fs::read(Path::new(FIXTURES).join(c).join("tasks.md")).unwrap());
    }
    out
}

/// A session file as spectr writes it.
fn session_bytes() -> Vec<u8> {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("session.json");
    let mut s = Session::new(
        "c",
        SessionOptions {
            agent: "claude".into(),
            max_retries: 3,
            checkpoints: true,
            verify: Some("cargo test".into()),
            commit_branch: None,
            commit_base: None,
        },
        Some(vec![TaskId::from("1.1"), TaskId::from("1.2")]),
    );
    let r = s.record_mut(&TaskId::from("1.1"));
    r.counted_attempts = 2;
    r.last_reason = Some("tests fail: \"x\" ✗".into());
    s.record_mut(&TaskId::from("1.2"));
    s.save(&path).unwrap();
    fs::read(&path).unwrap()
}

/// Tokens worth inserting: structure, keys and values the parsers branch on,
/// and bytes that are not UTF-8 or are controls.
const TOKENS: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b"\"",
    b"\\",
    b"\\u00",
    b"//",
    b"/*",
    b"*/",
    b"\n",
    b"\r",
    b"\"$ref:tasks-1.jsonc\"",
    b"\"$ref:../x\"",
    b"\"$ref:tasks.jsonc\"",
    b"\"status\": \"complete\"",
    b"\"children\": []",
    b"\"id\": \"1.1\"",
    b"\"parent\": \"9\"",
    b"\"includes\": [\"*.jsonc\"]",
    b"\"version\": 2",
    b"null",
    b"1e999",
    b"## 3. ",
    b"## ",
    b"- [ ] ",
    b"- [x] ",
    b"```\n",
    b"  ",
    b"\xff",
    b"\xc3",
    b"\xe2\x82",
    b"\xef\xbb\xbf",
    b"\x00",
    b"\x1b[2J",
];

#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Set(usize, u8),
    Insert(usize, Vec<u8>),
    Token(usize, usize),
    Delete(usize, usize),
    Truncate(usize),
    /// Copy `len` bytes from position `from` of another file (or this one).
    Splice {
        at: usize,
        other: usize,
        from: usize,
        len: usize,
    },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => (any::<usize>(), 0u8..8).prop_map(|(p, b)| Mutation::Flip(p, b)),
        2 => (any::<usize>(), any::<u8>()).prop_map(|(p, b)| Mutation::Set(p, b)),
        1 => (any::<usize>(), prop::collection::vec(any::<u8>(), 1..4))
            .prop_map(|(p, b)| Mutation::Insert(p, b)),
        3 => (any::<usize>(), any::<usize>()).prop_map(|(p, t)| Mutation::Token(p, t)),
        2 => (any::<usize>(), 1usize..64).prop_map(|(p, n)| Mutation::Delete(p, n)),
        1 => any::<usize>().prop_map(Mutation::Truncate),
        1 => (any::<usize>(), any::<usize>(), any::<usize>(), 1usize..200).prop_map(
            |(at, other, from, len)| Mutation::Splice { at, other, from, len }
        ),
    ]
}

fn mutations() -> impl Strategy<Value = Vec<Mutation>> {
    prop::collection::vec(mutation(), 1..6)
}

/// Applies `edits` to `pool[target]`; splices read from any file of `pool`.
fn mutate(pool: &[Vec<u8>], target: usize, edits: &[Mutation]) -> Vec<u8> {
    let mut b = pool[target].clone();
    let at = |p: usize, len: usize| if len == 0 { 0 } else { p % (len + 1) };
    for m in edits {
        match m {
            Mutation::Flip(p, bit) if !b.is_empty() => {
                let i = p % b.len();
                b[i] ^= 1 << bit;
            }
            Mutation::Set(p, byte) if !b.is_empty() => {
                let i = p % b.len();
                b[i] = *byte;
            }
            Mutation::Insert(p, bytes) => {
                let i = at(*p, b.len());
                b.splice(i..i, bytes.iter().copied());
            }
            Mutation::Token(p, t) => {
                let i = at(*p, b.len());
                b.splice(i..i, TOKENS[t % TOKENS.len()].iter().copied());
            }
            Mutation::Delete(p, n) if !b.is_empty() => {
                let i = p % b.len();
                let end = (i + n).min(b.len());
                b.drain(i..end);
            }
            Mutation::Truncate(p) => b.truncate(at(*p, b.len())),
            Mutation::Splice {
                at: p,
                other,
                from,
                len,
            } => {
                let src = &pool[other % pool.len()];
                if !src.is_empty() {
                    let s = from % src.len();
                    let chunk: Vec<u8> = src[s..(s + len).min(src.len())].to_vec();
                    let i = at(*p, b.len());
                    b.splice(i..i, chunk);
                }
            }
            _ => {}
        }
    }
    b
}

/// True when `msg` names a file under `dir` followed by `:LINE`.
fn names_file_and_line(msg: &str, dir: &Path) -> bool {
    let prefix = format!("{}/", dir.display());
    msg.match_indices(&prefix).any(|(i, _)| {
        let rest = &msg[i + prefix.len()..];
        rest.split_once(':')
            .is_some_and(|(_, after)| after.chars().next().is_some_and(|c| c.is_ascii_digit()))
    })
}

/// A change folder under `<tmp>/spectr/changes/c` (or `openspec/...`).
fn change_dir(tmp: &Path, openspec: bool) -> PathBuf {
    let base = if openspec { "openspec" } else { "spectr" };
    let dir = tmp.join(base).join("changes/c");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("proposal.md"), "# c\n").unwrap();
    dir
}

/// `"pending"`, `"in_progress"` and `"completed"` all read as `"S"`, and an
/// inserted `, "status": "S"` removed: equal iff only statuses changed.
fn statuses_blanked(text: &str) -> String {
    let mut t = text.to_string();
    for s in ["\"pending\"", "\"in_progress\"", "\"completed\""] {
        t = t.replace(s, "\"S\"");
    }
    t.replace(", \"status\": \"S\"", "")
}

/// Loads the mutated change; checks the error or, on success, that a status
/// edit of one leaf changes status literals only.
fn check_tasks_change(
    dir: &Path,
    pick: prop::sample::Index,
    new: usize,
) -> Result<(), TestCaseError> {
    let set = match TaskSet::load(dir) {
        Ok(set) => set,
        Err(e) => {
            let msg = e.to_string();
            prop_assert!(names_file_and_line(&msg, dir), "no file:line in: {}", msg);
            // `list` reads the same files leniently: never a panic either.
            let _ = TaskSet::load_lenient(dir);
            return Ok(());
        }
    };
    let graph = TaskGraph::new(&set);
    let _ = graph.lanes();
    let leaves: Vec<TaskId> = set.leaves().map(|t| t.id.clone()).collect();
    if leaves.is_empty() {
        return Ok(());
    }
    let id = leaves[pick.index(leaves.len())].clone();
    let status = [
        TaskStatus::Pending,
        TaskStatus::InProgress,
        TaskStatus::Completed,
    ][new % 3];
    let before: Vec<(PathBuf, String)> = set
        .files
        .iter()
        .map(|f| (f.path.clone(), f.content.clone()))
        .collect();
    let others: Vec<(TaskId, TaskStatus, String)> = set
        .tasks
        .iter()
        .filter(|t| !t.is_container() && t.id != id)
        .map(|t| (t.id.clone(), t.status, t.description.clone()))
        .collect();
    let mut set = set;
    if let Err(e) = set.set_status(&id, status) {
        return Err(TestCaseError::fail(format!(
            "a file that loads could not take a status edit of {id}: {e}"
        )));
    }
    for (path, old) in &before {
        let now = fs::read_to_string(path).unwrap();
        prop_assert_eq!(
            statuses_blanked(&now),
            statuses_blanked(old),
            "{} changed beyond status literals",
            path.display()
        );
    }
    let again = TaskSet::load(dir).map_err(|e| TestCaseError::fail(format!("reload: {e}")))?;
    prop_assert_eq!(again.task(&id).map(|t| t.status), Some(status));
    for (oid, ostatus, odesc) in others {
        let t = again.task(&oid);
        prop_assert_eq!(
            t.map(|t| (t.status, t.description.clone())),
            Some((ostatus, odesc))
        );
    }
    Ok(())
}

fn write_all(dir: &Path, files: &[(String, Vec<u8>)]) {
    for (name, bytes) in files {
        fs::write(dir.join(name), bytes).unwrap();
    }
}

proptest! {
    #![proptest_config(config(96))]

    #[test]
    fn tasks_jsonc_v1(edits in mutations(), sample_file in any::<bool>(),
                      pick in any::<prop::sample::Index>(), new in 0usize..3) {
        let files = if sample_file { sample() } else { v1() };
        let pool: Vec<Vec<u8>> = files.iter().map(|f| f.1.clone()).chain(markdowns()).collect();
        let tmp = tempfile::tempdir().unwrap();
        let dir = change_dir(tmp.path(), false);
        write_all(&dir, &[(files[0].0.clone(), mutate(&pool, 0, &edits))]);
        check_tasks_change(&dir, pick, new)?;
    }

    #[test]
    fn tasks_jsonc_v2_split_files(edits in mutations(), target in 0usize..7, second in 0usize..7,
                                  more in mutations(), pick in any::<prop::sample::Index>(),
                                  new in 0usize..3) {
        let mut files = v2();
        let pool: Vec<Vec<u8>> = files.iter().map(|f| f.1.clone()).collect();
        files[target].1 = mutate(&pool, target, &edits);
        if second != target {
            files[second].1 = mutate(&pool, second, &more);
        }
        let tmp = tempfile::tempdir().unwrap();
        let dir = change_dir(tmp.path(), false);
        write_all(&dir, &files);
        check_tasks_change(&dir, pick, new)?;
    }

    #[test]
    fn openspec_tasks_md(edits in mutations(), which in 0usize..3) {
        let pool = markdowns();
        let tmp = tempfile::tempdir().unwrap();
        let dir = change_dir(tmp.path(), true);
        fs::write(dir.join("tasks.md"), mutate(&pool, which, &edits)).unwrap();
        match TaskSet::load(&dir) {
            Ok(mut set) => {
                let _ = TaskGraph::new(&set).lanes();
                let first = set.leaves().next().map(|t| t.id.clone());
                if let Some(t) = first {
                    set.set_status(&t, TaskStatus::Completed)
                        .map_err(|e| TestCaseError::fail(format!("edit {t}: {e}")))?;
                }
            }
            Err(e) => {
                let msg = e.to_string();
                prop_assert!(names_file_and_line(&msg, &dir), "no file:line in: {}", msg);
            }
        }
    }

    #[test]
    fn accept_tasks_md(edits in mutations(), which in 0usize..3, with_jsonc in any::<bool>()) {
        let pool = markdowns();
        let tmp = tempfile::tempdir().unwrap();
        let dir = change_dir(tmp.path(), false);
        fs::write(dir.join("tasks.md"), mutate(&pool, which, &edits)).unwrap();
        if with_jsonc {
            write_all(&dir, &sample());
        }
        let change = Change { id: "c".into(), dir: dir.clone() };
        match accept::plan(&change, &SpectrConfig::default()) {
            Ok(plan) => {
                // What accept writes loads again.
                plan.write().map_err(|e| TestCaseError::fail(format!("write: {e}")))?;
                TaskSet::load(&dir).map_err(|e| TestCaseError::fail(format!("reload: {e}")))?;
            }
            Err(e) => {
                let msg = e.to_string();
                let located = names_file_and_line(&msg, &dir);
                // Only "there are no tasks" has no place to point at.
                let whole_file = matches!(e, accept::AcceptError::NoTasks { .. });
                prop_assert!(msg.contains(&dir.display().to_string()), "no file in: {}", msg);
                prop_assert!(located || whole_file, "no file:line in: {}", msg);
            }
        }
    }

    #[test]
    fn session_file(edits in mutations()) {
        let pool = vec![session_bytes()];
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join(".ralph-session.json");
        fs::write(&path, mutate(&pool, 0, &edits)).unwrap();
        if let Err(e) = Session::load(&path, "c") {
            let msg = e.to_string();
            prop_assert!(msg.contains(&path.display().to_string()), "no file in: {}", msg);
            // A JSON problem has a place; a wrong version or change is a fact
            // about the whole file.
            let placeless = msg.contains("\"version\"") || msg.contains("has version")
                || msg.contains("belongs to change");
            prop_assert!(msg.contains("line") || placeless, "no line in: {}", msg);
        }
    }
}

#[test]
fn the_corpus_itself_loads() {
    let tmp = tempfile::tempdir().unwrap();
    for (i, files) in [v1(), v2(), sample()].into_iter().enumerate() {
        let dir = change_dir(&tmp.path().join(i.to_string()), false);
        write_all(&dir, &files);
        TaskSet::load(&dir).unwrap();
    }
    let path = tmp.path().join("s.json");
    fs::write(&path, session_bytes()).unwrap();
    assert!(Session::load(&path, "c").unwrap().is_some());
}

#[test]
fn the_checks_can_fail() {
    let dir = Path::new("/p/spectr/changes/c");
    assert!(names_file_and_line(
        "/p/spectr/changes/c/tasks-1.jsonc:3:4: x",
        dir
    ));
    assert!(!names_file_and_line(
        "cannot read /p/spectr/changes/c/tasks.jsonc",
        dir
    ));
    assert_ne!(
        statuses_blanked("{\"status\": \"pending\", \"d\": \"a\"}"),
        statuses_blanked("{\"status\": \"pending\", \"d\": \"b\"}")
    );
    assert_eq!(
        statuses_blanked("{\"id\": \"1\", \"status\": \"pending\"}"),
        statuses_blanked("{\"id\": \"1\"}")
    );
    let m = mutate(&[b"abc".to_vec()], 0, &[Mutation::Token(1, 0)]);
    assert_eq!(m, b"a{bc");
}
