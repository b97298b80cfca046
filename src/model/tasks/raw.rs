//! What a tasks.jsonc file holds, as both parsers produce it (the fast
//! scanner in `fast` and the full parser in `parse`, which falls back from one
//! to the other): below both, so neither imports the other's types.

use crate::model::TaskStatus;
use crate::model::error::FileDiag;
use std::ops::Range;

/// The parsed content of one tasks file.
#[derive(Debug)]
pub(crate) struct RawFile {
    pub parent: Option<(String, Range<usize>)>,
    pub includes: Vec<(String, Range<usize>)>,
    pub entries: Vec<RawEntry>,
    /// With [`Statuses::Lenient`], each unknown `status` read as pending.
    pub unknown_statuses: Vec<FileDiag>,
}

/// What an unknown `status` value is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Statuses {
    /// An error (what `ralph` and `accept` need: they act on statuses).
    Strict,
    /// Pending, and noted in [`RawFile::unknown_statuses`] (what `list`
    /// does, as upstream counts such tasks as not done).
    Lenient,
}

#[derive(Debug)]
pub(crate) struct RawEntry {
    pub id: String,
    /// The `id` value (quotes included).
    pub id_range: Range<usize>,
    pub section: String,
    pub description: String,
    pub status: TaskStatus,
    /// The `status` string literal, quotes included; `None` when absent.
    pub status_range: Option<Range<usize>>,
    pub children: Children,
}

#[derive(Debug)]
pub(crate) enum Children {
    None,
    /// `children: "$ref:FILE"`; the range covers the string literal.
    Ref {
        target: String,
        range: Range<usize>,
    },
    /// `children: [ ...tasks ]` written inline.
    Inline(Vec<RawEntry>),
}

/// Visits every entry of `entries`, inline children included.
pub(crate) fn walk<'a>(entries: &'a [RawEntry], f: &mut dyn FnMut(&'a RawEntry)) {
    for e in entries {
        f(e);
        if let Children::Inline(kids) = &e.children {
            walk(kids, f);
        }
    }
}
