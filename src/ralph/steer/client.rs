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
    agent_lines: Option<usize>,
) -> Result<(Hello, BufReader<UnixStream>), NotTaken> {
    let request = Request::Subscribe { from, agent_lines };
    let (hello, reader) = connect(state_dir, client, &request)?;
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
    // A run that refuses the connection at once (not allowed, busy) says
    // why and closes it, maybe before this is written: its answer is read
    // all the same.
    let written = out.write_all(line.as_bytes());
    let mut answer = String::new();
    let read = reader.take(MAX_LINE as u64 + 1).read_line(&mut answer);
    match (written, read) {
        (_, Ok(n)) if n > 0 => {
            serde_json::from_str(answer.trim_end()).map_err(|e| NotTaken::Broken(e.to_string()))
        }
        (Err(e), _) | (Ok(()), Err(e)) => Err(broken(e)),
        (Ok(()), Ok(_)) => Err(NotTaken::Broken("the run closed the connection".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_sent_before_the_request_could_be_written_is_still_read() {
        let (ours, theirs) = UnixStream::pair().unwrap();
        // The run refuses at once and reads nothing more: writing to it
        // fails (a broken pipe), its answer waits to be read.
        let mut run = theirs;
        run.write_all(b"{\"ok\":false,\"error\":\"not_allowed\",\"message\":\"no\"}\n")
            .unwrap();
        run.shutdown(std::net::Shutdown::Read).unwrap();
        let mut out = ours.try_clone().unwrap();
        let mut reader = BufReader::new(ours);
        let hello = Request::Hello {
            proto: PROTO,
            client: "t".into(),
        };
        assert!(out.write_all(b"x\n").is_err(), "the write itself fails");
        match exchange(&mut out, &mut reader, &hello) {
            Ok(Reply::Done { error, .. }) => assert_eq!(error.as_deref(), Some("not_allowed")),
            other => panic!("{other:?}"),
        }
    }
}
