//! Reading the agent's stdout and stderr: every byte to the transcript,
//! every line to the parser, each read's events to the controller.

use crate::agent::AgentEvent;
use crate::agent::lines::{LineSplitter, parse_block};
use crate::agent::parse::LineParser;
use crossbeam_channel::Sender;
use std::fs::File;
use std::io::{Read, Write};
use std::process::ExitStatus;
use std::sync::Mutex;

/// One read of stdout takes what the (widened) pipe holds: a flooding agent
/// then costs a few large reads instead of many that contend with its writes
/// for the pipe. The buffer's pages are touched only as far as reads fill it.
pub(super) const READ_CHUNK: usize = 1024 * 1024;
/// stderr carries a few lines; its reader keeps a small buffer.
pub(super) const STDERR_READ_CHUNK: usize = 64 * 1024;
/// A "line" longer than this is cut and passed on as it is, so one endless
/// line cannot take all memory.
const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// Asks for a larger pipe from the agent's stdout: with the default 64 KiB,
/// a chatty agent and its reader take turns blocking every few lines, and
/// the thread switches cost a fifth of the reading. Best effort: a smaller
/// pipe still works.
pub(super) fn widen_pipe(pipe: &impl std::os::fd::AsFd) {
    #[cfg(target_os = "linux")]
    {
        use nix::fcntl::{FcntlArg, fcntl};
        // Any user may ask for up to 1 MiB (`/proc/sys/fs/pipe-max-size`).
        let _ = fcntl(pipe, FcntlArg::F_SETPIPE_SZ(1024 * 1024));
    }
    #[cfg(not(target_os = "linux"))]
    let _ = pipe;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stream {
    Stdout,
    Stderr,
}

pub(super) enum Msg {
    /// What one read produced (possibly no whole line yet: still activity).
    Output(Vec<AgentEvent>),
    Eof(Stream),
    Exited(ExitStatus),
    WaitFailed(String),
}

/// Reads `pipe` to its end: every byte to the transcript (whole lines at a
/// time, so stdout and stderr never interleave inside a line), every line to
/// the parser, each read's events to the controller.
pub(super) fn read_stream(
    mut pipe: impl Read,
    stream: Stream,
    mut parser: Box<dyn LineParser>,
    transcript: &Mutex<File>,
    tx: &Sender<Msg>,
    chunk: usize,
) {
    let mut buf = vec![0u8; chunk];
    let mut lines = LineSplitter::new(MAX_LINE_BYTES);
    let mut transcript_ok = true;
    let mut last_count = 0;
    let write = |bytes: &[u8], ok: &mut bool| {
        if *ok && let Ok(mut f) = transcript.lock() {
            *ok = f.write_all(bytes).is_ok();
        }
    };
    loop {
        let n = match pipe.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        // Sized like the last read's: a flood's reads are alike.
        let mut events = Vec::with_capacity(last_count);
        lines.feed(&buf[..n], |block| {
            write(block, &mut transcript_ok);
            parse_block(block, &mut *parser, &mut events);
        });
        last_count = events.len();
        if tx.send(Msg::Output(events)).is_err() {
            return;
        }
    }
    let mut events = Vec::new();
    let rest = lines.finish();
    write(&rest, &mut transcript_ok);
    parse_block(&rest, &mut *parser, &mut events);
    parser.finish(&mut events);
    if !transcript_ok {
        let what = if stream == Stream::Stdout {
            "stdout"
        } else {
            "stderr"
        };
        events.push(AgentEvent::Stderr {
            line: format!("spectr: could not write the agent's {what} to the transcript"),
        });
    }
    let _ = tx.send(Msg::Output(events));
    let _ = tx.send(Msg::Eof(stream));
}
