use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::cmp::Ordering;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// A hierarchical task id such as `1`, `1.2` or `1.99.3`.
///
/// Ordering is numeric per dot-separated segment (`1.2 < 1.10`); a segment that is
/// not a number sorts after numeric ones, by text, so any id still has one place.
///
/// Short ids (nearly all) are stored inline: a change of 10,000 tasks holds
/// each id several times over (tasks, parents, children, graph, indexes), and
/// one heap block per copy was a few MB. Equality, hashing and order all
/// look at the text alone, whatever the storage.
#[derive(Clone)]
pub struct TaskId(Repr);

/// Bytes an id may have and still be stored inline (keeps `TaskId` at 24 bytes).
const INLINE: usize = 22;

#[derive(Clone)]
enum Repr {
    Inline {
        len: u8,
        bytes: [u8; INLINE],
    },
    /// Shared, so a clone of a long id costs no copy either.
    Heap(Arc<str>),
}

impl TaskId {
    pub fn new(id: impl Into<String>) -> TaskId {
        TaskId::from_text(&id.into())
    }

    fn from_text(id: &str) -> TaskId {
        if id.len() <= INLINE {
            let mut bytes = [0u8; INLINE];
            bytes[..id.len()].copy_from_slice(id.as_bytes());
            TaskId(Repr::Inline {
                len: id.len() as u8,
                bytes,
            })
        } else {
            TaskId(Repr::Heap(Arc::from(id)))
        }
    }

    fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            Repr::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Repr::Heap(s) => s.as_bytes(),
        }
    }

    pub fn as_str(&self) -> &str {
        match &self.0 {
            // Copied from a `&str` whole, so always valid: the check never fails.
            Repr::Inline { .. } => std::str::from_utf8(self.as_bytes()).unwrap_or_default(),
            Repr::Heap(s) => s,
        }
    }

    pub fn segments(&self) -> impl Iterator<Item = &str> {
        self.as_str().split('.')
    }

    /// The first segment: tasks whose top-level prefix differs are independent.
    pub fn prefix(&self) -> &str {
        self.as_str().split('.').next().unwrap_or("")
    }
}

impl PartialEq for TaskId {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for TaskId {}

impl Hash for TaskId {
    /// As `str` hashes, so the storage never shows.
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write(self.as_bytes());
        state.write_u8(0xff);
    }
}

impl std::fmt::Debug for TaskId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TaskId({:?})", self.as_str())
    }
}

impl Serialize for TaskId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for TaskId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<TaskId, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = TaskId;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a task id string")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<TaskId, E> {
                Ok(TaskId::from_text(v))
            }
        }
        d.deserialize_str(Visitor)
    }
}

/// A segment is numeric when it is all ASCII digits; numbers compare by value
/// (any length: no overflow), ties (`01` vs `1`) by text.
fn cmp_segment(a: &[u8], b: &[u8]) -> Ordering {
    let numeric = |s: &[u8]| !s.is_empty() && s.iter().all(|c| c.is_ascii_digit());
    match (numeric(a), numeric(b)) {
        (true, true) => {
            let (x, y) = (trim_zeros(a), trim_zeros(b));
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

fn trim_zeros(s: &[u8]) -> &[u8] {
    &s[s.iter().position(|&c| c != b'0').unwrap_or(s.len())..]
}

/// Byte order, inline: ids are short, and a libc `memcmp` call per segment
/// showed up when sorting 10,000 of them.
fn cmp_bytes(a: &[u8], b: &[u8]) -> Ordering {
    a.iter().cmp(b.iter())
}

impl Ord for TaskId {
    fn cmp(&self, other: &Self) -> Ordering {
        let (a, b) = (self.as_bytes(), other.as_bytes());
        // Segment by segment; a plain byte scan for '.' (ids are sorted a lot).
        let (mut i, mut j) = (0, 0);
        loop {
            let ea = a[i..]
                .iter()
                .position(|&c| c == b'.')
                .map_or(a.len(), |p| i + p);
            let eb = b[j..]
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
        f.pad(self.as_str())
    }
}

impl From<&str> for TaskId {
    fn from(s: &str) -> TaskId {
        TaskId::from_text(s)
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
                (Some(p), Some(q)) => match cmp_segment(p.as_bytes(), q.as_bytes()) {
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

    proptest::proptest! {
        /// Inline and shared storage are invisible: text, equality, hash,
        /// order and the serialized form depend on the text alone.
        #[test]
        fn storage_is_invisible(a in "[0-9a.]{0,40}", b in "[0-9a.]{0,40}") {
            use std::hash::BuildHasher;
            let (x, y) = (TaskId::new(a.clone()), TaskId::from(b.as_str()));
            proptest::prop_assert_eq!(x.as_str(), a.as_str());
            proptest::prop_assert_eq!(x == y, a == b);
            proptest::prop_assert_eq!(x.cmp(&y) == Ordering::Equal, a == b);
            let h = std::collections::hash_map::RandomState::new();
            proptest::prop_assert_eq!(h.hash_one(&x), h.hash_one(a.as_str()));
            let json = serde_json::to_string(&x).expect("serialize");
            proptest::prop_assert_eq!(&json, &serde_json::to_string(&a).expect("serialize"));
            let back: TaskId = serde_json::from_str(&json).expect("deserialize");
            proptest::prop_assert_eq!(back, x);
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
