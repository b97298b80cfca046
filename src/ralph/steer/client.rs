//! The steering commands' side of the control socket: connect to a change's
//! run, say hello, send one request, read the answer.

use super::proto::{Hello, MAX_LINE, PROTO, Reply, Request};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// How long the run has to answer.
const WAIT: Duration = Duration::from_secs(10);

/// Why a request was not taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotTaken {
    /// No run of the change is listening (none runs, or an older spectr).
    NoRun(String),
    /// The run refused: its code and words.
    Refused { error: String, message: String },
    /// The connection failed midway.
    Broken(String),
}

/// Sends `request` to the run of the change whose state folder is
/// `state_dir`, as `client` (`spectr ralph pause`); the run's hello when it
/// was taken.
pub fn send(state_dir: &Path, client: &str, request: &Request) -> Result<Hello, NotTaken> {
    connect(state_dir, client, request).map(|(hello, _)| hello)
}

/// The run's events after `from` (see [`Request::Subscribe`]): its hello,
/// and a reader of its lines, which ends after the run's last event.
pub fn subscribe(
    state_dir: &Path,
    client: &str,
    from: u64,
) -> Result<(Hello, BufReader<UnixStream>), NotTaken> {
    let (hello, reader) = connect(state_dir, client, &Request::Subscribe { from })?;
    // The run may say nothing for long: no deadline on reading.
    reader
        .get_ref()
        .set_read_timeout(None)
        .map_err(|e| NotTaken::Broken(e.to_string()))?;
    Ok((hello, reader))
}

fn connect(
    state_dir: &Path,
    client: &str,
    request: &Request,
) -> Result<(Hello, BufReader<UnixStream>), NotTaken> {
    let path = state_dir.join(super::SOCKET);
    let stream = super::within_reach(&path, |p| UnixStream::connect(p))
        .map_err(|e| NotTaken::NoRun(e.to_string()))?;
    let broken = |e: std::io::Error| NotTaken::Broken(e.to_string());
    stream.set_read_timeout(Some(WAIT)).map_err(broken)?;
    stream.set_write_timeout(Some(WAIT)).map_err(broken)?;
    let mut out = stream.try_clone().map_err(broken)?;
    let mut reader = BufReader::new(stream);
    let hello = Request::Hello {
        proto: PROTO,
        client: client.to_owned(),
    };
    let hello = match exchange(&mut out, &mut reader, &hello)? {
        Reply::Hello { hello } => hello,
        Reply::Done { error, message, .. } => return Err(refused(error, message)),
    };
    match exchange(&mut out, &mut reader, request)? {
        Reply::Done { ok: true, .. } => Ok((hello, reader)),
        Reply::Done { error, message, .. } => Err(refused(error, message)),
        Reply::Hello { .. } => Err(NotTaken::Broken("a second hello".into())),
    }
}

fn refused(error: Option<String>, message: Option<String>) -> NotTaken {
    NotTaken::Refused {
        error: error.unwrap_or_default(),
        message: message.unwrap_or_else(|| "refused".into()),
    }
}

fn exchange(
    out: &mut UnixStream,
    reader: &mut BufReader<UnixStream>,
    request: &Request,
) -> Result<Reply, NotTaken> {
    let broken = |e: std::io::Error| NotTaken::Broken(e.to_string());
    let mut line = serde_json::to_string(request).map_err(|e| NotTaken::Broken(e.to_string()))?;
    line.push('\n');
    out.write_all(line.as_bytes()).map_err(broken)?;
    let mut answer = String::new();
    let n = reader
        .take(MAX_LINE as u64 + 1)
        .read_line(&mut answer)
        .map_err(broken)?;
    if n == 0 {
        return Err(NotTaken::Broken("the run closed the connection".into()));
    }
    serde_json::from_str(answer.trim_end()).map_err(|e| NotTaken::Broken(e.to_string()))
}
