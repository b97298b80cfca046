//! The task graph: what may run, in which order.
//!
//! STUB: contract for the loop.

use crate::model::{TaskId, TaskSet, TaskStatus};
use std::collections::BTreeSet;

/// An independent chain of leaf tasks sharing a top-level prefix, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lane {
    pub key: String,
    pub tasks: Vec<TaskId>,
}

#[derive(Debug, Clone)]
pub struct TaskGraph {
    lanes: Vec<Lane>,
}

impl TaskGraph {
    pub fn new(tasks: &TaskSet) -> TaskGraph {
        let _ = tasks;
        todo!("model helper")
    }

    pub fn lanes(&self) -> &[Lane] {
        &self.lanes
    }

    /// Leaf tasks ready to run now, at most one per lane, in lane order.
    /// A lane's next task is its first leaf not `completed`, not excluded by
    /// `selection` (when given); a `blocked` task (skipped) stops its lane.
    pub fn ready(
        &self,
        status: &dyn Fn(&TaskId) -> TaskStatus,
        blocked: &BTreeSet<TaskId>,
        selection: Option<&BTreeSet<TaskId>>,
    ) -> Vec<TaskId> {
        let _ = (status, blocked, selection);
        todo!("model helper")
    }

    /// Tasks that cannot run once `id` is skipped: later leaves of its lane.
    pub fn dependents(&self, id: &TaskId) -> Vec<TaskId> {
        let _ = id;
        todo!("model helper")
    }
}
