//! `spectr report`'s two renderings of a [`RunReport`]: Markdown for the
//! terminal or a pull request, and one self-contained HTML page.

mod html;

use crate::agent::receipt::Receipt;
use crate::ralph::event::{RunEnd, Totals};
use crate::ralph::report::{AttemptReport, RunReport};
use crate::ui::agent_render::{format_cost, format_duration, format_tokens};
use std::fmt::Write;
use std::time::Duration;

pub use html::html;

/// A table cell: no line break, no `|` to split it.
fn cell(text: &str) -> String {
    let one_line: String = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    crate::text::clean(&one_line).replace('|', "\\|")
}

/// Text in backquotes, whatever it holds.
fn code(text: &str) -> String {
    let text = crate::text::clean(text);
    if text.contains('`') {
        format!("`` {text} ``")
    } else {
        format!("`{text}`")
    }
}

pub fn end_words(end: Option<RunEnd>) -> &'static str {
    match end {
        Some(RunEnd::Complete) => "complete: every selected task completed",
        Some(RunEnd::Incomplete) => "incomplete: nothing left that can run, some tasks skipped",
        Some(RunEnd::Aborted) => "aborted",
        Some(RunEnd::Interrupted) => "interrupted",
        Some(RunEnd::Budget) => "stopped: the budget was reached",
        None => "unfinished: the journal has no summary (still running, or killed)",
    }
}

/// `time · turns · tokens · cost` of one receipt.
pub fn receipt_cells(r: Option<&Receipt>) -> [String; 4] {
    let Some(r) = r else {
        return ["".into(), "".into(), "".into(), "".into()];
    };
    [
        format_duration(Duration::from_millis(r.duration_ms)),
        r.turns.map_or_else(|| "–".into(), |t| t.to_string()),
        r.tokens.as_ref().map_or_else(
            || "–".into(),
            |t| format!("{} / {}", format_tokens(t.input), format_tokens(t.output)),
        ),
        if r.cost_usd.is_some() {
            format_cost(r.cost_usd)
        } else {
            "–".into()
        },
    ]
}

pub fn outcome_words(a: &AttemptReport) -> String {
    let mut s = match &a.outcome {
        Some(o) => o.describe(),
        None => "did not end (the run stopped first)".into(),
    };
    if a.resolving {
        s.push_str(" (resolving a merge conflict)");
    }
    if let Some(p) = a.receipt.as_ref().and_then(|r| r.permissions) {
        s.push_str(&format!(
            " ({} of {} permissions refused)",
            p.refused, p.asked
        ));
    }
    if let Some(ms) = a.queued_ms {
        s.push_str(&format!(
            " (after {} in its engine's queue)",
            humantime::format_duration(std::time::Duration::from_secs(ms / 1000))
        ));
    }
    match (&a.agent, &a.moved_from) {
        (Some(agent), Some(from)) => {
            s.push_str(&format!(" (on {agent}: {from} was at its limit)"));
        }
        (Some(agent), None) => s.push_str(&format!(" (on {agent})")),
        _ => {}
    }
    s
}

