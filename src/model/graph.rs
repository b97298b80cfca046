//! The task graph: what may run, in which order.
//!
//! Leaves under one top-level prefix form a lane and run one after another,
//! depth-first with siblings in numeric id order; lanes are independent of each
//! other. Containers are never run: they complete when all their leaves do.
//!
//! One exception to independence: upstream's `append_tasks` adds a section
//! titled `99.99.99 Final section (after all tasks)`. A lane whose top-level
//! tasks all belong to such a section runs last: it is ready only once every
//! other lane is done, and skipping any other task blocks it.

use crate::model::id::IdMap;
use crate::model::id_index::IdIndex;
use crate::model::{TaskId, TaskSet, TaskStatus};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

/// An independent chain of leaf tasks sharing a top-level prefix, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lane {
    pub key: String,
    pub tasks: Vec<TaskId>,
}

#[derive(Debug, Clone)]
pub struct TaskGraph {
    lanes: Vec<Lane>,
    /// Every leaf -> (lane, place in the lane), found through the lanes' own
    /// ids rather than a second copy of each. Lookup only.
    leaves: IdIndex<(u32, u32)>,
    /// Every container -> where its leaves sit (containers are few). Lookup only.
    containers: IdMap<TaskId, Slot>,
    /// Per lane: true when it runs after all the others.
    last: Vec<bool>,
}

/// Upstream's section title prefix for tasks that come after all others.
const AFTER_ALL_PREFIX: &str = "99.99.99";

/// A task's lane and the range of that lane holding its leaves (a leaf: just
/// itself).
#[derive(Debug, Clone)]
struct Slot {
    lane: usize,
    leaves: Range<usize>,
}

impl TaskGraph {
    pub fn new(tasks: &TaskSet) -> TaskGraph {
        // Roots: tasks with no parent, or whose parent is not in the set.
        let mut roots: Vec<usize> = (0..tasks.tasks.len())
            .filter(|&i| {
                tasks.tasks[i]
                    .parent
                    .as_ref()
                    .is_none_or(|p| tasks.position(p).is_none())
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
            leaves: IdIndex::default(),
            containers: IdMap::default(),
            last: Vec::new(),
        };
        let mut visited = vec![false; tasks.tasks.len()];
        for (lane_no, (key, roots)) in lanes_by_key.into_iter().enumerate() {
            graph.last.push(roots.iter().all(|&r| {
                tasks.tasks[r]
                    .section
                    .trim_start()
                    .starts_with(AFTER_ALL_PREFIX)
            }));
            let mut lane = Vec::new();
            for r in roots {
                graph.walk(tasks, r, lane_no, &mut lane, &mut visited);
            }
            lane.shrink_to_fit();
            graph.lanes.push(Lane {
                key: key.as_str().to_string(),
                tasks: lane,
            });
        }
        let lanes = &graph.lanes;
        let places = lanes
            .iter()
            .enumerate()
            .flat_map(|(l, lane)| (0..lane.tasks.len()).map(move |p| (l as u32, p as u32)));
        let places: Vec<(u32, u32)> = places.collect();
        graph.leaves = IdIndex::build(places.into_iter(), |(l, p)| {
            &lanes[l as usize].tasks[p as usize]
        });
        // Only meaningful next to ordinary lanes.
        if graph.last.iter().all(|&l| l) {
            graph.last.iter_mut().for_each(|l| *l = false);
        }
        graph
    }

    /// Where `id` (a leaf or a container) sits.
    fn slot(&self, id: &TaskId) -> Option<Slot> {
        if let Some(s) = self.containers.get(id) {
            return Some(s.clone());
        }
        let (lane, at) = self.leaves.get(id, |(l, p)| {
            self.lanes.get(l as usize)?.tasks.get(p as usize)
        })?;
        let at = at as usize;
        Some(Slot {
            lane: lane as usize,
            leaves: at..at + 1,
        })
    }

    /// Depth-first from `root`: appends leaves to `lane` in order (children
    /// before their container is considered done) and records each task's slot.
    fn walk(
        &mut self,
        tasks: &TaskSet,
        root: usize,
        lane_no: usize,
        lane: &mut Vec<TaskId>,
        visited: &mut [bool],
    ) {
        struct Frame {
            task: usize,
            /// Children sorted by id, in reverse: the next one is popped.
            todo: Vec<usize>,
            /// Where this task's leaves start in `lane`.
            start: usize,
        }
        let mut stack: Vec<Frame> = Vec::new();
        let mut enter = |i: usize, stack: &mut Vec<Frame>, lane: &mut Vec<TaskId>| {
            if std::mem::replace(&mut visited[i], true) {
                return; // reached twice in a hand-built set: keep the first
            }
            let task = &tasks.tasks[i];
            if task.is_container() {
                let mut todo: Vec<usize> = task
                    .children
                    .iter()
                    .filter_map(|c| tasks.position(c))
                    .collect();
                let id = |k: usize| &tasks.tasks[k].id;
                if !todo.is_sorted_by(|&a, &b| id(a) <= id(b)) {
                    todo.sort_by(|&a, &b| id(a).cmp(id(b)));
                }
                todo.reverse();
                stack.push(Frame {
                    task: i,
                    todo,
                    start: lane.len(),
                });
            } else {
                lane.push(task.id.clone());
            }
        };
        enter(root, &mut stack, lane);
        while let Some(top) = stack.last_mut() {
            match top.todo.pop() {
                Some(k) => enter(k, &mut stack, lane),
                None => {
                    let slot = Slot {
                        lane: lane_no,
                        leaves: top.start..lane.len(),
                    };
                    self.containers
                        .insert(tasks.tasks[top.task].id.clone(), slot);
                    stack.pop();
                }
            }
        }
    }

    pub fn lanes(&self) -> &[Lane] {
        &self.lanes
    }

    /// All leaves in run order: lane by lane, each lane in its own order.
    pub fn order(&self) -> impl Iterator<Item = &TaskId> + '_ {
        self.lanes.iter().flat_map(|l| l.tasks.iter())
    }

