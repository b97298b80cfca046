//! Checkpoints of a git working tree that never touch the user's HEAD, branch,
//! index or stash: snapshots built with a temporary index and kept under
//! private refs (`refs/spectr/ralph/...`).
//!
//! STUB: the checkpoint helper fills in.
