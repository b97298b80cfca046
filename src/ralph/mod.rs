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

pub(crate) mod attempt;
pub mod budget;
pub(crate) mod commit;
pub(crate) mod config;
pub(crate) mod control;
pub(crate) mod decide;
pub(crate) mod driver;
pub(crate) mod error;
pub mod event;
pub(crate) mod executor;
pub(crate) mod hub;
pub(crate) mod in_place;
pub(crate) mod interrupt;
pub(crate) mod json_line;
pub(crate) mod lane_setup;
pub(crate) mod lanes;
pub(crate) mod learnings;
pub(crate) mod lock;
pub(crate) mod machine;
pub(crate) mod notify;
pub(crate) mod outbox;
pub(crate) mod paths;
pub(crate) mod plan;
pub(crate) mod preflight;
pub(crate) mod prompt;
pub(crate) mod recover;
pub mod report;
pub(crate) mod routes;
pub mod run_journal;
pub mod sandbox;
pub mod session;
pub(crate) mod start;
pub mod steer;
pub(crate) mod verify;
pub(crate) mod watch;
pub(crate) mod worker;

pub(crate) use start::run;
