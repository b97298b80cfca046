//! Golden tests: the exact bytes a whole `spectr ralph` run writes to an
//! 80-column terminal, with colours and without, for the bundled sample
//! change (`spectr/changes/add-greeting-cli`) and the scripted agent playing
//! `scripts/demo-agent.json`, as `scripts/demo.sh` runs it. Only what must
//! vary is replaced, with placeholders: the scratch project's path
//! (`<project>`), session ids (`<session-id>`), the run's timestamp
//! (`<timestamp>`), durations (`<time>`), task commits' ids (`<commit>`),
//! the progress rows' clock
//! (`hh:mm:ss`) and spinner frame (`⠿`), and the redraws the progress
//! thread adds on its own clock (one per 200 ms, however many fit in the run).
//!
//! A third golden file is what the plain run leaves on the screen (through
//! `common::screen`), as the README shows it. After a deliberate change to
//! the output, refresh them with
//!
//!     SPECTR_UPDATE_GOLDEN=1 cargo test --test ralph_golden
//!
//! and review the diff before committing it.

mod common;

use common::pty::spawn_command_sized;
use common::screen::Screen;
use common::*;
use std::path::{Path, PathBuf};

const UPDATE_ENV: &str = "SPECTR_UPDATE_GOLDEN";
const SAMPLE: &str = "add-greeting-cli";

/// A scratch project holding only the sample change, committed, with the
/// scripted agent as `claude` on PATH: what `scripts/demo.sh` builds.
struct Sample {
    _dir: tempfile::TempDir,
    root: PathBuf,
    bin: PathBuf,
    state: PathBuf,
}

fn sample() -> Sample {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("project");
    copy_dir(&repo.join("spectr"), &root.join("spectr"));
    for entry in std::fs::read_dir(root.join("spectr/changes")).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if name != SAMPLE && name != "archive" && entry.file_type().unwrap().is_dir() {
            std::fs::remove_dir_all(entry.path()).unwrap();
        }
    }
    std::fs::copy(
        repo.join("scripts/demo-agent.json"),
        root.join(".demo-agent.json"),
    )
    .unwrap();
    std::fs::write(root.join(".gitignore"), ".demo-agent.json\n").unwrap();
    git(&root, &["init", "-q", "-b", "main"]);
    git(&root, &["config", "user.name", "Spectr Tests"]);
    git(&root, &["config", "user.email", "tests@spectr.invalid"]);
    git(&root, &["add", "-A"]);
    git(&root, &["commit", "-qm", "sample project"]);
    let bin = dir.path().join("bin");
    let state = dir.path().join("state");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&state).unwrap();
    std::os::unix::fs::symlink(fake_agent_bin(), bin.join("claude")).unwrap();
    Sample {
        _dir: dir,
        root,
        bin,
        state,
    }
}

