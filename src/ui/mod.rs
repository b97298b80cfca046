//! The UI layer: renders loop events (human lines or NDJSON) and asks questions.
//! It never decides anything about the run.

pub mod agent_render;
pub mod ansi;
pub mod human;
pub mod json;
pub mod keys;
pub mod out;
pub mod prompts;
pub mod terminal;
