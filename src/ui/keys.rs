//! Keys while the loop runs: q r s p and Ctrl+C, read from the terminal in
//! cbreak mode (no echo, no line buffering). Ctrl+C is read as a key, not
//! taken as a signal, so that it asks `Quit?` as `q` does (the terminal's
//! interrupt character is switched off meanwhile; Ctrl+Z and Ctrl+\ stay
//! signals). The terminal is put back on every exit path: drop, panic hook,
//! forced exit. While a question is asked (dialoguer), reading is suspended
//! and Ctrl+C is a signal again.

use crate::model::TaskId;
use crate::ralph::control::{Control, RunningTasks};
use crate::ralph::interrupt::{Interrupts, say};
use crossbeam_channel::Sender;
use nix::sys::termios::{self, LocalFlags, SetArg, SpecialCharacterIndices, Termios};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

/// The terminal settings from before we changed them.
static ORIGINAL: OnceLock<Mutex<Option<Termios>>> = OnceLock::new();

/// Puts the terminal back as we found it. Safe to call any number of times,
/// from any thread.
pub fn restore_terminal() {
    if let Some(m) = ORIGINAL.get()
        && let Ok(guard) = m.lock()
        && let Some(t) = guard.as_ref()
    {
        let _ = termios::tcsetattr(std::io::stdin(), SetArg::TCSANOW, t);
    }
}

fn set_cbreak(original: &Termios) -> nix::Result<()> {
    let mut t = original.clone();
    t.local_flags.remove(LocalFlags::ICANON | LocalFlags::ECHO);
    // Ctrl+C reaches the reader as a byte (see `interrupt_key`).
    t.control_chars[SpecialCharacterIndices::VINTR as usize] = nix::libc::_POSIX_VDISABLE;
    // One byte at a time; waiting is done with poll(), so a hangup is seen.
    t.control_chars[SpecialCharacterIndices::VMIN as usize] = 1;
    t.control_chars[SpecialCharacterIndices::VTIME as usize] = 0;
    termios::tcsetattr(std::io::stdin(), SetArg::TCSANOW, &t)
}

/// The terminal without line buffering or echo (signals stay on), while a
/// question waits for a key with `poll` (see [`key_within`]); put back on
/// drop, and by [`restore_terminal`] on a forced exit.
pub struct KeysOneByOne(Option<Termios>);

/// Puts the terminal in [`KeysOneByOne`] mode; a no-op off a terminal.
pub fn keys_one_by_one() -> KeysOneByOne {
    let stdin = std::io::stdin();
    let Ok(was) = termios::tcgetattr(&stdin) else {
        return KeysOneByOne(None);
    };
    let slot = ORIGINAL.get_or_init(|| Mutex::new(None));
    if let Ok(mut g) = slot.lock()
        && g.is_none()
    {
        *g = Some(was.clone());
    }
    let mut t = was.clone();
    t.local_flags.remove(LocalFlags::ICANON | LocalFlags::ECHO);
    t.control_chars[SpecialCharacterIndices::VMIN as usize] = 1;
    t.control_chars[SpecialCharacterIndices::VTIME as usize] = 0;
    match termios::tcsetattr(&stdin, SetArg::TCSANOW, &t) {
        Ok(()) => KeysOneByOne(Some(was)),
        Err(_) => KeysOneByOne(None),
    }
}

impl Drop for KeysOneByOne {
    fn drop(&mut self) {
        if let Some(t) = self.0.take() {
            let _ = termios::tcsetattr(std::io::stdin(), SetArg::TCSANOW, &t);
        }
    }
}

/// Whether a key waits on stdin within `timeout` (a hangup counts: the
/// read that follows reports it).
pub fn key_within(timeout: Duration) -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    let stdin = std::io::stdin();
    let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
    let ms = u16::try_from(timeout.as_millis()).unwrap_or(u16::MAX);
    match poll(&mut fds, PollTimeout::from(ms)) {
        Ok(n) => n > 0,
        Err(_) => false,
    }
}

/// Whether we are the terminal's foreground job: a background job (`spectr
/// ralph x &`) that touched the terminal would be stopped by SIGTTOU.
fn in_foreground() -> bool {
    nix::unistd::tcgetpgrp(std::io::stdin()).is_ok_and(|pg| pg == nix::unistd::getpgrp())
}

struct Shared {
    suspended: AtomicBool,
    stop: AtomicBool,
    /// Held while a read is in progress, so suspension waits for it.
    reading: Mutex<()>,
    original: Mutex<Termios>,
    /// The terminal's interrupt character (Ctrl+C unless `stty intr` says
    /// otherwise), read as a key while keys are read; None if it has none.
    interrupt_key: Option<u8>,
}

pub struct KeyReader {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// Pauses key reading while a question is on screen; resumes on drop.
pub struct Suspended<'a>(&'a Shared);

