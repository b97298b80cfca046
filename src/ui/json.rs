//! `--json`: one loop event per line (NDJSON) on stdout.

use crate::ralph::event::{LoopEvent, Reporter};
use crate::ui::out::{self, Stdout};

pub struct JsonReporter {
    out: Stdout,
}

impl JsonReporter {
    pub fn new() -> JsonReporter {
        JsonReporter {
            out: Stdout::for_stdout(),
        }
    }
}

impl Default for JsonReporter {
    fn default() -> Self {
        JsonReporter::new()
    }
}

impl Reporter for JsonReporter {
    fn report(&mut self, event: &LoopEvent) {
        if let Ok(line) = serde_json::to_string(event) {
            self.out.line(&line);
        }
        if matches!(event, LoopEvent::Summary { .. } | LoopEvent::Error { .. }) {
            out::flush();
        }
    }
}

impl Drop for JsonReporter {
    fn drop(&mut self) {
        out::flush();
    }
}

/// An `error` event on stdout for a run that could not start (exit 2).
pub fn print_error(message: &str) {
    JsonReporter::new().report(&LoopEvent::Error {
        task: None,
        message: message.to_string(),
    });
}
