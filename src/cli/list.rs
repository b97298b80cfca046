//! `spectr list`: one line per active change with its task progress.
//!
//! Counts are of leaf tasks (the ones an agent works on) across all of a
//! change's tasks files, so a split (v2) change reads its true total, not its
//! number of sections. A change without `tasks.jsonc` is counted from the
//! checkboxes of its `tasks.md` (what `spectr accept` would write); with
//! neither it reads `0/0 tasks`.
//!
//! A change whose tasks files are broken is still listed, with
//! `(error: ...)` in place of its counts, and the full diagnostic goes to
//! stderr; the exit code stays 0, because the listing itself succeeded and a
//! list that fails whenever one change is broken hides the others exactly when
//! you need to see them. Commands that need the tasks (`accept`, `ralph`) fail
//! on the same error with exit 2.

use crate::cli::CmdResult;
use crate::cli::args::ListArgs;
use crate::model::accept::parse_tasks_md;
use crate::model::{Change, Project, TaskSet, TaskStatus};
use crate::ui::ansi::clean;
use serde::Serialize;
use std::path::Path;
use std::process::ExitCode;

/// Task counts of one change, as in `--json`'s `taskStatus`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct TaskCounts {
    pub total: usize,
    pub completed: usize,
    pub in_progress: usize,
    pub pending: usize,
}

impl TaskCounts {
    fn add(&mut self, status: TaskStatus) {
        self.total += 1;
        match status {
            TaskStatus::Completed => self.completed += 1,
            TaskStatus::InProgress => self.in_progress += 1,
            TaskStatus::Pending => self.pending += 1,
        }
    }
}

/// What `spectr list` shows for one change.
#[derive(Debug)]
pub struct ChangeSummary {
    pub id: String,
    /// Filled when details were asked for (`--long`, `--json`).
    pub title: Option<String>,
    pub delta_count: Option<usize>,
    /// The counts, or why the tasks could not be read.
    pub tasks: Result<TaskCounts, miette::Report>,
    /// An OpenSpec change's stories (`## N.` sections, what `spectr ralph`
    /// runs one agent each for); `tasks` then counts their checkboxes.
    pub stories: Option<TaskCounts>,
    /// Tasks whose `status` is not one we know, counted as pending: (file,
    /// line, the value as written).
    pub unknown_statuses: Vec<UnknownStatus>,
    /// What bringing the change's tasks.md up to date had to say.
    pub tasks_md_warnings: Vec<String>,
}

/// A `status` value `list` did not know and counted as pending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownStatus {
    pub path: std::path::PathBuf,
    pub line: usize,
    pub value: String,
}

/// Summaries of all active changes, sorted by id. `details` also reads each
/// proposal's title and counts its delta sections.
///
/// Changes are independent, so large projects are read on all cores (the
/// order of the result is still by id).
pub fn summarize_all(
    project: &Project,
    details: bool,
) -> Result<Vec<ChangeSummary>, miette::Report> {
    let changes = project.active_changes()?;
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8);
    // Below this, starting threads costs more than it saves.
    const MIN_PER_THREAD: usize = 16;
    if threads < 2 || changes.len() < 2 * MIN_PER_THREAD {
        return Ok(changes.iter().map(|c| summarize(c, details)).collect());
    }
    let chunk = changes.len().div_ceil(threads).max(MIN_PER_THREAD);
    let parts: Vec<Vec<ChangeSummary>> = std::thread::scope(|scope| {
        let handles: Vec<_> = changes
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    part.iter()
                        .map(|c| summarize(c, details))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });
    Ok(parts.into_iter().flatten().collect())
}

