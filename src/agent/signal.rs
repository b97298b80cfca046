//! Completion signals: `<promise>COMPLETE</promise>` and
//! `<promise>FAILED: reason</promise>`, read only from the agent's own final answer.
//!
//! STUB: the agent helper fills in.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "signal", content = "reason", rename_all = "snake_case")]
pub enum CompletionSignal {
    Complete,
    Failed(String),
}
