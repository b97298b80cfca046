//! Steering a run from another shell: the run listens on a Unix socket,
//! `<change>/.ralph/control.sock` (mode 0600, only while it holds the
//! change's lock), for `spectr ralph pause|resume|stop <change>` and the
//! like ([`client`]). A request becomes the same [`Control`] a key press
//! does, shown first as who asked for what; `stop` is the graceful stop of
//! Ctrl+C.
//!
//! Only the user's own processes may connect, and never an agent of this
//! run or anything it started: an agent does not steer its own run.

pub mod client;
pub mod proto;

use crate::ralph::control::{ActiveAgents, Control, ExhaustChoice, OpenQuestion, RunningTasks};
use crate::ralph::interrupt::Interrupts;
use crossbeam_channel::Sender;
use proto::{Hello, PROTO, Reply, Request};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// The socket's name in the change's state folder.
pub const SOCKET: &str = "control.sock";
/// Connections served at once; more are refused.
const MAX_CONNECTIONS: usize = 16;
/// A client that says nothing for this long is let go.
const IDLE: Duration = Duration::from_secs(5);
/// How often a connection looks whether the run ended while it waits for
/// its client.
const POLL: Duration = Duration::from_millis(100);
/// Once the run ends, how long a subscriber that keeps reading has to take
/// what is left.
const DRAIN: Duration = Duration::from_secs(1);
/// Lines a subscriber is sent per write, at most.
const BATCH: usize = 1024;
/// After a short batch, how long a subscriber's lines gather before the
/// next write: a flooding agent's lines go out a batch at a time, not a
/// wake-up and a write each (watchers see them a few ms later).
const GATHER: Duration = Duration::from_millis(15);
/// [`GATHER`] for a reader that wants only each task's last lines.
const THIN_GATHER: Duration = Duration::from_millis(100);
/// `sun_path` holds 108 bytes with its NUL.
const MAX_PATH: usize = 107;

/// Whether a run of the change in `change_dir` listens (its socket is there).
pub fn listens_in(change_dir: &Path) -> bool {
    crate::ralph::paths::state_dir(change_dir)
        .join(SOCKET)
        .exists()
}

/// Does `act` on the socket at `path`, through `/proc/self/fd/<its
/// folder>/` when the path is too long for a socket address (a deep project
/// folder, a long change id). Shared with the client.
pub(crate) fn within_reach<T>(
    path: &Path,
    act: impl FnOnce(&Path) -> std::io::Result<T>,
) -> std::io::Result<T> {
    if path.as_os_str().len() <= MAX_PATH {
        return act(path);
    }
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return act(path);
    };
    // Held open while `act` runs: the short name points through it.
    let folder = std::fs::File::open(dir)?;
    let short = Path::new("/proc/self/fd")
        .join(std::os::fd::AsRawFd::as_raw_fd(&folder).to_string())
        .join(name);
    act(&short)
}

/// What a connection acts on.
#[derive(Clone)]
pub(crate) struct Steering {
    pub change: String,
    /// The change's learnings file, for `learn`.
    pub learnings: PathBuf,
    pub controls: Sender<Control>,
    pub interrupts: Interrupts,
    pub running: RunningTasks,
    pub question: OpenQuestion,
    pub agents: ActiveAgents,
    /// The run's events, for subscribers.
    pub hub: crate::ralph::hub::Hub,
}

/// The listening socket; closed and removed on drop.
pub(crate) struct ControlSocket {
    path: PathBuf,
    done: Arc<AtomicBool>,
    /// Written on drop: wakes the listener at once (it waits in `poll`).
    wake: std::os::fd::OwnedFd,
    listener: Option<JoinHandle<()>>,
}

