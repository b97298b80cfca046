//! The prompt each agent gets: the task, the change's full context, how to update
//! the task's status, and the completion protocol.
//!
//! A project may replace the template with `spectr/ralph-prompt.md` (or
//! `openspec/ralph-prompt.md`); `{{name}}` placeholders are filled in.

/// How an agent should call this binary: `spectr` when PATH finds this very
/// binary under that name, else its full path.
pub fn spectr_command() -> &'static str {
    static CMD: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    CMD.get_or_init(find_spectr_command)
}

fn find_spectr_command() -> String {
    let Ok(me) = std::env::current_exe().and_then(std::fs::canonicalize) else {
        return "spectr".to_string();
    };
    let on_path = std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path)
            .any(|d| std::fs::canonicalize(d.join("spectr")).is_ok_and(|found| found == me))
    });
    if on_path {
        "spectr".to_string()
    } else {
        shell_quote(&me.display().to_string())
    }
}

use crate::model::{Change, Task, TaskSet, TasksFormat};
use crate::ralph::learnings;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// A path as a shell word: as is when it is plain, else in single quotes.
pub(crate) fn shell_quote(s: &str) -> String {
    let plain = s
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+,:@%".contains(c));
    if plain && !s.is_empty() {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

pub const TEMPLATE_FILE: &str = "ralph-prompt.md";

/// Set in each agent's environment: the task it was given, so `spectr
/// context` (and a person's shell inside the agent) knows which one.
pub const TASK_ENV: &str = "SPECTR_RALPH_TASK";

const DEFAULT_TEMPLATE: &str = "\
You are working on one task of the spec-driven change `{{change_id}}`.

Task ID: {{task_id}}
Section: {{section}}
Description: {{description}}
Tasks file: {{tasks_file}}

{{retry}}## How to report progress

{{status_instructions}}

Work only on this task; other tasks are run separately. Of the change's specs
below, focus on the scenarios relevant to this task, and keep every spec true.

## Verification

{{verify}}

## Learnings

{{learnings}}

## Completion protocol

Before you signal COMPLETE, run the verification, fix what fails, and run it
again until it passes. When the task is done and verified, end your final answer
with a last line that is exactly `<promise>COMPLETE</promise>`.
FAILED is only for what you cannot fix yourself (say, a missing tool or a spec
that contradicts itself): then end your final answer instead with a last line
`<promise>FAILED: one line saying why</promise>`.

# Change context

## Proposal (proposal.md)

{{proposal}}
{{design}}{{specs}}";

/// Everything a prompt is made from.
pub struct PromptInput<'a> {
    pub change: &'a Change,
    pub tasks: &'a TaskSet,
    pub task: &'a Task,
    /// The FAILED reason (or verify output) of the previous attempt.
    pub retry_reason: Option<&'a str>,
    /// `<project>/spectr` (or `openspec`): where a template override may live.
    pub spec_dir: &'a Path,
    /// The `--verify` command (or `ralph.verify` in spectr.yaml).
    pub verify: Option<&'a str>,
    /// The learnings file's content (bounded here, newest kept).
    pub learnings: &'a str,
    /// How the agent calls spectr: `spectr` when that is this binary on PATH,
    /// else this binary's full path.
    pub spectr: &'a str,
}

/// Reads a file for the prompt; a missing file is said plainly, not an error.
fn read_or_note(path: &Path) -> String {
    // Bytes that are not UTF-8 become U+FFFD: the agent still gets the rest.
    match std::fs::read(path) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).trim_end().to_string(),
        Err(e) => format!("({} could not be read: {e})", path.display()),
    }
}

fn status_instructions(input: &PromptInput<'_>, tasks_file: &str) -> String {
    let spectr = input.spectr;
    match input.tasks.format {
        TasksFormat::SpectrJsonc => format!(
            "Task {id} is in `{file}`. Its status is already set to \"in_progress\". \
When the task is complete and verified, mark it with `{spectr} task done {id}` (or change \
that task's `\"status\"` value to \"completed\" in `{file}` yourself, editing only that value \
and keeping the file's comments and layout). Do not change other tasks' statuses. \
`{spectr} status` shows where the run stands; `{spectr} context` prints this task's context \
(all of this text) again, should you lose it.",
            id = input.task.id,
            file = tasks_file
        ),
        TasksFormat::OpenSpecMarkdown => format!(
            "Task {id} is the section \"{section}\" of `{file}`. As you finish each item of that \
section, check its box (`- [ ]` becomes `- [x]`). Do not change other sections. \
`{spectr} status` shows where the run stands; `{spectr} context` prints this task's context \
(all of this text) again, should you lose it.",
            id = input.task.id,
            section = input.task.section,
            file = tasks_file
        ),
    }
}

