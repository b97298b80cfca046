//! STUB: per-attempt receipt (agent helper).
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Receipt {}

impl Receipt {
    pub fn from_exit(exit: &crate::agent::AgentExit) -> Receipt {
        let _ = exit;
        Receipt {}
    }
}
impl Receipt {
    pub fn none() -> Receipt {
        Receipt {}
    }
}
