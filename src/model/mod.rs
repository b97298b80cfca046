//! The model layer: spectr and OpenSpec project files.
//!
//! Everything here is pure file knowledge: discovery, parsing, the task graph and
//! status edits. It never starts processes and never prints.

pub mod accept;
pub mod atomic;
pub mod error;
pub mod graph;
pub mod id;
mod id_index;
mod openspec;
pub mod project;
pub mod spectr_yaml;
pub mod status;
pub mod tasks;
pub mod values;

pub use error::{FileDiag, ModelError};
pub use graph::{Lane, TaskGraph};
pub use id::TaskId;
pub use project::{Change, Project, ResolvedChange};
pub use status::TaskStatus;
pub use tasks::{Task, TaskSet, TasksFile, TasksFormat, is_tasks_file_name};
