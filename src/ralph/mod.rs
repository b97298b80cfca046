//! The ralph loop: runs a coding agent over a change's tasks in dependency order,
//! with checkpoints, retries and a session that survives interruptions.
//!
//! - [`machine`] is the run as one state machine: inputs in, effects out,
//!   no I/O ([`decide`] holds its rules as pure functions);
//! - [`driver`] is the thin shell around it: threads, channels, effects;
//! - [`worker`] runs a slot's attempts on a long-lived thread through its
//!   [`executor`]: the user's tree or, with `--jobs`, a lane work tree of its
//!   own ([`lanes`]);
//! - [`attempt`] runs one agent at one task and judges the outcome;
//! - [`event`] is the one event type every reporter and the session consume.

pub mod attempt;
pub mod config;
pub mod control;
pub mod decide;
pub mod driver;
pub mod error;
pub mod event;
pub mod executor;
pub mod interrupt;
pub mod lane_setup;
pub mod lanes;
pub mod learnings;
pub mod lock;
pub mod machine;
pub mod outbox;
pub mod plan;
pub mod preflight;
pub mod prompt;
pub mod recover;
pub mod session;
pub mod verify;
pub mod watch;
pub mod worker;
