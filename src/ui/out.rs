//! The reporters' stdout. On a terminal every line is written at once; into a
//! pipe or file, lines collect in a buffer that a helper thread writes out a
//! moment after the last one arrived (or at once past a size), so an agent's
//! flood costs a few large writes instead of one system call per line, and a
//! quiet agent's last line still shows within milliseconds.

use std::io::Write;
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

/// Written out at once past this size.
const HIGH_WATER: usize = 64 * 1024;
/// How long the helper lets lines gather before writing them.
const LINGER: Duration = Duration::from_millis(3);

struct Shared {
    state: Mutex<Vec<u8>>,
    wake: Condvar,
}

static SHARED: OnceLock<Shared> = OnceLock::new();

fn shared() -> &'static Shared {
    SHARED.get_or_init(|| {
        // The helper is started once, with the buffer; if the thread cannot
        // start, lines are still written at the latest by the next `flush`.
        let _ = std::thread::Builder::new()
            .name("stdout-flush".into())
            .spawn(flusher);
        Shared {
            state: Mutex::new(Vec::with_capacity(HIGH_WATER)),
            wake: Condvar::new(),
        }
    })
}

fn lock(shared: &Shared) -> MutexGuard<'_, Vec<u8>> {
    // A panic while holding the lock left plain bytes behind: still usable.
    shared.state.lock().unwrap_or_else(|e| e.into_inner())
}

fn write_out(buf: &mut Vec<u8>) {
    if buf.is_empty() {
        return;
    }
    let mut out = std::io::stdout().lock();
    // A closed stdout (`| head`) must not stop the run: the session file and
    // the transcripts still record everything.
    let _ = out.write_all(buf);
    let _ = out.flush();
    buf.clear();
}

fn flusher() {
    let shared = shared();
    let mut buf = lock(shared);
    loop {
        while buf.is_empty() {
            buf = shared.wake.wait(buf).unwrap_or_else(|e| e.into_inner());
        }
        // Let the rest of a burst arrive, then write it in one go.
        drop(buf);
        std::thread::sleep(LINGER);
        buf = lock(shared);
        write_out(&mut buf);
    }
}

/// Where a reporter's lines go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stdout {
    /// Each line written and flushed at once (a terminal: a person watches).
    Direct,
    /// Lines gathered and written shortly after (a pipe or a file).
    Buffered,
}

impl Stdout {
    pub fn for_stdout() -> Stdout {
        use std::io::IsTerminal;
        if std::io::stdout().is_terminal() {
            Stdout::Direct
        } else {
            Stdout::Buffered
        }
    }

    /// Writes `text` and a newline.
    pub fn line(self, text: &str) {
        self.write(&[text.as_bytes(), b"\n"]);
    }

    /// Writes `text` as it is (whole lines, each with its newline).
    pub fn text(self, text: &str) {
        self.write(&[text.as_bytes()]);
    }

    /// Writes `bytes` as they are (whole lines of UTF-8, each with its newline).
    pub fn bytes(self, bytes: &[u8]) {
        self.write(&[bytes]);
    }

    fn write(self, parts: &[&[u8]]) {
        match self {
            Stdout::Direct => {
                flush();
                let mut out = std::io::stdout().lock();
                for p in parts {
                    let _ = out.write_all(p);
                }
                let _ = out.flush();
            }
            Stdout::Buffered => {
                let shared = shared();
                let mut buf = lock(shared);
                let was_empty = buf.is_empty();
                for p in parts {
                    buf.extend_from_slice(p);
                }
                if buf.len() >= HIGH_WATER {
                    write_out(&mut buf);
                } else if was_empty {
                    shared.wake.notify_one();
                }
            }
        }
    }
}

/// Writes out whatever is buffered (before exiting, asking a question, or
/// printing directly).
pub fn flush() {
    if let Some(shared) = SHARED.get() {
        write_out(&mut lock(shared));
    }
}

/// [`flush`] for a process about to exit in a hurry: a reader that stopped
/// reading (a paused pager) would block the write forever, so give it at
/// most `limit`, then go on without it.
pub fn flush_within(limit: std::time::Duration) {
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("stdout-final".into())
        .spawn(move || {
            flush();
            let _ = done_tx.send(());
        });
    if spawned.is_ok() {
        let _ = done_rx.recv_timeout(limit);
    }
}
