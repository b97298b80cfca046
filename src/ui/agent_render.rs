//! STUB (agent helper).
use crate::agent::AgentEvent;
use crate::agent::receipt::Receipt;

pub fn render(event: &AgentEvent, color: bool) -> Vec<String> {
    let _ = color;
    vec![format!("{event:?}")]
}

pub fn receipt_line(receipt: &Receipt) -> String {
    format!("{receipt:?}")
}
