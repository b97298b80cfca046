//! What a run sets out to do: the tasks it gives to an agent and the plan
//! `--dry-run` and the preview show.

use crate::model::{TaskGraph, TaskId, TaskSet, TaskStatus};
use crate::ralph::event::{LoopEvent, PlanLane, PlanTask};
use std::collections::BTreeSet;

/// Tasks the run will give to an agent, in order: leaves not completed and
/// selected.
pub fn tasks_to_run(
    tasks: &TaskSet,
    graph: &TaskGraph,
    selection: Option<&BTreeSet<TaskId>>,
) -> Vec<TaskId> {
    graph
        .lanes()
        .iter()
        .flat_map(|l| l.tasks.iter())
        .filter(|id| selection.is_none_or(|s| s.contains(*id)))
        .filter(|id| {
            tasks
                .task(id)
                .is_some_and(|t| t.status != TaskStatus::Completed)
        })
        .cloned()
        .collect()
}

/// The plan `--dry-run` prints: every lane with what would happen to each task.
pub fn plan(
    tasks: &TaskSet,
    selection: Option<&BTreeSet<TaskId>>,
    skipped: &BTreeSet<TaskId>,
) -> LoopEvent {
    let graph = TaskGraph::new(tasks);
    let lanes = graph
        .lanes()
        .iter()
        .map(|lane| PlanLane {
            lane: lane.key.clone(),
            after_all_others: graph.runs_last(lane),
            tasks: lane
                .tasks
                .iter()
                .map(|id| {
                    let task = tasks.task(id);
                    let action = if task.is_some_and(|t| t.status == TaskStatus::Completed) {
                        "completed"
                    } else if skipped.contains(id) {
                        "skipped"
                    } else if selection.is_some_and(|s| !s.contains(id)) {
                        "not_selected"
                    } else {
                        "run"
                    };
                    PlanTask {
                        task: id.clone(),
                        section: task.map(|t| t.section.clone()).unwrap_or_default(),
                        description: task.map(|t| t.description.clone()).unwrap_or_default(),
                        action: action.to_string(),
                        agent: None,
                    }
                })
                .collect(),
        })
        .collect();
    LoopEvent::Plan { lanes }
}
