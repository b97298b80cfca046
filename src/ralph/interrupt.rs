//! Quit requests from keys and signals: the first starts a graceful stop (a
//! first `q` asks before it), three within 3 s force-quit at once, counting
//! the `q` that asked.

use crate::ralph::control::{ActiveAgents, Control};
use crossbeam_channel::Sender;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const FORCE_QUIT_PRESSES: usize = 3;
pub const FORCE_QUIT_WINDOW: Duration = Duration::from_secs(3);
pub const GRACEFUL_STOP_HINT_AFTER: Duration = Duration::from_secs(5);
pub const EXIT_INTERRUPTED: i32 = 130;

/// Where [`say`] writes instead, once the UI has set it: on a terminal the
/// line must go above the progress rows, not be glued to them.
static SAYER: std::sync::OnceLock<fn(&str)> = std::sync::OnceLock::new();

/// Sets where [`say`] writes (once; later calls change nothing).
pub fn set_sayer(f: fn(&str)) {
    let _ = SAYER.set(f);
}

/// Writes a line to stderr, ignoring errors: a hung-up terminal must not turn
/// a stop into a panic.
pub fn say(line: &str) {
    if let Some(f) = SAYER.get() {
        f(line);
        return;
    }
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// Shared by the signal handler and the key reader.
#[derive(Clone)]
pub struct Interrupts {
    inner: Arc<Inner>,
}

struct Inner {
    controls: Sender<Control>,
    presses: Mutex<VecDeque<Instant>>,
    active: ActiveAgents,
    stopping: AtomicBool,
    finished: AtomicBool,
    /// Puts the terminal back and writes out what is buffered before a
    /// forced exit (the UI's business, handed in by the caller).
    before_exit: Box<dyn Fn() + Send + Sync>,
}

impl Interrupts {
    pub fn new(
        controls: Sender<Control>,
        active: ActiveAgents,
        before_exit: Box<dyn Fn() + Send + Sync>,
    ) -> Interrupts {
        Interrupts {
            inner: Arc::new(Inner {
                controls,
                presses: Mutex::new(VecDeque::new()),
                active,
                stopping: AtomicBool::new(false),
                finished: AtomicBool::new(false),
                before_exit,
            }),
        }
    }

    /// A quit request by key or signal (`q`, Ctrl+C, SIGTERM, SIGHUP): counts
    /// towards a force-quit and starts the graceful stop.
    pub fn quit(&self) {
        self.press();
        // Also while a question is on screen: the run goes on without
        // waiting for it, so the stop is the run's, as for `q`.
        self.stop();
    }

    /// A `q` that only counts towards a force-quit (the first one, which asks).
    pub fn press(&self) {
        let now = Instant::now();
        let count = match self.inner.presses.lock() {
            Ok(mut p) => {
                p.push_back(now);
                while p
                    .front()
                    .is_some_and(|t| now.duration_since(*t) > FORCE_QUIT_WINDOW)
                {
                    p.pop_front();
                }
                p.len()
            }
            Err(_) => 1,
        };
        if count >= FORCE_QUIT_PRESSES {
            self.force_quit();
        }
    }

    /// Starts the graceful stop once (a confirmed quit: `y` to "Quit?").
    pub fn stop(&self) {
        if !self.inner.stopping.swap(true, Ordering::SeqCst) {
            // Act first, talk second: after a hangup stderr may be gone.
            self.inner.active.request_quit();
            let _ = self.inner.controls.send(Control::Quit);
            say("Stopping: the running agent is being stopped and the session saved...");
            let me = self.clone();
            std::thread::spawn(move || {
                std::thread::sleep(GRACEFUL_STOP_HINT_AFTER);
                if !me.inner.finished.load(Ordering::SeqCst) {
                    say(&format!(
                        "Still stopping after {}s; press q (or Ctrl+C) {FORCE_QUIT_PRESSES} times within {}s to force quit.",
                        GRACEFUL_STOP_HINT_AFTER.as_secs(),
                        FORCE_QUIT_WINDOW.as_secs()
                    ));
                }
            });
        }
    }

    /// A graceful stop is under way.
    pub fn is_stopping(&self) -> bool {
        self.inner.stopping.load(Ordering::SeqCst)
    }

    /// The run has ended; no more hints.
    pub fn finished(&self) {
        self.inner.finished.store(true, Ordering::SeqCst);
    }

    fn force_quit(&self) -> ! {
        // Cleanup is attempted, not awaited: SIGKILL needs no grace period.
        self.inner.active.kill_all_now();
        (self.inner.before_exit)();
        say(
            "Force quit: agents were killed without waiting; their last attempt was not reverted (the next run restores it) and the session file may be one step behind.",
        );
        std::process::exit(EXIT_INTERRUPTED);
    }
}
