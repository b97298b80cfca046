//! `spectr accept <change-id>`: writes tasks.jsonc (and split files) from the
//! change's tasks.md; the rules are in [`crate::model::accept`].

use crate::cli::CmdResult;
use crate::cli::args::AcceptArgs;
use crate::model::accept::{self, AcceptPlan};
use crate::model::{Project, spectr_yaml};
use crate::text::count;
use std::path::Path;
use std::process::ExitCode;

pub fn run(args: &AcceptArgs) -> CmdResult {
    let cwd = std::env::current_dir()
        .map_err(|e| miette::miette!("cannot read the current folder: {e}"))?;
    let project = Project::discover(&cwd)?;
    let resolved = project.resolve_change(&args.change_id)?;
    let change = resolved.change;
    if let Some(typed) = &resolved.typed {
        crate::cli::print_err(format_args!("Resolved '{typed}' -> '{}'", change.id));
    }
    let (_, config) = spectr_yaml::load(&project.root)?;
    let plan = accept::plan(&change, &config)?;
    let text = if args.dry_run {
        report(&plan, &cwd, true)
    } else {
        plan.write()?;
        report(&plan, &cwd, false)
    };
    crate::cli::print_out(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// `p` relative to `cwd` when it is inside it (shorter, and what the user
/// would type), else as is.
fn shown(p: &Path, cwd: &Path) -> String {
    p.strip_prefix(cwd).unwrap_or(p).display().to_string()
}

fn wrote_line(plan: &AcceptPlan) -> String {
    match plan.sections {
        Some(k) => format!(
            "{} across {}",
            count(plan.task_count as u64, "task", "tasks"),
            count(k as u64, "section", "sections")
        ),
        None => count(plan.task_count as u64, "task", "tasks"),
    }
}

/// What `accept` did, or with `dry_run` what it would do (then with the files).
fn report(plan: &AcceptPlan, cwd: &Path, dry_run: bool) -> String {
    // (done, would) wording for each line.
    let say = |done: &'static str, would: &'static str| if dry_run { would } else { done };
    let mut out = String::new();
    if dry_run {
        out.push_str("Dry run: nothing is written.\n");
    }
    out.push_str(&format!(
        "{} {} -> {}\n{} {}\n",
        say("Converted", "Would convert"),
        shown(&plan.tasks_md, cwd),
        shown(&plan.tasks_jsonc, cwd),
        say("Preserved", "Would preserve"),
        shown(&plan.tasks_md, cwd)
    ));
    if plan.kept_statuses > 0 {
        out.push_str(&format!(
            "{} the status of {}\n",
            say("Kept", "Would keep"),
            count(
                plan.kept_statuses as u64,
                "started or completed task",
                "started or completed tasks"
            )
        ));
    }
    for t in &plan.dropped {
        // Taken from the old tasks file: printed without its controls.
        let t = crate::ui::ansi::clean(t);
        out.push_str(&format!("{} task {t}\n", say("Dropped", "Would drop")));
    }
    for p in &plan.stale {
        out.push_str(&format!(
            "{} stale {}\n",
            say("Removed", "Would remove"),
            shown(p, cwd)
        ));
    }
    out.push_str(&format!(
        "{} {}\n",
        say("Wrote", "Would write"),
        wrote_line(plan)
    ));
    if dry_run {
        for f in &plan.files {
            out.push_str(&format!("\n--- {} ---\n{}", shown(&f.path, cwd), f.content));
        }
    }
    out
}
