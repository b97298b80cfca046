//! `spectr ralph` on a pseudo-terminal: through `expectrl` to read lines and
//! press keys, or on a bare pty the test owns (`HangUpPty`) so it can close
//! the terminal the way a closed window or `tmux kill-session` does.

use super::{Fixture, fake_agent_bin, pids, spectr_bin};
use expectrl::{Eof, Session};
use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The cursor-down key, to move through a question's choices.
pub const DOWN: &str = "\x1b[B";

/// How long a test waits for something that must happen: a hang guard, not
/// a speed assertion.
pub const HANG_GUARD: Duration = Duration::from_secs(60);

/// `spectr <args>` in the fixture's project on a terminal of `cols` ×
/// `rows`, no colour.
pub fn spawn_sized(fx: &Fixture, cols: u16, rows: u16, args: &str) -> Session {
    let mut cmd = std::process::Command::new(spectr_bin());
    cmd.current_dir(&fx.root)
        .env("PATH", fx.path_env())
        .env("SPECTR_FAKE_SCRIPT", fx.state.join("script.json"))
        .env("SPECTR_FAKE_STATE", &fx.state)
        .env("XDG_CACHE_HOME", fx.cache_home())
        .env("NO_COLOR", "1")
        .env_remove("SPECTR_ROOT");
    spawn_command_sized(cmd, cols, rows, args)
}

/// `cmd` (its program, folder and environment; `args` appended, split by
/// the shell) on a terminal of `cols` × `rows` (TERM=xterm). The size is
/// set before it starts: the pty's size is set by this side once the shell
/// runs (which sets its own default after the fork), and the shell waits
/// until it sees it, so no race decides.
pub fn spawn_command_sized(
    cmd: std::process::Command,
    cols: u16,
    rows: u16,
    args: &str,
) -> Session {
    let mut sh = std::process::Command::new("sh");
    if let Some(dir) = cmd.get_current_dir() {
        sh.current_dir(dir);
    }
    for (key, value) in cmd.get_envs() {
        match value {
            Some(v) => sh.env(key, v),
            None => sh.env_remove(key),
        };
    }
    let program = cmd.get_program().to_string_lossy().to_string();
    sh.env("TERM", "xterm")
        // A terminal that rewraps its lines on a resize, as most do (see
        // the progress rows): not a genuine xterm.
        .env_remove("XTERM_VERSION")
        .args([
            "-c",
            &format!(
                "until [ \"$(stty size)\" = '{rows} {cols}' ]; do sleep 0.05; done; exec {program} {args}"
            ),
        ]);
    let mut s = Session::spawn(sh).expect("spawn in a pty");
    s.set_window_size(cols, rows).expect("resize the pty");
    s.set_expect_timeout(Some(HANG_GUARD));
    s
}

/// `spectr ralph` on a terminal, past the preview (`--yes`).
pub fn spawn(fx: &Fixture, extra: &[&str]) -> Session {
    let mut args = Fixture::RALPH_ARGS.to_vec();
    args.push("--yes");
    spawn_args(fx, &args, extra)
}

pub fn spawn_args(fx: &Fixture, args: &[&str], extra: &[&str]) -> Session {
    let mut cmd = fx.spectr();
    cmd.env("TERM", "xterm").args(args).args(extra);
    let mut s = Session::spawn(cmd).expect("spawn in a pty");
    s.set_expect_timeout(Some(HANG_GUARD));
    s
}

/// Stops the program on `s` (SIGSTOP) and waits until every thread of it
/// is stopped, so it writes nothing until [`resume`]: the test can read all
/// it wrote and resize the terminal between two of its writes, not during one.
pub fn pause(s: &Session) {
    let pid = s.pid().as_raw();
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGSTOP,
    );
    let deadline = Instant::now() + HANG_GUARD;
    let stopped = || {
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .map(|tasks| {
                tasks.flatten().all(|t| {
                    std::fs::read_to_string(t.path().join("stat")).is_ok_and(|stat| {
                        stat.rsplit_once(')')
                            .is_some_and(|(_, rest)| rest.trim_start().starts_with('T'))
                    })
                })
            })
            .unwrap_or(true)
    };
    while !stopped() {
        assert!(Instant::now() < deadline, "spectr did not stop");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Lets a program stopped by [`pause`] go on.
pub fn resume(s: &Session) {
    let pid = s.pid().as_raw();
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGCONT,
    );
}

