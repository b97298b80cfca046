//! A run's events as Server-Sent Events: the control socket's subscription
//! (see `ralph::steer`), each line an event whose id is `<instance>-<seq>`,
//! so a browser that reconnects with `Last-Event-ID` goes on where it was,
//! and one that reconnects to a newer run of the change starts it afresh
//! (`event: reset`). The page is told a gap, the run's end, and is pinged
//! while the run says nothing.

use super::http;
use crate::ralph::steer::client::{self, NotTaken};
use std::io::{BufRead, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

/// A comment line this often while the run is quiet, so proxies and
/// browsers keep the connection.
const PING: Duration = Duration::from_secs(15);
/// Each task's agent lines the page is sent per batch, at most: it shows a
/// task's last 200, and a flood of them is not worth the run's time.
const PAGE_LINES: usize = 50;
/// Frames gathered beyond this are written at once.
const FLUSH_AT: usize = 64 * 1024;
/// A page that reads nothing for this long is let go.
const STALLED: Duration = Duration::from_secs(30);

/// `<instance>-<seq>` as the browser sends it back.
pub fn parse_last_id(id: &str) -> Option<(&str, u64)> {
    let (instance, seq) = id.trim().rsplit_once('-')?;
    Some((instance, seq.parse().ok()?))
}

/// The `seq` the hub spliced in last into `line`.
fn seq_of(line: &[u8]) -> Option<u64> {
    let at = memchr::memmem::rfind(line, b"\"seq\":")?;
    let digits: Vec<u8> = line[at + 6..]
        .iter()
        .copied()
        .take_while(u8::is_ascii_digit)
        .collect();
    std::str::from_utf8(&digits).ok()?.parse().ok()
}

/// Streams the run whose state folder is `state_dir` to `out`.
pub fn stream(mut out: TcpStream, change: &str, state_dir: &Path, last_id: Option<&str>) {
    let last = last_id.and_then(parse_last_id);
    let from = last.map_or(0, |(_, seq)| seq);
    let subscribe = |from| client::subscribe(state_dir, "live page", from, Some(PAGE_LINES));
    let subscribed = subscribe(from).and_then(|(hello, reader)| {
        match last {
            // Another run of the change since: from its start.
            Some((instance, _)) if instance != hello.instance => {
                drop(reader);
                subscribe(0).map(|s| (s, true))
            }
            _ => Ok(((hello, reader), false)),
        }
    });
    let ((hello, mut reader), reset) = match subscribed {
        Ok(ok) => ok,
        Err(NotTaken::NoRun(_)) => {
            http::refuse(&mut out, 503, &format!("no run of {change} is listening"));
            return;
        }
        Err(NotTaken::Refused { message, .. } | NotTaken::Broken(message)) => {
            http::refuse(&mut out, 503, &message);
            return;
        }
    };
    let _ = out.set_write_timeout(Some(STALLED));
    if http::stream_head(&mut out, "text/event-stream; charset=utf-8").is_err() {
        return;
    }
    let hello_json = serde_json::json!({
        "change": hello.change,
        "pid": hello.pid,
        "instance": hello.instance,
    });
    let mut opening = String::from("retry: 2000\n\n");
    if reset {
        opening.push_str("event: reset\ndata: {}\n\n");
    }
    opening.push_str(&format!("event: hello\ndata: {hello_json}\n\n"));
    if out.write_all(opening.as_bytes()).is_err() {
        return;
    }
    let _ = reader.get_ref().set_read_timeout(Some(PING));
    let mut line = Vec::new();
    // Frames gather here while the subscription has more lines at hand,
    // and go out in one write when it has none (or a lot gathered).
    let mut frame = Vec::new();
    loop {
        if reader.buffer().is_empty() || frame.len() >= FLUSH_AT {
            if !frame.is_empty() && out.write_all(&frame).is_err() {
                return;
            }
            frame.clear();
        }
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => break,
            Ok(_) if line.ends_with(b"\n") => {}
            // Part of a line, then the end: nothing whole to send.
            Ok(_) => break,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                // Quiet: a ping (what was read of a line is kept).
                if out.write_all(b": ping\n\n").is_err() {
                    return;
                }
                continue;
            }
            Err(_) => break,
        }
        let text = line.trim_ascii_end();
        if let Some(seq) = seq_of(text) {
            frame.extend_from_slice(format!("id: {}-{seq}\n", hello.instance).as_bytes());
        }
        frame.extend_from_slice(b"data: ");
        frame.extend_from_slice(text);
        frame.extend_from_slice(b"\n\n");
        line.clear();
    }
    frame.extend_from_slice(b"event: end\ndata: {}\n\n");
    let _ = out.write_all(&frame);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_seqs_read_back() {
        assert_eq!(parse_last_id("abc-12"), Some(("abc", 12)));
        assert_eq!(parse_last_id("abc"), None);
        assert_eq!(parse_last_id("abc-x"), None);
        assert_eq!(seq_of(br#"{"event":"paused","ts":"t","seq":42}"#), Some(42));
        assert_eq!(seq_of(br#"{"event":"gap","missed":3}"#), None);
        // The hub's seq is the last one: an agent's text naming "seq" is not it.
        assert_eq!(
            seq_of(br#"{"event":"agent_event","agent":{"text":"\"seq\":9"},"seq":10}"#),
            Some(10)
        );
    }
}
