use serde::{Deserialize, Serialize};
use std::cmp::Ordering;

/// A hierarchical task id such as `1`, `1.2` or `1.99.3`.
///
/// Ordering is numeric per dot-separated segment (`1.2 < 1.10`); a segment that is
/// not a number sorts after numeric ones, by text, so any id still has one place.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TaskId(String);

impl TaskId {
    pub fn new(id: impl Into<String>) -> TaskId {
        TaskId(id.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn segments(&self) -> impl Iterator<Item = &str> {
        self.0.split('.')
    }

    /// The first segment: tasks whose top-level prefix differs are independent.
    pub fn prefix(&self) -> &str {
        self.0.split('.').next().unwrap_or("")
    }
}

fn cmp_segment(a: &str, b: &str) -> Ordering {
    match (a.parse::<u64>(), b.parse::<u64>()) {
        (Ok(x), Ok(y)) => x.cmp(&y).then_with(|| a.cmp(b)),
        (Ok(_), Err(_)) => Ordering::Less,
        (Err(_), Ok(_)) => Ordering::Greater,
        (Err(_), Err(_)) => a.cmp(b),
    }
}

impl Ord for TaskId {
    fn cmp(&self, other: &Self) -> Ordering {
        let mut a = self.segments();
        let mut b = other.segments();
        loop {
            match (a.next(), b.next()) {
                (None, None) => return Ordering::Equal,
                (None, Some(_)) => return Ordering::Less,
                (Some(_), None) => return Ordering::Greater,
                (Some(x), Some(y)) => match cmp_segment(x, y) {
                    Ordering::Equal => continue,
                    other => return other,
                },
            }
        }
    }
}

impl PartialOrd for TaskId {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl std::fmt::Display for TaskId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for TaskId {
    fn from(s: &str) -> TaskId {
        TaskId(s.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_order_per_segment() {
        let mut ids: Vec<TaskId> = ["1.10", "1.2", "2", "1", "1.0.1", "1.99.1", "10.1", "1.2.1"]
            .into_iter()
            .map(TaskId::from)
            .collect();
        ids.sort();
        let got: Vec<&str> = ids.iter().map(TaskId::as_str).collect();
        assert_eq!(
            got,
            ["1", "1.0.1", "1.2", "1.2.1", "1.10", "1.99.1", "2", "10.1"]
        );
    }
}