fn totals_table(out: &mut String, t: &Totals) {
    let _ = writeln!(
        out,
        "| completed | failed | skipped | remaining | attempts | time | turns | tokens in / out | cost |"
    );
    let _ = writeln!(
        out,
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    let _ = writeln!(
        out,
        "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
        t.completed,
        t.failed,
        t.skipped,
        t.remaining,
        t.attempts,
        format_duration(Duration::from_millis(t.duration_ms)),
        t.turns
            .map_or_else(|| "not reported".into(), |n| n.to_string()),
        total_tokens(t),
        format_cost(t.cost_usd),
    );
}

/// `in / out` of the run's totals; "not reported" when no attempt reported
/// any (never `0 / 0`).
pub fn total_tokens(t: &Totals) -> String {
    if t.input_tokens.is_none() && t.output_tokens.is_none() {
        return "not reported".into();
    }
    format!(
        "{} / {}",
        format_tokens(t.input_tokens.unwrap_or(0)),
        format_tokens(t.output_tokens.unwrap_or(0))
    )
}

/// The report as Markdown.
pub fn markdown(r: &RunReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Run report: {}\n", cell(&r.change));
    let _ = writeln!(out, "- Agent: {}", cell(&r.agent));
    let _ = writeln!(
        out,
        "- Runs: {} (the first{})",
        r.runs,
        match r.runs {
            0 | 1 => String::new(),
            2 => " and one resume".to_string(),
            n => format!(" and {} resumes", n - 1),
        }
    );
    let _ = writeln!(out, "- End: {}", end_words(r.end));
    if let Some(b) = &r.budget {
        let _ = writeln!(out, "- Budget: {}", b.short());
    }
    for e in &r.errors {
        let _ = writeln!(out, "- Error: {}", cell(e));
    }
    out.push('\n');

    if let Some(t) = &r.totals {
        let _ = writeln!(out, "## Totals\n");
        if r.end.is_none() {
            let _ = writeln!(
                out,
                "Counted from the attempts the journal holds: the run ended before its summary.\n"
            );
        }
        totals_table(&mut out, t);
        out.push('\n');
    }

    let _ = writeln!(out, "## Tasks\n");
    if r.tasks.is_empty() {
        let _ = writeln!(out, "No task was started.\n");
    }
    for t in &r.tasks {
        let _ = writeln!(
            out,
            "### {} {}\n",
            cell(t.task.as_str()),
            cell(&crate::text::task_title(&t.section, &t.description))
        );
        if r.parallel {
            let _ = writeln!(out, "Tasks {}.x.\n", cell(&t.lane));
        }
        let _ = writeln!(
            out,
            "| attempt | outcome | time | turns | tokens in / out | cost |"
        );
        let _ = writeln!(out, "| --- | --- | --- | --- | --- | --- |");
        for a in &t.attempts {
            let [time, turns, tokens, cost] = receipt_cells(a.receipt.as_ref());
            let _ = writeln!(
                out,
                "| {} | {} | {time} | {turns} | {tokens} | {cost} |",
                a.attempt,
                cell(&outcome_words(a)),
            );
        }
        out.push('\n');
        if let Some(commit) = &t.commit {
            let short = crate::text::short_commit(commit);
            let _ = writeln!(
                out,
                "Commit: {} (inspect: {}; undo: {}).\n",
                code(short),
                code(&format!("git show {short} --stat")),
                code(&format!("git revert {short}"))
            );
        }
        if !t.left_out.is_empty() {
            let _ = writeln!(
                out,
                "Left out of its commit, where it overlaps your uncommitted work: {}.\n",
                t.left_out
                    .iter()
                    .map(|f| code(f))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        if let Some(why) = &t.skipped {
            let _ = writeln!(out, "Skipped: {}.\n", cell(why));
        }
        let changed: Vec<&AttemptReport> = t
            .attempts
            .iter()
            .filter(|a| !a.files.is_empty() || a.files_note.is_some())
            .collect();
        if !changed.is_empty() {
            let _ = writeln!(out, "Files changed:\n");
            for a in changed {
                let files = if a.files.is_empty() {
                    "none".to_string()
                } else {
                    a.files
                        .iter()
                        .map(|f| code(f))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                let note = a
                    .files_note
                    .as_ref()
                    .map(|n| format!(" ({})", cell(n)))
                    .unwrap_or_default();
                let _ = writeln!(out, "- attempt {}: {files}{note}", a.attempt);
            }
            out.push('\n');
        }
        let failed: Vec<&AttemptReport> = t
            .attempts
            .iter()
            .filter(|a| a.failed_ref.is_some())
            .collect();
        if !failed.is_empty() {
            let _ = writeln!(out, "Failed attempts' work:\n");
            for a in failed {
                let r = a.failed_ref.as_deref().unwrap_or_default();
                let _ = writeln!(
                    out,
                    "- attempt {}: {} (inspect: {})",
                    a.attempt,
                    code(r),
                    code(&format!("git show {r} --stat"))
                );
            }
            out.push('\n');
        }
    }

    if !r.learnings.is_empty() {
        let _ = writeln!(out, "## Learnings\n");
        for (task, text) in &r.learnings {
            let _ = writeln!(out, "- {}: {}", cell(task.as_str()), cell(text));
        }
        out.push('\n');
    }

    if !r.lanes.is_empty() {
        let _ = writeln!(out, "## Lanes\n");
        let _ = writeln!(out, "| lane | merged | conflicted |");
        let _ = writeln!(out, "| --- | --- | --- |");
        let ids = |v: &[crate::model::TaskId]| {
            if v.is_empty() {
                "–".to_string()
            } else {
                v.iter()
                    .map(|t| cell(t.as_str()))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        };
        for l in &r.lanes {
            let _ = writeln!(
                out,
                "| {} | {} | {} |",
                cell(&l.lane),
                merged_cell(&l.merged, &l.in_place, &ids),
                ids(&l.conflicted)
            );
        }
        out.push('\n');
    }
    while out.ends_with("\n\n") {
        out.pop();
    }
    out
}

/// A lane's merged tasks, then those it ran in the user's tree.
fn merged_cell(
    merged: &[crate::model::TaskId],
    in_place: &[crate::model::TaskId],
    ids: &dyn Fn(&[crate::model::TaskId]) -> String,
) -> String {
    match (merged.is_empty(), in_place.is_empty()) {
        (_, true) => ids(merged),
        (true, false) => format!("{} (in your tree)", ids(in_place)),
        (false, false) => format!("{}; {} (in your tree)", ids(merged), ids(in_place)),
    }
}