impl Drop for Suspended<'_> {
    fn drop(&mut self) {
        if self.0.stop.load(Ordering::SeqCst) {
            // The run is over: the terminal stays as it was found.
            return;
        }
        if let Ok(t) = self.0.original.lock() {
            let _ = set_cbreak(&t);
        }
        self.0.suspended.store(false, Ordering::SeqCst);
    }
}

/// Suspends key reading from another thread (the question thread).
#[derive(Clone)]
pub struct KeyPauser(Arc<Shared>);

impl KeyPauser {
    pub fn suspend(&self) -> Suspended<'_> {
        suspend(&self.0)
    }
}

fn suspend(shared: &Shared) -> Suspended<'_> {
    shared.suspended.store(true, Ordering::SeqCst);
    // Wait out a read in progress (at most ~100 ms).
    let _g = shared.reading.lock();
    restore_terminal();
    Suspended(shared)
}

impl KeyReader {
    /// None when stdin is not a terminal (then no keys are read).
    /// `running`: the tasks running now, so `r` and `s` can ask which one.
    pub fn start(
        controls: Sender<Control>,
        interrupts: Interrupts,
        running: RunningTasks,
    ) -> Option<KeyReader> {
        Self::start_with(move |s| read_keys(s, &controls, &interrupts, &running))
    }

    /// The keys of `spectr watch` (see [`WatchKey`]); None when stdin is
    /// not a terminal.
    pub fn start_watch(keys: Sender<WatchKey>, running: RunningTasks) -> Option<KeyReader> {
        Self::start_with(move |s| read_watch_keys(s, &keys, &running))
    }

    fn start_with(read: impl FnOnce(&Shared) + Send + 'static) -> Option<KeyReader> {
        let stdin = std::io::stdin();
        if !stdin.is_terminal() || !in_foreground() {
            return None;
        }
        let original = termios::tcgetattr(&stdin).ok()?;
        let slot = ORIGINAL.get_or_init(|| Mutex::new(None));
        if let Ok(mut g) = slot.lock() {
            *g = Some(original.clone());
        }
        crate::ui::screen::install_panic_hook();
        set_cbreak(&original).ok()?;
        let intr = original.control_chars[SpecialCharacterIndices::VINTR as usize];
        let shared = Arc::new(Shared {
            suspended: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            reading: Mutex::new(()),
            original: Mutex::new(original),
            interrupt_key: (intr != nix::libc::_POSIX_VDISABLE).then_some(intr),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("spectr-keys".into())
            .spawn(move || read(&s))
            .ok();
        Some(KeyReader { shared, thread })
    }

    pub fn pauser(&self) -> KeyPauser {
        KeyPauser(self.shared.clone())
    }
}

impl Drop for KeyReader {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        restore_terminal();
    }
}

enum Read {
    Key(u8),
    Nothing,
    /// The terminal is gone (hangup, EOF): stop reading for good.
    Gone,
}

fn read_byte(shared: &Shared) -> Read {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    let Ok(_g) = shared.reading.lock() else {
        return Read::Gone;
    };
    if shared.suspended.load(Ordering::SeqCst) {
        return Read::Nothing;
    }
    let stdin = std::io::stdin();
    let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
    // 100 ms, so the thread notices a stop or a suspension quickly.
    match poll(&mut fds, PollTimeout::from(100u16)) {
        Ok(0) => return Read::Nothing,
        Ok(_) => {}
        Err(nix::errno::Errno::EINTR) => return Read::Nothing,
        Err(_) => return Read::Gone,
    }
    let revents = fds[0].revents().unwrap_or(PollFlags::empty());
    if revents.intersects(PollFlags::POLLHUP | PollFlags::POLLERR | PollFlags::POLLNVAL)
        && !revents.contains(PollFlags::POLLIN)
    {
        return Read::Gone;
    }
    let mut buf = [0u8; 1];
    match nix::unistd::read(&stdin, &mut buf) {
        Ok(1) => Read::Key(buf[0]),
        Err(nix::errno::Errno::EINTR | nix::errno::Errno::EAGAIN) => Read::Nothing,
        _ => Read::Gone,
    }
}

fn next_key(shared: &Shared) -> Option<u8> {
    loop {
        if shared.stop.load(Ordering::SeqCst) {
            return None;
        }
        if shared.suspended.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        }
        match read_byte(shared) {
            Read::Key(b) => return Some(b),
            Read::Nothing => {}
            Read::Gone => return None,
        }
    }
}

