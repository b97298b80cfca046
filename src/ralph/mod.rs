//! The ralph loop: runs a coding agent over a change's tasks in dependency order,
//! with checkpoints, retries and a session that survives interruptions.
//!
//! - [`dispatcher`] owns the run and makes every decision ([`decide`] holds
//!   the rules as pure functions);
//! - [`worker`] runs a slot's attempts on a long-lived thread, in the user's
//!   tree or, with `--jobs`, in a lane work tree of its own ([`lanes`]);
//! - [`attempt`] runs one agent at one task and judges the outcome;
//! - [`event`] is the one event type every reporter and the session consume.

pub mod attempt;
pub mod config;
pub mod control;
pub mod decide;
pub mod dispatcher;
pub mod event;
pub mod interrupt;
pub mod lane_setup;
pub mod lanes;
pub mod learnings;
pub mod lock;
pub mod paths;
pub mod preflight;
pub mod prompt;
pub mod recover;
pub mod session;
pub mod verify;
pub mod watch;
pub mod worker;
