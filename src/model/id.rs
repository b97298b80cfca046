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

/// A segment is numeric when it is all ASCII digits; numbers compare by value
/// (any length: no overflow), ties (`01` vs `1`) by text.
fn cmp_segment(a: &str, b: &str) -> Ordering {
    let numeric = |s: &str| !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit());
    match (numeric(a), numeric(b)) {
        (true, true) => {
            let (x, y) = (a.trim_start_matches('0'), b.trim_start_matches('0'));
            x.len()
                .cmp(&y.len())
                .then_with(|| cmp_bytes(x, y))
                .then_with(|| cmp_bytes(a, b))
        }
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        (false, false) => cmp_bytes(a, b),
    }
}

/// Byte order, inline: ids are short, and a libc `memcmp` call per segment
/// showed up when sorting 10,000 of them.
fn cmp_bytes(a: &str, b: &str) -> Ordering {
    a.bytes().cmp(b.bytes())
}

impl Ord for TaskId {
    fn cmp(&self, other: &Self) -> Ordering {
        let (a, b) = (self.0.as_str(), other.0.as_str());
        // Segment by segment; a plain byte scan for '.' (ids are sorted a lot).
        let (mut i, mut j) = (0, 0);
        loop {
            let ea = a.as_bytes()[i..]
                .iter()
                .position(|&c| c == b'.')
                .map_or(a.len(), |p| i + p);
            let eb = b.as_bytes()[j..]
                .iter()
                .position(|&c| c == b'.')
                .map_or(b.len(), |p| j + p);
            match cmp_segment(&a[i..ea], &b[j..eb]) {
                Ordering::Equal => {}
                other => return other,
            }
            match (ea == a.len(), eb == b.len()) {
                (true, true) => return Ordering::Equal,
                (true, false) => return Ordering::Less,
                (false, true) => return Ordering::Greater,
                (false, false) => (i, j) = (ea + 1, eb + 1),
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
        // `pad`, so `{:<8}` lines up plan rows.
        f.pad(&self.0)
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

    /// The reference order: segments compared in turn, a shorter prefix first.
    fn by_segments(a: &TaskId, b: &TaskId) -> Ordering {
        let (mut x, mut y) = (a.segments(), b.segments());
        loop {
            match (x.next(), y.next()) {
                (None, None) => return Ordering::Equal,
                (None, Some(_)) => return Ordering::Less,
                (Some(_), None) => return Ordering::Greater,
                (Some(p), Some(q)) => match cmp_segment(p, q) {
                    Ordering::Equal => continue,
                    o => return o,
                },
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn cmp_matches_segment_order(a in "[0-9a.]{0,8}", b in "[0-9a.]{0,8}") {
            let (a, b) = (TaskId::new(a), TaskId::new(b));
            proptest::prop_assert_eq!(a.cmp(&b), by_segments(&a, &b));
            proptest::prop_assert_eq!(b.cmp(&a), a.cmp(&b).reverse());
        }
    }

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

    #[test]
    fn numbers_of_any_length_and_text_segments() {
        let mut ids: Vec<TaskId> = [
            "1.a",
            "1.01",
            "1.1",
            "1.99999999999999999999999",
            "1.100000000000000000000000",
            "1.b",
            "1.10",
        ]
        .into_iter()
        .map(TaskId::from)
        .collect();
        ids.sort();
        let got: Vec<&str> = ids.iter().map(TaskId::as_str).collect();
        assert_eq!(
            got,
            [
                "1.01",
                "1.1",
                "1.10",
                "1.99999999999999999999999",
                "1.100000000000000000000000",
                "1.a",
                "1.b"
            ]
        );
    }
}

/// A fast, non-cryptographic hasher for the model's internal id lookups (ids
/// come from local files; SipHash's flood resistance buys nothing there and
/// costs a visible share of loading 10,000 tasks).
#[derive(Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x517c_c1b7_2722_0a95;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(w)).wrapping_mul(K);
        }
        for &b in chunks.remainder() {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(K);
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.write(&[i]);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// HashMap keyed by ids with [`IdHasher`]. Lookup only: never iterate one
/// where the order could reach a user.
pub(crate) type IdMap<K, V> =
    std::collections::HashMap<K, V, std::hash::BuildHasherDefault<IdHasher>>;
