//! The task graph: what may run, in which order.
//!
//! Leaves under one top-level prefix form a lane and run one after another,
//! depth-first with siblings in numeric id order; lanes are independent of each
//! other. Containers are never run: they complete when all their leaves do.

use crate::model::{TaskId, TaskSet, TaskStatus};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// An independent chain of leaf tasks sharing a top-level prefix, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lane {
    pub key: String,
    pub tasks: Vec<TaskId>,
}

#[derive(Debug, Clone)]
pub struct TaskGraph {
    lanes: Vec<Lane>,
    /// Every leaf, lane by lane.
    order: Vec<TaskId>,
    /// Task (leaf or container) -> lane index. Lookup only.
    lane_index: HashMap<TaskId, usize>,
    /// Leaf -> position in its lane. Lookup only.
    position: HashMap<TaskId, usize>,
    /// Container -> its leaves, in order. Lookup only.
    leaves_of: HashMap<TaskId, Vec<TaskId>>,
}

impl TaskGraph {
    pub fn new(tasks: &TaskSet) -> TaskGraph {
        let by_id: HashMap<&TaskId, usize> = tasks
            .tasks
            .iter()
            .enumerate()
            .map(|(i, t)| (&t.id, i))
            .collect();
        // Roots: tasks with no parent, or whose parent is not in the set.
        let mut roots: Vec<usize> = (0..tasks.tasks.len())
            .filter(|&i| {
                tasks.tasks[i]
                    .parent
                    .as_ref()
                    .is_none_or(|p| !by_id.contains_key(p))
            })
            .collect();
        roots.sort_by(|&a, &b| tasks.tasks[a].id.cmp(&tasks.tasks[b].id));

        let mut lanes_by_key: BTreeMap<TaskId, Vec<usize>> = BTreeMap::new();
        for r in roots {
            let key = TaskId::new(tasks.tasks[r].id.prefix());
            lanes_by_key.entry(key).or_default().push(r);
        }

        let mut graph = TaskGraph {
            lanes: Vec::with_capacity(lanes_by_key.len()),
            order: Vec::new(),
            lane_index: HashMap::new(),
            position: HashMap::new(),
            leaves_of: HashMap::new(),
        };
        let mut visited = vec![false; tasks.tasks.len()];
        for (lane_no, (key, roots)) in lanes_by_key.into_iter().enumerate() {
            let mut lane = Vec::new();
            for r in roots {
                graph.walk(tasks, &by_id, r, lane_no, &mut lane, &mut visited);
            }
            for (pos, id) in lane.iter().enumerate() {
                graph.position.insert(id.clone(), pos);
            }
            graph.order.extend(lane.iter().cloned());
            graph.lanes.push(Lane {
                key: key.as_str().to_string(),
                tasks: lane,
            });
        }
        graph
    }

    /// Depth-first from `root`: appends leaves to `lane` in order (children
    /// before their container is considered done) and records lane membership.
    fn walk(
        &mut self,
        tasks: &TaskSet,
        by_id: &HashMap<&TaskId, usize>,
        root: usize,
        lane_no: usize,
        lane: &mut Vec<TaskId>,
        visited: &mut [bool],
    ) {
        // (task, next child to visit, index in `lane` where its leaves start)
        let mut stack: Vec<(usize, usize, usize)> = Vec::new();
        if !std::mem::replace(&mut visited[root], true) {
            stack.push((root, 0, lane.len()));
        }
        while let Some(top) = stack.last_mut() {
            let (i, next, start) = *top;
            let task = &tasks.tasks[i];
            if !task.is_container() {
                self.lane_index.insert(task.id.clone(), lane_no);
                lane.push(task.id.clone());
                stack.pop();
                continue;
            }
            if next == 0 {
                self.lane_index.insert(task.id.clone(), lane_no);
            }
            let mut kids: Vec<usize> = task
                .children
                .iter()
                .filter_map(|c| by_id.get(c).copied())
                .collect();
            kids.sort_by(|&a, &b| tasks.tasks[a].id.cmp(&tasks.tasks[b].id));
            match kids.get(next) {
                Some(&k) => {
                    top.1 += 1;
                    if !std::mem::replace(&mut visited[k], true) {
                        stack.push((k, 0, lane.len()));
                    }
                }
                None => {
                    self.leaves_of
                        .insert(task.id.clone(), lane[start..].to_vec());
                    stack.pop();
                }
            }
        }
    }

    pub fn lanes(&self) -> &[Lane] {
        &self.lanes
    }

    /// All leaves in run order: lane by lane, each lane in its own order.
    pub fn order(&self) -> &[TaskId] {
        &self.order
    }

    /// The lane holding `id` (a leaf or a container).
    pub fn lane_of(&self, id: &TaskId) -> Option<&Lane> {
        self.lane_index.get(id).map(|&i| &self.lanes[i])
    }

    /// The leaves under `id` in run order; a leaf is its own only leaf.
    pub fn leaves_under(&self, id: &TaskId) -> Vec<TaskId> {
        if let Some(v) = self.leaves_of.get(id) {
            return v.clone();
        }
        if self.position.contains_key(id) {
            return vec![id.clone()];
        }
        Vec::new()
    }

    /// Leaf tasks ready to run now, at most one per lane, in lane order.
    /// A lane's next task is its first leaf not `completed`, not excluded by
    /// `selection` (when given); a `blocked` task (skipped) stops its lane.
    /// Leaves outside `selection` are passed over and do not block.
    pub fn ready(
        &self,
        status: &dyn Fn(&TaskId) -> TaskStatus,
        blocked: &BTreeSet<TaskId>,
        selection: Option<&BTreeSet<TaskId>>,
    ) -> Vec<TaskId> {
        self.lanes
            .iter()
            .filter_map(|lane| {
                let next = lane.tasks.iter().find(|id| {
                    selection.is_none_or(|s| s.contains(*id)) && status(id) != TaskStatus::Completed
                })?;
                (!blocked.contains(next)).then(|| next.clone())
            })
            .collect()
    }

    /// Tasks that cannot run once `id` is skipped: later leaves of its lane.
    /// For a container, the leaves of its lane after its last leaf.
    pub fn dependents(&self, id: &TaskId) -> Vec<TaskId> {
        let Some(lane) = self.lane_of(id) else {
            return Vec::new();
        };
        let last = match self.leaves_of.get(id) {
            Some(leaves) => leaves.last().and_then(|l| self.position.get(l)),
            None => self.position.get(id),
        };
        match last {
            Some(&p) => lane.tasks[p + 1..].to_vec(),
            None => Vec::new(),
        }
    }
}

/// A container's status aggregated from its leaves; a leaf's own status.
pub fn container_status(tasks: &TaskSet, id: &TaskId) -> Option<TaskStatus> {
    tasks.container_status(id)
}
