//! Plain-text agents (Amp, `--agent-cmd`): every line is kept as it was.

use super::LineParser;
use crate::agent::AgentEvent;

#[derive(Debug, Default)]
pub struct TextParser;

impl LineParser for TextParser {
    fn parse_line(&mut self, line: &str, out: &mut Vec<AgentEvent>) {
        // Blank lines are kept: they are part of a text agent's layout.
        out.push(AgentEvent::Raw {
            line: line.to_string(),
        });
    }
}
