//! The report as one self-contained HTML page: inline CSS and SVG, no
//! script, nothing fetched. A timeline of the attempts per lane across the
//! run, coloured by outcome, then the tasks as the Markdown has them. The
//! page is a MiniJinja template (`report.html`, HTML-escaped throughout);
//! the geometry is worked out here.

use super::{end_words, outcome_words, receipt_cells};
use crate::ralph::report::RunReport;
use crate::ui::agent_render::{format_cost, format_duration};
use serde::Serialize;
use std::time::Duration;

const TEMPLATE: &str = include_str!("report.html");

/// The plot: left margin for the lane names, then the time axis.
const LEFT: f64 = 90.0;
const PLOT: f64 = 820.0;
const ROW: f64 = 28.0;
const TOP: f64 = 8.0;

#[derive(Serialize)]
struct View {
    change: String,
    agent: String,
    runs: usize,
    end: &'static str,
    budget: Option<String>,
    totals: Vec<(String, String)>,
    width: f64,
    height: f64,
    axis_y: f64,
    rows: Vec<Row>,
    bars: Vec<Bar>,
    ticks: Vec<Tick>,
    resumes: Vec<f64>,
    tasks: Vec<TaskView>,
    learnings: Vec<(String, String)>,
    lanes: Vec<(String, String, String)>,
    errors: Vec<String>,
}

#[derive(Serialize)]
struct Row {
    label: String,
    y: f64,
    text_y: f64,
}

#[derive(Serialize)]
struct Bar {
    x: f64,
    y: f64,
    w: f64,
    h: f64,
    kind: &'static str,
    /// `1.2` or `1.2 #2`, drawn in the bar when it fits.
    label: String,
    title: String,
}

#[derive(Serialize)]
struct Tick {
    x: f64,
    label: String,
}

#[derive(Serialize)]
struct TaskView {
    id: String,
    description: String,
    lane: String,
    skipped: Option<String>,
    /// Its commit's short id, and the commands that show and undo it.
    commit: Option<CommitView>,
    left_out: Vec<String>,
    attempts: Vec<AttemptView>,
}

#[derive(Serialize)]
struct CommitView {
    short: String,
    show: String,
    revert: String,
}

#[derive(Serialize)]
struct AttemptView {
    attempt: u32,
    kind: &'static str,
    outcome: String,
    cells: [String; 4],
    files: Vec<String>,
    files_note: Option<String>,
    failed_ref: Option<String>,
    show: Option<String>,
}

fn round(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// The page for `r`.
pub fn html(r: &RunReport) -> Result<String, String> {
    let mut env = minijinja::Environment::new();
    // Named .html: every value is HTML-escaped.
    env.add_template("report.html", TEMPLATE)
        .map_err(|e| format!("the report template is broken: {e}"))?;
    let template = env
        .get_template("report.html")
        .map_err(|e| format!("the report template is missing: {e}"))?;
    template
        .render(view(r))
        .map_err(|e| format!("could not render the report: {e}"))
}

fn view(r: &RunReport) -> View {
    let mut lanes: Vec<String> = r.tasks.iter().map(|t| t.lane.clone()).collect();
    lanes.sort();
    lanes.dedup();
    let t0 = r.first_ms.unwrap_or(0);
    let t1 = r.last_ms.unwrap_or(t0).max(t0 + 1);
    let span = (t1 - t0) as f64;
    let x_of = |ms: u64| round(LEFT + (ms.saturating_sub(t0)) as f64 / span * PLOT);
    let row_of = |lane: &str| lanes.iter().position(|l| l == lane).unwrap_or(0) as f64;
    let mut bars = Vec::new();
    for t in &r.tasks {
        for a in &t.attempts {
            let Some(start) = a.started_ms else { continue };
            let end = a.ended_ms.unwrap_or(t1).max(start);
            let x = x_of(start);
            bars.push(Bar {
                x,
                y: round(TOP + row_of(&t.lane) * ROW + 4.0),
                w: round((x_of(end) - x).max(3.0)),
                h: ROW - 8.0,
                kind: a.kind(),
                label: if a.attempt > 1 {
                    format!("{} #{}", t.task, a.attempt)
                } else {
                    t.task.to_string()
                },
                title: format!("{} attempt {}: {}", t.task, a.attempt, outcome_words(a)),
            });
        }
    }
    let axis_y = round(TOP + lanes.len() as f64 * ROW + 4.0);
    let ticks = (0..=4)
        .map(|i| {
            let ms = (span * f64::from(i) / 4.0) as u64;
            Tick {
                x: round(LEFT + PLOT * f64::from(i) / 4.0),
                label: format_duration(Duration::from_millis(ms)),
            }
        })
        .collect();
    let totals = r
        .totals
        .as_ref()
        .map(|t| {
            vec![
                ("completed".to_string(), t.completed.to_string()),
                ("failed".into(), t.failed.to_string()),
                ("skipped".into(), t.skipped.to_string()),
                ("remaining".into(), t.remaining.to_string()),
                ("attempts".into(), t.attempts.to_string()),
                (
                    "time".into(),
                    format_duration(Duration::from_millis(t.duration_ms)),
                ),
                ("tokens in / out".into(), super::total_tokens(t)),
                ("cost".into(), format_cost(t.cost_usd)),
            ]
        })
        .unwrap_or_default();
    View {
        change: r.change.clone(),
        agent: r.agent.clone(),
        runs: r.runs,
        end: end_words(r.end),
        budget: r.budget.map(|b| b.short()),
        totals,
        width: LEFT + PLOT + 20.0,
        height: axis_y + 24.0,
        axis_y,
        rows: lanes
            .iter()
            .enumerate()
            .map(|(i, l)| Row {
                label: format!("tasks {l}.x"),
                y: round(TOP + i as f64 * ROW),
                text_y: round(TOP + i as f64 * ROW + ROW / 2.0 + 4.0),
            })
            .collect(),
        bars,
        ticks,
        resumes: r.run_starts_ms.iter().skip(1).map(|&ms| x_of(ms)).collect(),
        tasks: r
            .tasks
            .iter()
            .map(|t| TaskView {
                id: t.task.to_string(),
                description: crate::text::task_title(&t.section, &t.description),
                lane: t.lane.clone(),
                skipped: t.skipped.clone(),
                commit: t.commit.as_deref().map(|c| {
                    let short = crate::text::short_commit(c);
                    CommitView {
                        short: short.to_string(),
                        show: format!("git show {short} --stat"),
                        revert: format!("git revert {short}"),
                    }
                }),
                left_out: t.left_out.clone(),
                attempts: t
                    .attempts
                    .iter()
                    .map(|a| AttemptView {
                        attempt: a.attempt,
                        kind: a.kind(),
                        outcome: outcome_words(a),
                        cells: receipt_cells(a.receipt.as_ref()),
                        files: a.files.clone(),
                        files_note: a.files_note.clone(),
                        failed_ref: a.failed_ref.clone(),
                        show: a
                            .failed_ref
                            .as_ref()
                            .map(|r| format!("git show {r} --stat")),
                    })
                    .collect(),
            })
            .collect(),
        learnings: r
            .learnings
            .iter()
            .map(|(t, l)| (t.to_string(), l.clone()))
            .collect(),
        lanes: r
            .lanes
            .iter()
            .map(|l| {
                let ids = |v: &[crate::model::TaskId]| {
                    v.iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                let merged = super::merged_cell(&l.merged, &l.in_place, &ids);
                (l.lane.clone(), merged, ids(&l.conflicted))
            })
            .collect(),
        errors: r.errors.clone(),
    }
}