fn verify_block(input: &PromptInput<'_>) -> String {
    match input.verify {
        Some(cmd) => format!(
            "This run verifies every task with `{cmd}` (run from the project root): the task \
counts as completed only when it exits 0, and its output is what a failed verification \
reports. Run `{cmd}` yourself before you finish; fix what fails and run it again."
        ),
        None => "No verification command is set for this run: verify with the project's own \
build and tests, whatever proves this task works."
            .to_string(),
    }
}

fn learnings_block(input: &PromptInput<'_>, change_dir: &Path) -> String {
    let file = learnings::path(change_dir);
    let how = format!(
        "Learnings are kept in `{file}` and given to every later task of this change. When you \
find out something a later task must know (a convention, a pitfall, where something lives, a \
command that works), record it with `{spectr} learn \"<text>\"`, or put it in your final answer \
between `<learning>` and `</learning>`.",
        file = file.display(),
        spectr = input.spectr
    );
    match learnings::for_prompt(input.learnings, learnings::PROMPT_LIMIT) {
        Some(recorded) => {
            format!("{how}\n\nWhat earlier tasks recorded (newest last):\n\n{recorded}")
        }
        None => format!("{how}\n\nNothing has been recorded yet."),
    }
}

fn specs_block(change: &Change) -> String {
    let specs = change.delta_specs();
    if specs.is_empty() {
        return String::new();
    }
    let mut out = String::from("\n## Delta specs (specs/<capability>/spec.md)\n");
    for (capability, path) in specs {
        let _ = write!(
            out,
            "\n### Capability: {capability}\n\n{}\n",
            read_or_note(&path)
        );
    }
    out
}

/// Where a project's template override lives.
pub fn template_path(spec_dir: &Path) -> PathBuf {
    spec_dir.join(TEMPLATE_FILE)
}

pub fn build(input: &PromptInput<'_>) -> String {
    let template = std::fs::read_to_string(template_path(input.spec_dir))
        .unwrap_or_else(|_| DEFAULT_TEMPLATE.to_string());
    let tasks_file = input
        .tasks
        .files
        .get(input.task.file)
        .map(|f| f.path.display().to_string())
        .unwrap_or_default();
    let design = match input.change.design_path() {
        Some(p) => format!(
            "\n## Design context (design.md)\n\nThe design decisions for this change:\n\n{}\n",
            read_or_note(&p)
        ),
        None => String::new(),
    };
    let retry = match input.retry_reason {
        Some(reason) => format!(
            "## Previous attempt failed\n\nA previous attempt at this task failed and its changes were \
reverted. The reason given:\n\n{reason}\n\nAvoid repeating that failure.\n\n"
        ),
        None => String::new(),
    };
    let fields: [(&str, String); 12] = [
        ("change_id", input.change.id.clone()),
        ("task_id", input.task.id.to_string()),
        ("section", input.task.section.clone()),
        ("description", input.task.description.clone()),
        ("tasks_file", tasks_file.clone()),
        ("retry", retry),
        (
            "status_instructions",
            status_instructions(input, &tasks_file),
        ),
        ("proposal", read_or_note(&input.change.proposal_path())),
        ("design", design),
        ("specs", specs_block(input.change)),
        ("verify", verify_block(input)),
        // The tasks' change folder: in a lane, the lane's copy (what the
        // agent writes there is brought to the user's file by the loop).
        ("learnings", learnings_block(input, &input.tasks.change_dir)),
    ];
    fill(&template, &fields)
}

/// Replaces `{{name}}` placeholders in one pass, so text inserted from files is
/// never itself expanded.
fn fill(template: &str, fields: &[(&str, String)]) -> String {
    let mut out = String::with_capacity(template.len() * 2);
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after.find("}}") {
            Some(end) => {
                let name = after[..end].trim();
                match fields.iter().find(|(k, _)| *k == name) {
                    Some((_, v)) => out.push_str(v),
                    None => out.push_str(&rest[start..start + 2 + end + 2]),
                }
                rest = &after[end + 2..];
            }
            None => {
                out.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_quote_leaves_plain_paths() {
        assert_eq!(shell_quote("/usr/bin/spectr"), "/usr/bin/spectr");
        assert_eq!(shell_quote("/a b/it's"), "'/a b/it'\\''s'");
    }

    #[test]
    fn fill_replaces_known_and_keeps_unknown_and_never_reexpands() {
        let f = [("a", "{{b}}".to_string()), ("b", "B".to_string())];
        assert_eq!(fill("x {{a}} {{ b }} {{zz}} {{", &f), "x {{b}} B {{zz}} {{");
    }
}
