//! `--json`: one loop event per line (NDJSON) on stdout.

use crate::ralph::event::{LoopEvent, Reporter};
use crate::ralph::json_line::JsonLines;
use crate::ui::out::{self, Stdout};

pub struct JsonReporter {
    out: Stdout,
    lines: JsonLines,
    /// Each event is serialized here, reused: a chatty agent's events cost
    /// no allocation each.
    buf: Vec<u8>,
}

impl JsonReporter {
    pub fn new() -> JsonReporter {
        JsonReporter {
            out: Stdout::for_stdout(),
            lines: JsonLines::new(),
            buf: Vec::new(),
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
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        if self
            .lines
            .write(&mut buf, event, std::time::SystemTime::now())
        {
            buf.push(b'\n');
            self.out.bytes(&buf);
        }
        self.buf = buf;
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
