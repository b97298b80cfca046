//! The UI layer: renders loop events, asks questions.

pub mod agent_render;
pub mod ansi;