/// The whole run's bytes on an 80 × 24 terminal, `colour` or NO_COLOR.
fn run_on_terminal(s: &Sample, colour: bool) -> String {
    let mut cmd = std::process::Command::new(spectr_bin());
    cmd.current_dir(&s.root)
        .env(
            "PATH",
            format!(
                "{}:{}",
                s.bin.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .env("SPECTR_FAKE_SCRIPT", s.root.join(".demo-agent.json"))
        .env("SPECTR_FAKE_STATE", &s.state)
        .env(
            "XDG_CACHE_HOME",
            s.root.parent().expect("a parent").join("cache"),
        )
        .env_remove("SPECTR_ROOT")
        .env_remove("SPECTR_RALPH_CHANGE");
    if colour {
        cmd.env_remove("NO_COLOR").env("CLICOLOR_FORCE", "1");
    } else {
        cmd.env("NO_COLOR", "1").env_remove("CLICOLOR_FORCE");
    }
    let mut session =
        spawn_command_sized(cmd, 80, 24, &format!("ralph {SAMPLE} --agent claude --yes"));
    let all = session.expect(expectrl::Eof).expect("the run ends");
    assert_eq!(pty::exit_code(&mut session), Some(0));
    String::from_utf8(all.as_bytes().to_vec()).expect("spectr writes UTF-8")
}

/// Replaces what must vary from run to run with placeholders.
fn normalise(bytes: &str, project: &Path) -> String {
    let text = bytes.replace(&project.display().to_string(), "<project>");
    let text = text.replace(
        &format!("spectr-fake-agent {}", env!("CARGO_PKG_VERSION")),
        "spectr-fake-agent <version>",
    );
    let text = replace_words(&text, |w| {
        if is_uuid(w) {
            Some("<session-id>".into())
        } else if is_timestamp(w) {
            Some("<timestamp>".into())
        } else if is_duration(w) {
            Some("<time>".into())
        } else if is_clock(w) {
            Some("hh:mm:ss".into())
        } else if is_short_commit(w) {
            Some("<commit>".into())
        } else {
            None
        }
    });
    let text: String = text
        .chars()
        .map(|c| {
            if ('⠁'..='⣿').contains(&c) {
                '⠿'
            } else {
                c
            }
        })
        .collect();
    drop_repeated_redraws(&text)
}

/// A commit's id as the run shows it (`committed 3f2a1b9c04`): its date
/// makes it differ from run to run.
fn is_short_commit(w: &str) -> bool {
    w.len() == 10
        && w.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// `f` applied to each run of characters without spaces, slashes or
/// escape sequences around it.
fn replace_words(text: &str, f: impl Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        match f(word) {
            Some(w) => out.push_str(&w),
            None => out.push_str(word),
        }
        word.clear();
    };
    for c in text.chars() {
        if c.is_alphanumeric() || matches!(c, '.' | ':' | '-') {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

fn is_uuid(w: &str) -> bool {
    let parts: Vec<&str> = w.split('-').collect();
    parts.iter().map(|p| p.len()).eq([8, 4, 4, 4, 12])
        && parts
            .iter()
            .all(|p| p.chars().all(|c| c.is_ascii_hexdigit()))
}

/// A run's transcripts folder: `2025-01-31T10-20-30Z`.
fn is_timestamp(w: &str) -> bool {
    w.len() == 20
        && w.ends_with('Z')
        && w.as_bytes()[10] == b'T'
        && w[..19]
            .chars()
            .all(|c| c.is_ascii_digit() || c == '-' || c == 'T')
}

/// What `format_duration` writes for under a minute: `0.4s`, `12s`.
fn is_duration(w: &str) -> bool {
    w.strip_suffix('s').is_some_and(|n| {
        !n.is_empty()
            && n.chars().all(|c| c.is_ascii_digit() || c == '.')
            && n.chars().next().is_some_and(|c| c.is_ascii_digit())
    })
}

/// The progress row's clock: `00:00:01`.
fn is_clock(w: &str) -> bool {
    w.len() == 8
        && w.char_indices().all(|(i, c)| {
            if i % 3 == 2 {
                c == ':'
            } else {
                c.is_ascii_digit()
            }
        })
}

/// The progress thread redraws the row every 200 ms whether or not
/// anything changed: how many such redraws fall in a run depends on the
/// machine's speed. Once the clock and spinner are placeholders, such a
/// redraw (an erase and the very row that was there) changes nothing on
/// the screen; they are dropped, the redraws that change the row are kept.
fn drop_repeated_redraws(text: &str) -> String {
    const ERASE: &str = "\r\x1b[J";
    let mut parts = text.split(ERASE);
    let first = parts.next().unwrap_or_default();
    let mut out = String::from(first);
    let mut row = first.rsplit('\n').next().unwrap_or_default().to_string();
    for part in parts {
        if !part.contains('\n') && part == row {
            continue;
        }
        out.push_str(ERASE);
        out.push_str(part);
        // What is left drawn after this part: the text after its last line.
        row = part.rsplit('\n').next().unwrap_or_default().to_string();
    }
    out
}

/// Compares `got` with the golden file `name`, or rewrites it under
/// SPECTR_UPDATE_GOLDEN=1.
fn check_golden(name: &str, got: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os(UPDATE_ENV).is_some_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    if want != got {
        let first = want
            .lines()
            .zip(got.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| want.lines().count().min(got.lines().count()));
        panic!(
            "{} differs from this run, first at line {} (escapes shown):\n  want: {:?}\n  got:  {:?}\n\
             If the change is meant, refresh it with {UPDATE_ENV}=1 cargo test --test ralph_golden \
             and review the diff.",
            path.display(),
            first + 1,
            want.lines().nth(first).unwrap_or("<end>"),
            got.lines().nth(first).unwrap_or("<end>"),
        );
    }
}

#[test]
fn the_sample_run_without_colour_is_the_golden_one() {
    let s = sample();
    let bytes = normalise(&run_on_terminal(&s, false), &s.root);
    assert!(!bytes.contains("\x1b[3"), "NO_COLOR: no colour codes");
    check_golden("ralph-sample-80.txt", &bytes);
    // What a person sees: logical lines, every progress row gone.
    let mut screen = Screen::new(80);
    screen.feed(&bytes);
    check_golden("ralph-sample-80.screen.txt", &(screen.text() + "\n"));
}

#[test]
fn the_sample_run_in_colour_is_the_golden_one() {
    let s = sample();
    let bytes = normalise(&run_on_terminal(&s, true), &s.root);
    assert!(bytes.contains("\x1b[32m✓"), "CLICOLOR_FORCE: colours");
    check_golden("ralph-sample-80-color.txt", &bytes);
}

#[test]
fn placeholders_replace_only_what_varies() {
    let project = Path::new("/tmp/x/project");
    let got = normalise(
        "· session 0e87dd4d-dfca-49ca-91dc-7b8b326d4b52 · fake-model\n\
         ✓ [1.1] completed · 0.4s · 5 turns · $0.041\n\
         /tmp/x/project/spectr/.ralph/transcripts/2026-11-25T14-30-15Z\n\
         wrote 45 bytes · 12s · 2.5k cached\n",
        project,
    );
    assert_eq!(
        got,
        "· session <session-id> · fake-model\n\
         ✓ [1.1] completed · <time> · 5 turns · $0.041\n\
         <project>/spectr/.ralph/transcripts/<timestamp>\n\
         wrote 45 bytes · <time> · 2.5k cached\n"
    );
    // A redraw that changes nothing goes; one that changes the row stays.
    let rows = "a\n⠋ [0/1] 00:00:00 x\r\x1b[J⠙ [0/1] 00:00:01 x\r\x1b[Jb\n⠹ [1/1] 00:00:01 x";
    assert_eq!(
        normalise(rows, project),
        "a\n⠿ [0/1] hh:mm:ss x\r\x1b[Jb\n⠿ [1/1] hh:mm:ss x"
    );
}
