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

/// Puts the terminal back (the UI's business, set once by the caller) before
/// a signal ends spectr outside a run.
static RESTORER: std::sync::OnceLock<fn()> = std::sync::OnceLock::new();

/// Sets what puts the terminal back before a signal ends spectr outside a
/// run (once; later calls change nothing).
pub fn set_restorer(f: fn()) {
    let _ = RESTORER.set(f);
}

/// Where a signal goes: the run's stop once it runs, else nowhere (before
/// the run a signal ends spectr, see [`on_signal`]).
static ROUTE: Mutex<Option<Interrupts>> = Mutex::new(None);

/// The questions open now, each told of a signal so that it stops waiting
/// for an answer (dialoguer's read cannot be woken otherwise).
static QUESTIONS: Mutex<Vec<(u64, Sender<()>)>> = Mutex::new(Vec::new());

/// Installs the handler for SIGINT, SIGTERM and SIGHUP (the `termination`
/// feature), once, before the first question: from then on a signal never
/// kills spectr where it stands (a question's raw mode, its hidden cursor).
pub fn install_handler() -> Result<(), ctrlc::Error> {
    static INSTALLED: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    if INSTALLED.get().is_some() {
        return Ok(());
    }
    ctrlc::set_handler(on_signal)?;
    let _ = INSTALLED.set(());
    Ok(())
}

/// Signals from now on stop this run gracefully (see [`Interrupts::quit`]).
pub fn route_to(interrupts: &Interrupts) {
    *ROUTE.lock().unwrap_or_else(|e| e.into_inner()) = Some(interrupts.clone());
}

/// A signal (never a key: on a terminal the run reads Ctrl+C as a key).
/// An open question stops waiting; the run, if one runs, stops gracefully;
/// before it, with no question to end, spectr ends here with the terminal
/// put back (a question's interruption is its asker's to report).
fn on_signal() {
    let told = {
        let questions = QUESTIONS.lock().unwrap_or_else(|e| e.into_inner());
        questions
            .iter()
            .filter(|(_, tx)| tx.send(()).is_ok())
            .count()
            > 0
    };
    let route = ROUTE.lock().unwrap_or_else(|e| e.into_inner()).clone();
    match route {
        Some(interrupts) => interrupts.quit(),
        None if told => {}
        None => {
            if let Some(restore) = RESTORER.get() {
                restore();
            }
            say("Interrupted; nothing was run.");
            std::process::exit(EXIT_INTERRUPTED);
        }
    }
}

/// Tells an open question of signals until dropped.
pub struct QuestionSignals {
    id: u64,
    rx: crossbeam_channel::Receiver<()>,
}

impl QuestionSignals {
    /// Registers a question about to be asked.
    pub fn open() -> QuestionSignals {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let id = NEXT.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = crossbeam_channel::unbounded();
        QUESTIONS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((id, tx));
        QuestionSignals { id, rx }
    }

    /// Ready once a signal came.
    pub fn receiver(&self) -> &crossbeam_channel::Receiver<()> {
        &self.rx
    }
}

impl Drop for QuestionSignals {
    fn drop(&mut self) {
        QUESTIONS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(id, _)| *id != self.id);
    }
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

    /// `n` to "Quit?": the presses so far no longer count towards a
    /// force-quit.
    pub fn declined(&self) {
        if let Ok(mut p) = self.inner.presses.lock() {
            p.clear();
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
