//! The terminal as a question leaves it. dialoguer hides the cursor and puts
//! the terminal in raw mode while it waits, and puts both back only when it
//! is answered; left any other way (Ctrl+C, Esc, a signal, a hang-up, an
//! error, a panic) the cursor stayed hidden and the shell's prompt was glued
//! to the question. One record of the open question, and one [`restore`]
//! that puts everything back, called from every way out: the guard's drop,
//! the panic hook, the signal path and the end of a run.

use nix::sys::termios::{self, SetArg, Termios};
use std::io::Write;
use std::sync::Mutex;

/// Where the cursor is while a question waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// At the end of the question's line (`Start? [Y/n] `): leaving ends it.
    Line,
    /// At the start of the line under a list: the lines are already ended.
    Block,
}

struct Open {
    shape: Shape,
    /// The terminal's settings before the question (None: not a terminal).
    settings: Option<Termios>,
}

/// The question on screen now (one at a time: they are asked in turn).
static OPEN: Mutex<Option<Open>> = Mutex::new(None);

/// A question on screen; dropped unanswered, it puts the terminal back.
pub struct QuestionGuard(());

/// Records a question about to be drawn.
pub fn question(shape: Shape) -> QuestionGuard {
    install_panic_hook();
    let settings = termios::tcgetattr(std::io::stdin()).ok();
    *lock() = Some(Open { shape, settings });
    QuestionGuard(())
}

impl QuestionGuard {
    /// dialoguer answered (or cancelled on Esc): it showed the cursor and
    /// ended the line itself.
    pub fn answered(self) {
        lock().take();
    }
}

impl Drop for QuestionGuard {
    fn drop(&mut self) {
        restore();
    }
}

fn lock() -> std::sync::MutexGuard<'static, Option<Open>> {
    // A panic while holding it left a plain record: still usable.
    OPEN.lock().unwrap_or_else(|e| e.into_inner())
}

/// Puts the terminal back as spectr found it: an open question's settings,
/// cursor and line, and the settings the run's key reading changed. Safe
/// to call any number of times, from any thread; errors are ignored (after
/// a hang-up there is no terminal to write to).
pub fn restore() {
    if let Some(open) = lock().take() {
        if let Some(settings) = &open.settings {
            let _ = termios::tcsetattr(std::io::stdin(), SetArg::TCSANOW, settings);
        }
        let mut err = std::io::stderr().lock();
        let end = match open.shape {
            Shape::Line => "\n",
            Shape::Block => "",
        };
        let _ = write!(err, "\x1b[?25h{end}");
        let _ = err.flush();
    }
    crate::ui::keys::restore_terminal();
}

/// Restores the terminal before the panic message is printed (on its own
/// line, the cursor shown), whichever thread panics.
pub fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
    });
}