/// Everything the terminal has to read now (see [`read_now`]).
pub fn drain(s: &mut Session) -> String {
    let mut seen = String::new();
    read_now(s, &mut seen);
    seen
}

/// The exit code once the program ends (None when killed by a signal).
pub fn exit_code(s: &mut Session) -> Option<i32> {
    let _ = s.expect(Eof);
    // ptyprocess's WaitStatus comes from its own nix version: read its Debug
    // form, `Exited(Pid(123), 0)`.
    let status = format!("{:?}", s.wait().expect("wait"));
    status
        .strip_prefix("Exited(")
        .and_then(|r| r.rsplit_once(", "))
        .and_then(|(_, code)| code.trim_end_matches(')').parse().ok())
}

/// What the terminal has to read now, without waiting.
fn read_now(s: &mut Session, into: &mut String) {
    let mut buf = vec![0u8; 64 * 1024];
    while let Ok(n) = s.try_read(&mut buf) {
        if n == 0 {
            break;
        }
        into.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
}

/// The last `n` characters of `text`, for a failure message.
pub fn tail(text: &str, n: usize) -> &str {
    let start = text.char_indices().rev().nth(n).map_or(0, |(i, _)| i);
    &text[start..]
}

/// Waits like `Fixture::wait_for`, reading the terminal meanwhile: with
/// several progress lines redrawn every 200 ms an unread pty fills up and
/// spectr's output (rightly) blocks. Returns what it read.
pub fn wait_reading(s: &mut Session, what: &str, cond: impl FnMut() -> bool) -> String {
    wait_reading_within(s, what, HANG_GUARD, cond)
}

/// `wait_reading` with its own hang guard (for a wait that today's bug
/// makes endless, so the test fails sooner than the default guard).
pub fn wait_reading_within(
    s: &mut Session,
    what: &str,
    limit: Duration,
    mut cond: impl FnMut() -> bool,
) -> String {
    let deadline = Instant::now() + limit;
    let mut seen = String::new();
    while !cond() {
        read_now(s, &mut seen);
        assert!(
            Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}; the terminal showed meanwhile:\n{}",
            tail(&seen, 3000)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    read_now(s, &mut seen);
    seen
}

/// Reads the terminal for `window`, for an assertion that something does
/// NOT happen meanwhile (it gives the bug a fair chance to show; a correct
/// program passes however slow the machine). Returns what it read.
pub fn read_for(s: &mut Session, window: Duration) -> String {
    let end = Instant::now() + window;
    let mut seen = String::new();
    while Instant::now() < end {
        read_now(s, &mut seen);
        std::thread::sleep(Duration::from_millis(50));
    }
    seen
}

/// Fake agents of the fixture (pids it noted in `agents.pid` and
/// `children.pid`) that are still alive: checked against the fake agent's
/// binary, so a recycled pid is never counted or signalled.
pub fn live_agents(state: &Path) -> Vec<i32> {
    let mut all = pids(state, "agents.pid");
    all.extend(pids(state, "children.pid"));
    let ours = std::fs::canonicalize(fake_agent_bin()).ok();
    all.into_iter()
        .filter(|pid| super::alive(*pid))
        .filter(|pid| {
            // A deleted-then-rebuilt binary reads as "<path> (deleted)".
            std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|exe| {
                ours.as_ref().is_some_and(|o| {
                    exe == *o || exe.to_string_lossy().starts_with(&*o.to_string_lossy())
                })
            })
        })
        .collect()
}

/// Kills what a failed test left behind (fake agents only, see `live_agents`).
pub fn kill_leftover_agents(state: &Path) {
    for pid in live_agents(state) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// A command on a pseudo-terminal the test owns alone: closing it
/// (`hang_up`) is a real hang-up (the kernel sends SIGHUP to the session
/// and the terminal reads fail), unlike expectrl's drop, which signals the
/// program and then kills it.
pub struct HangUpPty {
    child: Option<Child>,
    master: Option<std::fs::File>,
    /// Everything the terminal showed so far.
    pub seen: String,
}

impl HangUpPty {
    /// Starts `cmd` as the leader of a new session whose controlling
    /// terminal is a new pty (80 x 24).
    pub fn spawn(mut cmd: std::process::Command) -> HangUpPty {
        use nix::libc;
        use std::os::unix::fs::OpenOptionsExt;
        // Opened close-on-exec (Rust's default): another test's child
        // started meanwhile never holds our end, so closing it hangs up.
        let master = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOCTTY | libc::O_NONBLOCK)
            .open("/dev/ptmx")
            .expect("open /dev/ptmx");
        let fd = master.as_raw_fd();
        let mut name = [0 as libc::c_char; 128];
        // SAFETY: plain calls on a valid pty master fd and a local buffer.
        unsafe {
            assert_eq!(libc::grantpt(fd), 0, "grantpt");
            assert_eq!(libc::unlockpt(fd), 0, "unlockpt");
            assert_eq!(libc::ptsname_r(fd, name.as_mut_ptr(), name.len()), 0);
            let size = libc::winsize {
                ws_row: 24,
                ws_col: 80,
                ws_xpixel: 0,
                ws_ypixel: 0,
            };
            libc::ioctl(fd, libc::TIOCSWINSZ, &size);
        }
        // SAFETY: ptsname_r wrote a NUL-terminated string into `name`.
        let slave_name = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }
            .to_string_lossy()
            .to_string();
        let slave = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOCTTY)
            .open(&slave_name)
            .expect("open the pty's slave");
        let stdio = |f: &std::fs::File| Stdio::from(OwnedFd::from(f.try_clone().expect("dup")));
        cmd.stdin(stdio(&slave))
            .stdout(stdio(&slave))
            .stderr(stdio(&slave));
        // SAFETY: setsid and ioctl are async-signal-safe; nothing allocates.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("spawn on the pty");
        drop(slave);
        HangUpPty {
            child: Some(child),
            master: Some(master),
            seen: String::new(),
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.as_ref().map_or(0, |c| c.id() as i32)
    }

    /// Reads what the terminal has now (nothing once hung up).
    pub fn pump(&mut self) {
        let Some(master) = self.master.as_mut() else {
            return;
        };
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n) = master.read(&mut buf) {
            if n == 0 {
                break;
            }
            self.seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    }

    /// Waits (reading the terminal) until it has shown `text`.
    pub fn expect(&mut self, text: &str) {
        let deadline = Instant::now() + HANG_GUARD;
        loop {
            self.pump();
            if self.seen.contains(text) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {text:?}; the terminal showed:\n{}",
                tail(&self.seen, 3000)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits (reading the terminal) until `cond` holds.
    pub fn wait_for(&mut self, what: &str, mut cond: impl FnMut() -> bool) {
        let deadline = Instant::now() + HANG_GUARD;
        while !cond() {
            self.pump();
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; the terminal showed:\n{}",
                tail(&self.seen, 3000)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Types `bytes` on the terminal.
    pub fn send(&mut self, bytes: &str) {
        use std::io::Write;
        let master = self.master.as_mut().expect("the terminal is open");
        master
            .write_all(bytes.as_bytes())
            .expect("write to the pty");
    }

    /// Waits (reading the terminal) for the program to end, and reads what
    /// it left on the terminal. Returns its exit code (None when killed by
    /// a signal); fails the test if it is still running after `HANG_GUARD`.
    pub fn finish(&mut self) -> Option<i32> {
        let status = self.exit_within(HANG_GUARD).unwrap_or_else(|| {
            panic!(
                "still running {HANG_GUARD:?} later; the terminal showed:\n{}",
                tail(&self.seen, 3000)
            )
        });
        self.pump();
        status.code()
    }

    /// Closes the terminal: the last descriptor of its master goes.
    pub fn hang_up(&mut self) {
        self.pump();
        self.master = None;
    }

    /// Sends `signal` to the program.
    pub fn signal(&mut self, signal: nix::sys::signal::Signal) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid()), signal);
    }

    /// The program's exit status if it ends within `limit` (reading the
    /// terminal meanwhile, if it is still open); None if it is still running.
    pub fn exit_within(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            self.pump();
            let child = self.child.as_mut()?;
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for HangUpPty {
    /// A run the test gave up on is killed, so it never outlives the test.
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