impl ControlSocket {
    /// Listens in `state_dir` (the caller holds the change's lock, so a
    /// socket left there is a dead run's).
    pub fn start(state_dir: &Path, steering: Steering) -> Result<ControlSocket, String> {
        let path = state_dir.join(SOCKET);
        let _ = std::fs::remove_file(&path);
        let listener = within_reach(&path, |p| UnixListener::bind(p)).map_err(|e| e.to_string())?;
        let owner_only = {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
        };
        // Non-blocking: `poll` says a client knocked; one that went away
        // meanwhile must not leave the listener stuck in `accept`.
        if let Err(e) = owner_only.and_then(|()| listener.set_nonblocking(true)) {
            let _ = std::fs::remove_file(&path);
            return Err(e.to_string());
        }
        let (woken, wake) = match nix::unistd::pipe() {
            Ok(pair) => pair,
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                return Err(e.to_string());
            }
        };
        let done = Arc::new(AtomicBool::new(false));
        let stop = done.clone();
        let thread = std::thread::Builder::new()
            .name("control-socket".into())
            .spawn(move || listen(&listener, &woken, &steering, &stop))
            .map_err(|e| e.to_string());
        match thread {
            Ok(t) => Ok(ControlSocket {
                path,
                done,
                wake,
                listener: Some(t),
            }),
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                Err(e)
            }
        }
    }
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        self.done.store(true, Ordering::SeqCst);
        let _ = nix::unistd::write(&self.wake, b"x");
        let _ = std::fs::remove_file(&self.path);
        if let Some(t) = self.listener.take() {
            let _ = t.join();
        }
    }
}

/// Accepts until the run ends (`woken` readable); then waits for the
/// connections, each of which ends within [`POLL`] of it.
fn listen(
    listener: &UnixListener,
    woken: &std::os::fd::OwnedFd,
    steering: &Steering,
    done: &Arc<AtomicBool>,
) {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let live = Arc::new(AtomicUsize::new(0));
    let mut served: Vec<JoinHandle<()>> = Vec::new();
    while !done.load(Ordering::SeqCst) {
        let mut fds = [
            PollFd::new(listener.as_fd(), PollFlags::POLLIN),
            PollFd::new(woken.as_fd(), PollFlags::POLLIN),
        ];
        // A second's bound: the flag is seen even if a wake were lost.
        if poll(&mut fds, PollTimeout::from(1000u16)).is_err() {
            std::thread::sleep(POLL);
            continue;
        }
        let Ok((stream, _)) = listener.accept() else {
            continue;
        };
        served.retain(|t| !t.is_finished());
        if live.load(Ordering::SeqCst) >= MAX_CONNECTIONS {
            let _ = refuse(stream, "busy", "the run serves 16 connections already");
            continue;
        }
        live.fetch_add(1, Ordering::SeqCst);
        let (steering, live, done) = (steering.clone(), live.clone(), done.clone());
        let t = std::thread::Builder::new()
            .name("control-client".into())
            .spawn(move || {
                serve(stream, &steering, &done);
                live.fetch_sub(1, Ordering::SeqCst);
            });
        if let Ok(t) = t {
            served.push(t);
        }
    }
    for t in served {
        let _ = t.join();
    }
}

fn refuse(mut stream: UnixStream, error: &str, message: &str) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_write_timeout(Some(IDLE))?;
    write_reply(&mut stream, &Reply::refused(error, message))
}

fn write_reply(stream: &mut UnixStream, reply: &Reply) -> std::io::Result<()> {
    let mut line = serde_json::to_string(reply).map_err(std::io::Error::other)?;
    line.push('\n');
    stream.write_all(line.as_bytes())
}