    /// Number of leaves.
    pub fn len(&self) -> usize {
        self.lanes.iter().map(|l| l.tasks.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.lanes.iter().all(|l| l.tasks.is_empty())
    }

    /// The lane holding `id` (a leaf or a container).
    pub fn lane_of(&self, id: &TaskId) -> Option<&Lane> {
        self.slot(id).map(|s| &self.lanes[s.lane])
    }

    /// The leaves under `id` in run order; a leaf is its own only leaf.
    pub fn leaves_under(&self, id: &TaskId) -> &[TaskId] {
        match self.slot(id) {
            Some(s) => &self.lanes[s.lane].tasks[s.leaves],
            None => &[],
        }
    }

    /// True when `lane` runs after all other lanes (upstream's final section).
    pub fn runs_last(&self, lane: &Lane) -> bool {
        self.lanes
            .iter()
            .position(|l| l.key == lane.key)
            .is_some_and(|i| self.last[i])
    }

    /// Leaf tasks ready to run now, at most one per lane, in lane order.
    /// A lane's next task is its first leaf not `completed`, not excluded by
    /// `selection` (when given); a `blocked` task (skipped) stops its lane.
    /// Leaves outside `selection` are passed over and do not block. A lane
    /// that [runs last](Self::runs_last) yields only once the others are done.
    pub fn ready(
        &self,
        status: &dyn Fn(&TaskId) -> TaskStatus,
        blocked: &BTreeSet<TaskId>,
        selection: Option<&BTreeSet<TaskId>>,
    ) -> Vec<TaskId> {
        let next: Vec<Option<&TaskId>> = self
            .lanes
            .iter()
            .map(|lane| {
                lane.tasks.iter().find(|id| {
                    selection.is_none_or(|s| s.contains(*id)) && status(id) != TaskStatus::Completed
                })
            })
            .collect();
        let others_done = next
            .iter()
            .zip(&self.last)
            .all(|(n, &last)| last || n.is_none());
        next.into_iter()
            .zip(&self.last)
            .filter_map(|(n, &last)| {
                let n = n?;
                (!blocked.contains(n) && (others_done || !last)).then(|| n.clone())
            })
            .collect()
    }

    /// Tasks that cannot run once `id` is skipped: later leaves of its lane
    /// (for a container, those after its last leaf), plus every leaf of the
    /// lanes that run last.
    pub fn dependents(&self, id: &TaskId) -> Vec<TaskId> {
        let Some(s) = self.slot(id) else {
            return Vec::new();
        };
        let mut out = self.lanes[s.lane].tasks[s.leaves.end..].to_vec();
        if !self.last[s.lane] {
            for (lane, _) in self.lanes.iter().zip(&self.last).filter(|(_, l)| **l) {
                out.extend(lane.tasks.iter().cloned());
            }
        }
        out
    }
}

/// A container's status aggregated from its leaves; a leaf's own status.
pub fn container_status(tasks: &TaskSet, id: &TaskId) -> Option<TaskStatus> {
    tasks.container_status(id)
}
