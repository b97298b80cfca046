//! The UI layer: renders loop events (human lines or NDJSON) and asks questions.
//! It never decides anything about the run.

pub mod agent_render;
pub(crate) mod ansi;
pub(crate) mod checklist;
pub(crate) mod human;
pub(crate) mod json;
pub(crate) mod keys;
pub(crate) mod out;
pub(crate) mod progress;
pub(crate) mod prompts;
pub mod report;
pub(crate) mod screen;
pub(crate) mod terminal;