/// One connection: the peer checked, its hello answered, then each request.
fn serve(stream: UnixStream, steering: &Steering, done: &AtomicBool) {
    let prepared = stream
        .set_nonblocking(false)
        .and_then(|()| stream.set_read_timeout(Some(POLL)))
        .and_then(|()| stream.set_write_timeout(Some(IDLE)));
    let (Ok(()), Ok(mut out)) = (prepared, stream.try_clone()) else {
        return;
    };
    let peer = match peer_allowed(&stream, &steering.agents) {
        Ok(pid) => pid,
        Err(why) => {
            let _ = write_reply(&mut out, &Reply::refused("not_allowed", why));
            return;
        }
    };
    let mut reader = BufReader::new(stream);
    let mut client = None;
    let mut line = String::new();
    let mut quiet_since = std::time::Instant::now();
    loop {
        line.clear();
        let read = read_line_waiting(&mut reader, &mut line, done, &mut quiet_since);
        match read {
            Ok(0) | Err(_) => return,
            Ok(n) if n > proto::MAX_LINE => {
                let _ = write_reply(
                    &mut out,
                    &Reply::refused("too_long", "a line of over 64 KiB"),
                );
                return;
            }
            Ok(_) => {}
        }
        let request = serde_json::from_str::<Request>(line.trim_end());
        let stopping = client.is_some() && matches!(request, Ok(Request::Stop));
        if let (Some(_), Ok(Request::Subscribe { from, agent_lines })) = (&client, &request) {
            if write_reply(&mut out, &Reply::ok()).is_ok() {
                stream_events(&mut out, &steering.hub, *from, *agent_lines, done);
            }
            return;
        }
        let reply = match (request, &client) {
            (Err(e), _) => Reply::refused("bad_request", format!("not a request: {e}")),
            (
                Ok(Request::Hello {
                    proto,
                    client: name,
                }),
                None,
            ) => {
                if proto != PROTO {
                    Reply::refused(
                        "proto",
                        format!("this run speaks protocol {PROTO}, not {proto}"),
                    )
                } else {
                    // Shown on the run's terminal: no control characters, short.
                    let name: String = crate::text::clean(&name).chars().take(60).collect();
                    client = Some(format!("{name} (pid {peer})"));
                    Reply::Hello {
                        hello: Hello {
                            proto: PROTO,
                            change: steering.change.clone(),
                            pid: std::process::id(),
                            instance: steering.hub.instance.to_string(),
                        },
                    }
                }
            }
            (Ok(_), None) => Reply::refused("no_hello", "say hello first"),
            (Ok(Request::Hello { .. }), Some(_)) => Reply::refused("bad_request", "hello was said"),
            (Ok(request), Some(by)) => act(&request, by, steering),
        };
        if write_reply(&mut out, &reply).is_err() {
            return;
        }
        if stopping {
            let _ = out.flush();
            steering.interrupts.stop();
            return;
        }
    }
}

/// Sends the run's events after `from` until the run's last, as fast as
/// the client reads: the run never waits for it (a client that falls
/// behind gets a `gap` line for what it missed). Once the run is over the
/// client has [`DRAIN`] to take the rest.
fn stream_events(
    out: &mut UnixStream,
    hub: &crate::ralph::hub::Hub,
    from: u64,
    agent_lines: Option<usize>,
    done: &AtomicBool,
) {
    use crate::ralph::hub::{elided_line, gap_line, thin};
    // A client that reads nothing holds only this thread, which looks up
    // every [`POLL`] whether the run ended.
    let _ = out.set_write_timeout(Some(POLL));
    let mut cursor = from;
    let mut drain_until: Option<std::time::Instant> = None;
    let mut buf = Vec::new();
    loop {
        let give_up = |until: &mut Option<std::time::Instant>| {
            if done.load(Ordering::SeqCst) {
                let at = *until.get_or_insert_with(|| std::time::Instant::now() + DRAIN);
                return std::time::Instant::now() >= at;
            }
            false
        };
        if give_up(&mut drain_until) {
            return;
        }
        let batch = hub.read(cursor, BATCH, POLL);
        buf.clear();
        let keep = agent_lines.map(|k| thin(&batch.lines, k));
        let mut elided: std::collections::BTreeMap<&str, u64> = Default::default();
        for (i, (missed, line)) in batch.missed_before.iter().zip(&batch.lines).enumerate() {
            if *missed > 0 {
                buf.extend_from_slice(gap_line(*missed).as_bytes());
                buf.push(b'\n');
            }
            if let (Some(keep), Some(task)) = (&keep, &line.agent_task) {
                if !keep[i] {
                    *elided.entry(task).or_default() += 1;
                    continue;
                }
                // A task's lines left out come before its first one kept.
                if let Some(n) = elided.remove(&**task) {
                    buf.extend_from_slice(elided_line(n, task).as_bytes());
                    buf.push(b'\n');
                }
            }
            buf.extend_from_slice(&line.text);
            buf.push(b'\n');
        }
        if let Some(missed) = batch.missed_before.get(batch.lines.len()) {
            buf.extend_from_slice(gap_line(*missed).as_bytes());
            buf.push(b'\n');
        }
        // Once the run is over, a client that took nothing for a whole
        // [`POLL`] is let go at once: the run's end never waits for it.
        let stalled = || done.load(Ordering::SeqCst);
        if write_waiting(out, &buf, stalled).is_err() {
            return;
        }
        cursor = batch.next;
        if batch.ended {
            return;
        }
        if batch.lines.len() < BATCH {
            // A thinned reader gathers longer: it is sent less.
            std::thread::sleep(if agent_lines.is_some() {
                THIN_GATHER
            } else {
                GATHER
            });
        }
    }
}

