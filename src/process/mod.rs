//! The process runner: the one place in spectr that starts a process.
//!
//! Every process (agents, git, `--verify`, `--lane-setup`, version checks,
//! recovery's git) is built as a [`Cmd`] and started by [`Cmd::spawn`]:
//! always as the leader of a process group of its own (a session for
//! agents, with SIGTERM when spectr dies), its identity (pid and start time)
//! taken at once. Then either
//! - [`Child::collect`] runs it to its end: output drained on threads (whole,
//!   or a bounded tail), a deadline, an optional cancel, the group killed at
//!   the deadline and reaped; or
//! - the caller streams its pipes ([`Child::take_stdout`]), waits for it on
//!   a thread of its own and stops it through its [`ProcessTree`] (the agent
//!   supervisor).
//!
//! Nothing is signalled that is not provably ours: a group only while its
//! leader, our child, is not yet reaped (its pid cannot be reused before);
//! anything else only through [`ProcessTree`], which checks each member's
//! start time. This module depends on nothing else of spectr's.

mod child;
mod collect;
mod command;
mod error;
pub(crate) mod owner;
mod procfs;
mod tree;

pub use child::Child;
pub use collect::{AfterExit, Collect, End, Output, PIPE_DRAIN_LIMIT};
pub use command::{Cmd, Sink};
pub use error::ProcessError;
pub use procfs::{is_forbidden, start_time};
pub use tree::{ProcessTree, members_file};

#[cfg(test)]
mod tests;
