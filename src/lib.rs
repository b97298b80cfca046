//! spectr: spec-driven development, and `spectr ralph`, a loop that runs a coding
//! agent over a change's task list.
//!
//! Layers, data flowing one way:
//! - [`cli`] parses arguments and dispatches;
//! - [`ralph`] (the loop) decides what runs next and what an attempt's outcome was;
//! - [`model`] knows spectr and OpenSpec files; [`agent`] knows agent CLIs;
//!   [`checkpoint`] knows how to snapshot and restore a git working tree;
//! - [`process`] starts, drains, times out and stops every process spectr
//!   runs (agents, git, verify commands), and depends on nothing above;
//! - [`ui`] only renders loop events and asks questions;
//! - `text` (plain-text helpers: control sequences stripped) sits below them all.

pub mod agent;
pub mod checkpoint;
pub mod cli;
pub mod model;
pub mod process;
pub mod ralph;
pub mod serve;
pub(crate) mod text;
pub mod ui;
