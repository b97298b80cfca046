//! `--json`: one loop event per line (NDJSON) on stdout.

use crate::ralph::event::{LoopEvent, Reporter};
use std::io::Write;

pub struct JsonReporter<W: Write> {
    out: W,
}

impl<W: Write> JsonReporter<W> {
    pub fn new(out: W) -> JsonReporter<W> {
        JsonReporter { out }
    }
}

impl<W: Write> Reporter for JsonReporter<W> {
    fn report(&mut self, event: &LoopEvent) {
        // A closed stdout (`| head`) must not stop the run: the session file and
        // the transcripts still record everything.
        if let Ok(line) = serde_json::to_string(event) {
            let _ = writeln!(self.out, "{line}");
            let _ = self.out.flush();
        }
    }
}

/// An `error` event on stdout for a run that could not start (exit 2).
pub fn print_error(message: &str) {
    JsonReporter::new(std::io::stdout()).report(&LoopEvent::Error {
        task: None,
        message: message.to_string(),
    });
}
