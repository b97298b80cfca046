use serde::{Deserialize, Serialize};

/// A task's status as written in tasks.jsonc. Run-only states (failed, skipped)
/// never appear here: they live in the session file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    Pending,
    InProgress,
    Completed,
}

impl TaskStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Pending => "pending",
            TaskStatus::InProgress => "in_progress",
            TaskStatus::Completed => "completed",
        }
    }

    /// A container's status from its leaves' statuses: all completed ->
    /// completed, any started (in progress or completed) -> in_progress, else
    /// (or when there are none) pending.
    pub fn aggregate(statuses: impl IntoIterator<Item = TaskStatus>) -> TaskStatus {
        let (mut any, mut all_done, mut started) = (false, true, false);
        for s in statuses {
            any = true;
            all_done &= s == TaskStatus::Completed;
            started |= s != TaskStatus::Pending;
        }
        match (any, all_done, started) {
            (true, true, _) => TaskStatus::Completed,
            (_, _, true) => TaskStatus::InProgress,
            _ => TaskStatus::Pending,
        }
    }

    pub fn parse(s: &str) -> Option<TaskStatus> {
        match s {
            "pending" => Some(TaskStatus::Pending),
            "in_progress" => Some(TaskStatus::InProgress),
            "completed" => Some(TaskStatus::Completed),
            _ => None,
        }
    }
}

impl std::fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::TaskStatus::{self, *};

    #[test]
    fn aggregate_rules() {
        assert_eq!(TaskStatus::aggregate([]), Pending);
        assert_eq!(TaskStatus::aggregate([Pending, Pending]), Pending);
        assert_eq!(TaskStatus::aggregate([Completed, Pending]), InProgress);
        assert_eq!(TaskStatus::aggregate([InProgress, Pending]), InProgress);
        assert_eq!(TaskStatus::aggregate([Completed, Completed]), Completed);
        assert_eq!(TaskStatus::aggregate([Completed, InProgress]), InProgress);
    }
}