/// One change's line; its tasks.md, if behind its tasks.jsonc, is brought up
/// to date on the way (as upstream does on every command).
pub fn summarize(change: &Change, details: bool) -> ChangeSummary {
    let mut unknown_statuses = Vec::new();
    let mut tasks_md_warnings = Vec::new();
    ChangeSummary {
        id: change.id.clone(),
        title: details.then(|| change.title().unwrap_or_else(|| change.id.clone())),
        delta_count: details.then(|| delta_count(change)),
        tasks: count_tasks_with(change, &mut unknown_statuses, Some(&mut tasks_md_warnings)),
        stories: count_stories(change),
        unknown_statuses,
        tasks_md_warnings,
    }
}

/// Leaf-task counts from `tasks.jsonc` (+ split files), else from tasks.md's
/// checkboxes, else zero. A task with an unknown status counts as pending
/// (as upstream counts it) and is added to `unknown`.
pub fn count_tasks(
    change: &Change,
    unknown: &mut Vec<UnknownStatus>,
) -> Result<TaskCounts, miette::Report> {
    count_tasks_with(change, unknown, None)
}

/// [`count_tasks`], also saying (into `lag`) where tasks.md's boxes lag
/// tasks.jsonc: a listing reads, it never ticks a tracked file's boxes.
fn count_tasks_with(
    change: &Change,
    unknown: &mut Vec<UnknownStatus>,
    lag: Option<&mut Vec<String>>,
) -> Result<TaskCounts, miette::Report> {
    let mut counts = TaskCounts::default();
    if change.tasks_jsonc_path().exists() {
        let (set, odd) = TaskSet::load_lenient(&change.dir)?;
        set.leaves().for_each(|t| counts.add(t.status));
        // A status read leniently (an unknown one, counted as pending) says
        // nothing about a box.
        if let Some(warnings) = lag
            && odd.is_empty()
        {
            warnings.extend(crate::cli::tasks_md_lag_note(&change.id, &set));
        }
        unknown.extend(odd.iter().map(|d| UnknownStatus {
            path: d.path.clone(),
            line: d.line,
            value: d.snippet().to_string(),
        }));
        return Ok(counts);
    }
    let md = change.tasks_md_path();
    match std::fs::read(&md) {
        Ok(bytes) => {
            let text = crate::model::error::decode_utf8(&md, bytes).map_err(|d| *d)?;
            let parsed = parse_tasks_md(&md, &text)?;
            parsed.tasks().for_each(|t| counts.add(t.status));
            Ok(counts)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(counts),
        Err(e) => Err(miette::miette!("cannot read {}: {e}", md.display())),
    }
}

/// An OpenSpec change's stories, counted as `spectr ralph` runs them (a
/// story is completed when all its boxes are); `None` for a spectr change.
fn count_stories(change: &Change) -> Option<TaskCounts> {
    let set = TaskSet::load(&change.dir).ok()?;
    if set.format != crate::model::TasksFormat::OpenSpecMarkdown {
        return None;
    }
    let mut counts = TaskCounts::default();
    set.leaves().for_each(|t| counts.add(t.status));
    Some(counts)
}

/// Delta sections (`## ADDED|MODIFIED|REMOVED|RENAMED Requirements`) across the
/// change's delta specs, as upstream counts them.
pub fn delta_count(change: &Change) -> usize {
    change
        .delta_specs()
        .iter()
        .filter_map(|(_, path)| std::fs::read_to_string(path).ok())
        .map(|text| text.lines().filter(|l| is_delta_header(l)).count())
        .sum()
}

fn is_delta_header(line: &str) -> bool {
    let Some(rest) = line.trim().strip_prefix("##") else {
        return false;
    };
    let mut words = rest.split_whitespace();
    matches!(
        (words.next(), words.next()),
        (Some("ADDED" | "MODIFIED" | "REMOVED" | "RENAMED"), Some(w)) if w.starts_with("Requirements")
    )
}

pub fn run(args: &ListArgs) -> CmdResult {
    let cwd = std::env::current_dir()
        .map_err(|e| miette::miette!("cannot read the current folder: {e}"))?;
    let project = Project::discover(&cwd)?;
    let summaries = summarize_all(&project, args.json || args.long)?;
    let text = if args.json {
        render_json(&summaries, &cwd)?
    } else if args.long {
        render_long(&summaries, &cwd)
    } else {
        render_text(&summaries, &cwd)
    };
    crate::cli::print_out(&text)?;
    if summaries.is_empty() && !args.json {
        // Upstream's words on stdout; where they come from on stderr.
        crate::cli::print_err(format_args!(
            "(no active change in {}: a change is a folder there holding proposal.md)",
            project.changes_dir().display()
        ));
    }
    // The full diagnostics, after the listing so it stays readable.
    for s in &summaries {
        if let Some(w) = unknown_status_warning(s, &cwd) {
            crate::cli::print_err(w);
        }
        for w in &s.tasks_md_warnings {
            crate::cli::print_err(format_args!(
                "warning: change '{}': {}",
                clean(&s.id),
                clean(w)
            ));
        }
    }
    for s in &summaries {
        if let Err(report) = &s.tasks {
            crate::cli::print_err(format_args!(
                "Error in change '{}':\n{}",
                clean(&s.id),
                crate::cli::render_report(report)
            ));
        }
    }
    Ok(ExitCode::SUCCESS)
}

const NO_ITEMS: &str = "No items found";

/// One warning line for a change's unknown statuses, naming where they are.
pub fn unknown_status_warning(s: &ChangeSummary, cwd: &Path) -> Option<String> {
    s.unknown_statuses.first()?;
    let values: std::collections::BTreeSet<&str> = s
        .unknown_statuses
        .iter()
        .map(|u| u.value.as_str())
        .collect();
    const SHOWN: usize = 5;
    let places: Vec<String> = s
        .unknown_statuses
        .iter()
        .take(SHOWN)
        .map(|u| {
            format!(
                "{}:{}",
                u.path.strip_prefix(cwd).unwrap_or(&u.path).display(),
                u.line
            )
        })
        .collect();
    let more = s.unknown_statuses.len().saturating_sub(SHOWN);
    let more = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    let n = s.unknown_statuses.len();
    let text = format!(
        "warning: change '{}': {n} task{} with an unknown status ({}) counted as pending, at {}{more}; `spectr ralph` refuses them: use \"pending\", \"in_progress\" or \"completed\"",
        s.id,
        if n == 1 { "" } else { "s" },
        values.into_iter().collect::<Vec<_>>().join(", "),
        places.join(", "),
    );
    Some(clean(&text).into_owned())
}

/// Upstream's `"%-*s  %d/%d tasks"`, ids padded to the longest.
/// Paths inside `cwd` in error messages are shown relative to it.
pub fn render_text(summaries: &[ChangeSummary], cwd: &Path) -> String {
    if summaries.is_empty() {
        return format!("{NO_ITEMS}\n");
    }
    let width = summaries
        .iter()
        .map(|s| clean(&s.id).chars().count())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for s in summaries {
        let progress = match (&s.tasks, &s.stories) {
            // Stories are what a run counts; boxes what the file ticks.
            (Ok(c), Some(st)) => format!(
                "{}/{} stories ({}/{} boxes ticked)",
                st.completed, st.total, c.completed, c.total
            ),
            (Ok(c), None) => format!("{}/{} tasks", c.completed, c.total),
            (Err(e), _) => format!("(error: {})", clean(&one_line(e, cwd))),
        };
        out.push_str(&format!("{:<width$}  {progress}\n", clean(&s.id)));
    }
    out
}

/// Upstream's `"%s: %s [deltas %d] [tasks %d/%d]"`.
pub fn render_long(summaries: &[ChangeSummary], cwd: &Path) -> String {
    if summaries.is_empty() {
        return format!("{NO_ITEMS}\n");
    }
    let mut out = String::new();
    for s in summaries {
        let progress = match (&s.tasks, &s.stories) {
            (Ok(c), Some(st)) => format!(
                "[stories {}/{}] [boxes {}/{}]",
                st.completed, st.total, c.completed, c.total
            ),
            (Ok(c), None) => format!("[tasks {}/{}]", c.completed, c.total),
            (Err(e), _) => format!("(error: {})", clean(&one_line(e, cwd))),
        };
        out.push_str(&format!(
            "{}: {} [deltas {}] {progress}\n",
            clean(&s.id),
            clean(s.title.as_deref().unwrap_or(&s.id)),
            s.delta_count.unwrap_or(0)
        ));
    }
    out
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonChange<'a> {
    id: &'a str,
    title: &'a str,
    delta_count: usize,
    task_status: TaskCounts,
    /// An OpenSpec change's stories (`taskStatus` then counts checkboxes).
    #[serde(skip_serializing_if = "Option::is_none")]
    story_status: Option<TaskCounts>,
    /// Present only when the tasks could not be read (counts are then zero).
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// A JSON array (two-space indented, like upstream), `[]` when empty.
pub fn render_json(summaries: &[ChangeSummary], cwd: &Path) -> Result<String, miette::Report> {
    let items: Vec<JsonChange> = summaries
        .iter()
        .map(|s| JsonChange {
            id: &s.id,
            title: s.title.as_deref().unwrap_or(&s.id),
            delta_count: s.delta_count.unwrap_or(0),
            task_status: s.tasks.as_ref().copied().unwrap_or_default(),
            story_status: s.stories,
            error: s.tasks.as_ref().err().map(|e| one_line(e, cwd)),
        })
        .collect();
    let mut text = serde_json::to_string_pretty(&items)
        .map_err(|e| miette::miette!("cannot render the list as JSON: {e}"))?;
    text.push('\n');
    Ok(text)
}

/// An error's message on one line (its causes joined with `: `), paths under
/// `cwd` made relative.
fn one_line(report: &miette::Report, cwd: &Path) -> String {
    let prefix = format!("{}{}", cwd.display(), std::path::MAIN_SEPARATOR);
    let mut parts: Vec<String> = Vec::new();
    for e in report.chain() {
        let msg = e.to_string();
        // Some errors repeat their cause in their own message.
        if !parts.iter().any(|p| p.contains(&msg)) {
            parts.push(msg);
        }
    }
    parts
        .join(": ")
        .replace(&prefix, "")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(id: &str, tasks: Result<TaskCounts, miette::Report>) -> ChangeSummary {
        ChangeSummary {
            id: id.to_string(),
            title: None,
            delta_count: None,
            tasks,
            stories: None,
            unknown_statuses: Vec::new(),
            tasks_md_warnings: Vec::new(),
        }
    }

    fn counts(total: usize, completed: usize) -> TaskCounts {
        TaskCounts {
            total,
            completed,
            in_progress: 0,
            pending: total - completed,
        }
    }

    #[test]
    fn text_is_padded_like_upstream() {
        let s = [
            summary("add-a", Ok(counts(3, 1))),
            summary("remove-long-thing", Ok(counts(0, 0))),
            summary(
                "x",
                Err(miette::miette!("/p/c/tasks.jsonc:2:3: bad\nthing")),
            ),
        ];
        assert_eq!(
            render_text(&s, Path::new("/p")),
            "add-a              1/3 tasks\nremove-long-thing  0/0 tasks\nx                  (error: c/tasks.jsonc:2:3: bad thing)\n"
        );
        assert_eq!(render_text(&[], Path::new("/p")), "No items found\n");
    }

    #[test]
    fn delta_headers() {
        assert!(is_delta_header("## ADDED Requirements"));
        assert!(is_delta_header("##  RENAMED Requirements "));
        assert!(!is_delta_header("### ADDED Requirements"));
        assert!(!is_delta_header("## Added Requirements"));
        assert!(!is_delta_header("## ADDED"));
    }
}
