//! The fake agent's scenarios: which steps an attempt of a task runs (from
//! the `SPECTR_FAKE_SCRIPT` file), and the state folder (`SPECTR_FAKE_STATE`)
//! that counts attempts and keeps what tests look at (prompts, arguments,
//! pids).

use serde_json::Value;
use std::io::Write;
use std::path::Path;

/// Saves the arguments the agent was started with, one per line, as
/// `<state>/args/<task>-<n>.txt` (a test checks the command line spectr used).
pub(crate) fn record_args(state: &Path, task: &str, attempt: usize, args: &[String]) {
    let dir = state.join("args");
    let path = dir.join(format!("{}-{attempt}.txt", safe_name(task)));
    let text: String = args.iter().map(|a| format!("{a}\n")).collect();
    if let Err(e) = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, text)) {
        eprintln!("spectr-fake-agent: cannot write {}: {e}", path.display());
    }
}

fn safe_name(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Appends our pid to `<state>/agents.pid`, so a test can check that no
/// agent outlived its run.
pub(crate) fn record_pid(state: &Path) {
    let path = state.join("agents.pid");
    let saved = std::fs::create_dir_all(state).and_then(|()| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(format!("{}\n", std::process::id()).as_bytes()))
    });
    if let Err(e) = saved {
        eprintln!("spectr-fake-agent: cannot write {}: {e}", path.display());
    }
}

/// Saves the prompt as the next attempt's file; returns the attempt number.
pub(crate) fn record_prompt(state: &Path, task: &str, prompt: &str) -> Result<usize, String> {
    save_numbered(state, "prompts", task, prompt)
}

/// Saves `text` as `<state>/<folder>/<task>-<n>.txt`, n the first free number.
pub(crate) fn save_numbered(
    state: &Path,
    folder: &str,
    task: &str,
    text: &str,
) -> Result<usize, String> {
    let dir = state.join(folder);
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let name = safe_name(task);
    let mut n = 1;
    while dir.join(format!("{name}-{n}.txt")).exists() {
        n += 1;
    }
    let path = dir.join(format!("{name}-{n}.txt"));
    std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(n)
}

pub(crate) fn load_steps(path: &Path, task: &str, attempt: usize) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read script {}: {e}", path.display()))?;
    let script: Value = serde_json::from_str(&text)
        .map_err(|e| format!("script {} is not JSON: {e}", path.display()))?;
    let Some(entry) = script.get(task).or_else(|| script.get("default")) else {
        return Ok(default_steps());
    };
    let attempts: Vec<&Value> = match entry {
        Value::Array(items) if items.iter().any(Value::is_array) => items.iter().collect(),
        other => vec![other],
    };
    let chosen = attempts
        .get(attempt.saturating_sub(1))
        .or(attempts.last())
        .copied()
        .unwrap_or(&Value::Null);
    let steps = match chosen {
        // `{task}` in a step is the task's id (one `default` script can
        // then give each task its own line or file).
        Value::Array(items) => items
            .iter()
            .map(|s| s.as_str().map(|s| s.replace("{task}", task)))
            .collect::<Option<Vec<_>>>(),
        Value::String(s) => Some(vec![s.replace("{task}", task)]),
        _ => None,
    };
    steps.ok_or_else(|| {
        format!(
            "script {}: steps for '{task}' must be strings",
            path.display()
        )
    })
}

pub(crate) fn default_steps() -> Vec<String> {
    [
        "mark:in_progress",
        "say:Working on the task.",
        "mark:completed",
        "complete",
    ]
    .map(String::from)
    .to_vec()
}