/// Which running task `r` or `s` is meant for: the only one, or the one the
/// person picks by number (any other key cancels). `Some(None)` when nothing
/// runs (the loop applies it to whatever is about to run or waiting).
fn pick_task(shared: &Shared, running: &RunningTasks, verb: &str) -> Option<Option<TaskId>> {
    let tasks = running.get();
    if tasks.len() <= 1 {
        return Some(tasks.into_iter().next());
    }
    let choices: Vec<String> = tasks
        .iter()
        .take(9)
        .enumerate()
        .map(|(i, t)| format!("{} {t}", i + 1))
        .collect();
    let key = ask_key(
        shared,
        &format!(
            "{verb} which task? {} (any other key cancels)",
            choices.join(" · ")
        ),
    )?;
    let picked = (key as char)
        .to_digit(10)
        .and_then(|d| (d as usize).checked_sub(1))
        .and_then(|i| tasks.get(i).cloned());
    match picked {
        Some(t) => Some(Some(t)),
        None => {
            say("Cancelled.");
            None
        }
    }
}

/// Asks `question` and reads the key that answers it (None: the reader
/// stops). On a terminal with progress rows the question is pinned under
/// them until the key comes (see `progress::pin`), so the output that goes
/// on meanwhile never scrolls it away; then it leaves the screen, and the
/// caller says what the answer did. Otherwise it is a line of its own.
fn ask_key(shared: &Shared, question: &str) -> Option<u8> {
    let pinned = crate::ui::progress::pin(vec![question.to_string()], false);
    if pinned.is_none() {
        say(question);
    }
    let key = next_key(shared);
    if let Some(pinned) = pinned {
        pinned.remove(None);
    }
    key
}

/// What a key asks of `spectr watch`: it only watches, so `q` and Ctrl+C
/// leave it (the run goes on); the run is stopped only by `x`, confirmed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchKey {
    Detach,
    TogglePause,
    Skip(Option<TaskId>),
    Restart(Option<TaskId>),
    StopRun,
}

fn read_watch_keys(shared: &Shared, keys: &Sender<WatchKey>, running: &RunningTasks) {
    while let Some(key) = next_key(shared) {
        let wanted = match key {
            b'q' | b'Q' => Some(WatchKey::Detach),
            k if Some(k) == shared.interrupt_key => Some(WatchKey::Detach),
            b'p' | b'P' => Some(WatchKey::TogglePause),
            b'r' | b'R' => pick_task(shared, running, "Restart").map(WatchKey::Restart),
            b's' | b'S' => pick_task(shared, running, "Skip").map(WatchKey::Skip),
            b'x' | b'X' => {
                let asked = ask_key(
                    shared,
                    "Stop the run? Its agents will be stopped and its session saved. [y/N]",
                );
                match asked {
                    Some(b'y' | b'Y') => Some(WatchKey::StopRun),
                    _ => {
                        say("The run goes on.");
                        None
                    }
                }
            }
            _ => None,
        };
        if let Some(wanted) = wanted {
            let detach = wanted == WatchKey::Detach;
            if keys.send(wanted).is_err() || detach {
                return;
            }
        }
    }
}

fn read_keys(
    shared: &Shared,
    controls: &Sender<Control>,
    interrupts: &Interrupts,
    running: &RunningTasks,
) {
    while let Some(key) = next_key(shared) {
        // Ctrl+C is a quit key like q: it asks, and answers yes.
        let quit_key = match key {
            b'q' | b'Q' => Some("q"),
            k if Some(k) == shared.interrupt_key => Some("Ctrl+C"),
            _ => None,
        };
        match key {
            _ if quit_key.is_some() && interrupts.is_stopping() => interrupts.quit(),
            _ if let Some(name) = quit_key => {
                // Nothing new starts while the question is open.
                let _ = controls.send(Control::QuitAsked);
                // The asking press counts: q q q force-quits, as documented.
                interrupts.press();
                let agents = if running.get().len() > 1 {
                    "agents"
                } else {
                    "agent"
                };
                let asked = ask_key(
                    shared,
                    &format!(
                        "Quit? The running {agents} will be stopped and the session saved. [y/N] ({name} again = yes; 3 x {name} = force quit)"
                    ),
                );
                // The line said next records the answer (`Stopping: ...`,
                // `Not quitting.`).
                match asked {
                    Some(b'q' | b'Q') => interrupts.quit(),
                    Some(k) if Some(k) == shared.interrupt_key => interrupts.quit(),
                    Some(b'y' | b'Y') => interrupts.stop(),
                    _ if interrupts.is_stopping() => {}
                    _ => {
                        interrupts.declined();
                        say("Not quitting.");
                        let _ = controls.send(Control::QuitDeclined);
                    }
                }
            }
            b'r' | b'R' => {
                // The run says what happened (`restarting task 1.2`, or
                // that there was nothing to restart).
                if let Some(task) = pick_task(shared, running, "Restart") {
                    let _ = controls.send(Control::Restart(task));
                }
            }
            b's' | b'S' => {
                if let Some(task) = pick_task(shared, running, "Skip") {
                    let _ = controls.send(Control::Skip(task));
                }
            }
            b'p' | b'P' => {
                let _ = controls.send(Control::TogglePause);
            }
            _ => {}
        }
    }
}