/// Writes all of `bytes` however slowly the client reads, until `give_up`.
fn write_waiting(
    out: &mut UnixStream,
    bytes: &[u8],
    mut give_up: impl FnMut() -> bool,
) -> std::io::Result<()> {
    let mut at = 0;
    while at < bytes.len() {
        match out.write(&bytes[at..]) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => at += n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) =>
            {
                if give_up() {
                    return Err(e);
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A line from the client, waiting [`POLL`] at a time: `Ok(0)` once the
/// run ended, the client closed, or it said nothing for [`IDLE`].
fn read_line_waiting(
    reader: &mut BufReader<UnixStream>,
    line: &mut String,
    done: &AtomicBool,
    quiet_since: &mut std::time::Instant,
) -> std::io::Result<usize> {
    loop {
        if done.load(Ordering::SeqCst) || quiet_since.elapsed() > IDLE {
            return Ok(0);
        }
        let mut bytes = Vec::new();
        match (&mut *reader)
            .take(proto::MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut bytes)
        {
            Ok(n) if n == 0 || bytes.ends_with(b"\n") || n > proto::MAX_LINE => {
                *quiet_since = std::time::Instant::now();
                line.push_str(&String::from_utf8_lossy(&bytes));
                return Ok(n);
            }
            // Part of a line, then the timeout: keep it, read on.
            Ok(_) => line.push_str(&String::from_utf8_lossy(&bytes)),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                line.push_str(&String::from_utf8_lossy(&bytes));
            }
            Err(e) => return Err(e),
        }
    }
}

/// Hands `request` to the run, or says why not.
fn act(request: &Request, by: &str, steering: &Steering) -> Reply {
    let steered = |control: Option<Control>| Control::Steered {
        by: by.to_owned(),
        what: request.words(),
        control: control.map(Box::new),
    };
    let control = match request {
        Request::Hello { .. } => return Reply::refused("bad_request", "hello was said"),
        // Taken by `serve` before it gets here.
        Request::Subscribe { .. } => return Reply::refused("bad_request", "already watching"),
        Request::Pause => Control::Pause,
        Request::Resume => Control::Resume,
        // Said here; done once the reply is out (`serve`): the run may be
        // gone a moment after.
        Request::Stop => {
            let _ = steering.controls.send(steered(None));
            return Reply::ok();
        }
        Request::Learn { text } => {
            if text.trim().is_empty() {
                return Reply::refused("bad_request", "a learning needs some text");
            }
            if let Err(e) = crate::ralph::learnings::append(&steering.learnings, None, text) {
                return Reply::refused(
                    "not_written",
                    format!("could not write {}: {e}", steering.learnings.display()),
                );
            }
            // Shown as who taught what; the next prompts carry it.
            let _ = steering.controls.send(steered(None));
            return Reply::ok();
        }
        Request::Answer { answer, task } => {
            let Some(open) = steering.question.get() else {
                return Reply::refused("no_question", "no question is open");
            };
            if let Some(task) = task
                && crate::model::TaskId::from(task.as_str()) != open
            {
                return Reply::refused(
                    "not_asked",
                    format!("the open question is about task {open}, not {task}"),
                );
            }
            // Answered: a second answer is refused at once, not only
            // once the run has taken this one.
            steering.question.set(None);
            Control::Answer {
                task: open,
                choice: match answer {
                    proto::Answer::Retry => ExhaustChoice::Retry,
                    proto::Answer::Skip => ExhaustChoice::Skip,
                    proto::Answer::Abort => ExhaustChoice::Abort,
                },
            }
        }
        Request::Restart { task } | Request::Skip { task } => {
            let running = steering.running.get();
            if task.is_none() && running.len() > 1 {
                let names: Vec<String> = running.iter().map(|t| t.to_string()).collect();
                return Reply::refused(
                    "which_task",
                    format!(
                        "several tasks are running ({}): name one with --task",
                        names.join(", ")
                    ),
                );
            }
            let task = task.as_deref().map(crate::model::TaskId::from);
            match request {
                Request::Skip { .. } => Control::Skip(task),
                _ => Control::Restart(task),
            }
        }
    };
    match steering.controls.send(steered(Some(control))) {
        Ok(()) => Reply::ok(),
        Err(_) => Reply::refused("ending", "the run is ending"),
    }
}

/// The peer's pid, if it may steer: the user's own process, and neither
/// an agent of this run nor started by one (its session is an agent's, or
/// this run is among its ancestors).
fn peer_allowed(stream: &UnixStream, agents: &ActiveAgents) -> Result<u32, String> {
    use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
    let cred =
        getsockopt(stream, PeerCredentials).map_err(|e| format!("no peer credentials: {e}"))?;
    if cred.uid() != nix::unistd::getuid().as_raw() {
        return Err("only the user running it may steer this run".into());
    }
    let pid = u32::try_from(cred.pid()).map_err(|_| "no peer process".to_string())?;
    let agent_sessions = agents.pids();
    let session = nix::unistd::getsid(Some(nix::unistd::Pid::from_raw(cred.pid())))
        .map(|s| s.as_raw())
        .ok()
        .and_then(|s| u32::try_from(s).ok());
    if session.is_some_and(|s| agent_sessions.contains(&s)) || descends_from_us(pid) {
        return Err("an agent of this run cannot steer it".into());
    }
    Ok(pid)
}

/// Whether this process is among `pid`'s ancestors.
fn descends_from_us(pid: u32) -> bool {
    let me = std::process::id();
    let mut at = pid;
    for _ in 0..64 {
        let Some(parent) = parent_of(at) else {
            return false;
        };
        if parent == me {
            return true;
        }
        if parent <= 1 {
            return false;
        }
        at = parent;
    }
    false
}

fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ralph::event::LoopEvent;
    use crossbeam_channel::unbounded;

    /// A run's steering for change `c`, and what it hands the loop.
    fn steering() -> (Steering, crossbeam_channel::Receiver<Control>) {
        let (tx, rx) = unbounded();
        let agents = ActiveAgents::default();
        let steering = Steering {
            change: "c".into(),
            learnings: std::env::temp_dir().join("spectr-steer-test-learnings.md"),
            controls: tx.clone(),
            interrupts: Interrupts::new(tx, agents.clone(), Box::new(|| {})),
            running: RunningTasks::default(),
            question: OpenQuestion::default(),
            agents,
            hub: crate::ralph::hub::Hub::new(),
        };
        (steering, rx)
    }

    fn socket() -> (
        tempfile::TempDir,
        ControlSocket,
        crossbeam_channel::Receiver<Control>,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let (steering, rx) = steering();
        let socket = ControlSocket::start(dir.path(), steering).unwrap();
        (dir, socket, rx)
    }

    fn say(out: &mut UnixStream, reader: &mut BufReader<UnixStream>, line: &str) -> String {
        out.write_all(format!("{line}\n").as_bytes()).unwrap();
        let mut answer = String::new();
        reader.read_line(&mut answer).unwrap();
        answer
    }

    #[test]
    fn a_client_says_hello_then_steers_and_its_name_is_cleaned() {
        let (dir, socket, controls) = socket();
        let path = dir.path().join(SOCKET);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let stream = UnixStream::connect(&path).unwrap();
        let mut out = stream.try_clone().unwrap();
        let mut reader = BufReader::new(stream);
        let early = say(&mut out, &mut reader, r#"{"op":"pause"}"#);
        assert!(early.contains("no_hello"), "{early}");
        let hello = say(
            &mut out,
            &mut reader,
            r#"{"op":"hello","proto":1,"client":"me\u001b[31m"}"#,
        );
        assert!(hello.contains(r#""change":"c""#), "{hello}");
        let again = say(
            &mut out,
            &mut reader,
            r#"{"op":"hello","proto":1,"client":"x"}"#,
        );
        assert!(again.contains("bad_request"), "{again}");
        assert_eq!(
            say(&mut out, &mut reader, r#"{"op":"pause"}"#).trim(),
            r#"{"ok":true}"#
        );
        match controls.recv().unwrap() {
            Control::Steered { by, what, control } => {
                // The escape sequence taken out whole.
                assert_eq!(by, format!("me (pid {})", std::process::id()));
                assert_eq!(what, "pause");
                assert_eq!(control, Some(Box::new(Control::Pause)));
            }
            other => panic!("{other:?}"),
        }
        let junk = say(&mut out, &mut reader, "not json");
        assert!(junk.contains("bad_request"), "{junk}");
        // A client still connected does not hold the run's end.
        drop(socket);
        assert!(!path.exists());
        let mut rest = String::new();
        assert_eq!(reader.read_line(&mut rest).unwrap_or(0), 0, "{rest}");
    }

    #[test]
    fn a_subscriber_that_stalls_holds_nothing_up_and_later_reads_an_exact_gap() {
        use crate::agent::AgentEvent;
        let dir = tempfile::tempdir().unwrap();
        let (steering, _rx) = steering();
        let hub = steering.hub.clone();
        let socket = ControlSocket::start(dir.path(), steering).unwrap();
        let start = LoopEvent::Notice {
            level: crate::ralph::event::NoticeLevel::Info,
            message: "first".into(),
        };
        hub.publish(&start);
        let (hello, mut reader) = client::subscribe(dir.path(), "test", 0, None).unwrap();
        assert_eq!(hello.instance, hub.instance.to_string());
        // The client reads nothing while the agent floods: the run's side
        // never waits (this loop would hang if it did).
        let lines = crate::ralph::hub::AGENT_LINES * 3;
        for n in 0..lines {
            hub.publish(&LoopEvent::AgentEvent {
                task: crate::model::TaskId::from("1.1"),
                attempt: 1,
                agent: AgentEvent::Text {
                    text: format!("{n} {}", "x".repeat(200)),
                },
            });
        }
        hub.publish(&LoopEvent::Paused);
        hub.end();
        let (mut missed, mut missed_in_all, mut last) = (0u64, 0u64, 0u64);
        let mut got_paused = false;
        let mut line = String::new();
        while reader.read_line(&mut line).unwrap() > 0 {
            let v: serde_json::Value = serde_json::from_str(line.trim_end()).unwrap();
            if v["event"] == "gap" {
                missed += v["missed"].as_u64().unwrap();
            } else {
                // Each line follows the last one read and the gap said since.
                let seq = v["seq"].as_u64().unwrap();
                missed_in_all += missed;
                assert_eq!(seq, last + 1 + std::mem::take(&mut missed), "{line}");
                last = seq;
                got_paused |= v["event"] == "paused";
            }
            line.clear();
        }
        assert!(got_paused, "the run's own events are never let go");
        assert_eq!(last, (lines + 2) as u64);
        assert!(missed_in_all > 0, "the stalled client fell behind");
        drop(socket);
    }

    #[test]
    fn a_socket_deeper_than_a_socket_address_allows_is_reached_through_its_folder() {
        let dir = tempfile::tempdir().unwrap();
        let deep = dir.path().join("a".repeat(60)).join("b".repeat(60));
        std::fs::create_dir_all(&deep).unwrap();
        assert!(deep.join(SOCKET).as_os_str().len() > MAX_PATH);
        let (steering, rx) = steering();
        let socket = ControlSocket::start(&deep, steering).unwrap();
        assert!(deep.join(SOCKET).exists());
        let hello = client::send(&deep, "test", &Request::Resume).unwrap();
        assert_eq!(hello.change, "c");
        assert!(matches!(rx.recv().unwrap(), Control::Steered { .. }));
        drop(socket);
        assert!(!deep.join(SOCKET).exists());
    }
}
