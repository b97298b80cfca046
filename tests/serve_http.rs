//! The live page's server (`spectr ralph --serve`), over real HTTP on
//! loopback against a real run: the token, the Host and Origin checks, the
//! size and connection bounds, and the event stream's reconnection.

mod common;

use common::*;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Where a page is served: `127.0.0.1:port`, and its token.
struct Page {
    addr: String,
    token: String,
}

impl Page {
    fn from_url(url: &str) -> Page {
        let rest = url.trim().strip_prefix("http://").unwrap();
        let (addr, path) = rest.split_once('/').unwrap();
        Page {
            addr: addr.to_owned(),
            token: path.trim_end_matches('/').to_owned(),
        }
    }
}

/// A `--serve` run whose task 1.1 runs out of retries (the question waits:
/// `--serve` implies `--wait-for-answer`) while 2.1 waits for `go`.
struct Served {
    fx: Fixture,
    run: JsonRun,
    go: std::path::PathBuf,
    page: Page,
}

impl std::ops::Deref for Served {
    type Target = Page;
    fn deref(&self) -> &Page {
        &self.page
    }
}

fn served() -> Served {
    let fx = Fixture::new(&tasks_v1(&[
        ("1.1", "A", "pending"),
        ("2.1", "B", "pending"),
    ]));
    let (run, go) = question_with_a_busy_lane(&fx, &["--serve"]);
    let kept = fx.change_dir.join(".ralph/page-url");
    let url = std::fs::read_to_string(&kept).expect("the page's URL is kept");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&kept).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let page = Page::from_url(&url);
    assert!(page.addr.starts_with("127.0.0.1:"), "{url}");
    assert_eq!(page.token.len(), 64, "{url}");
    Served { fx, run, go, page }
}

/// One request; the status, the head and the body.
fn http(addr: &str, raw: &[u8]) -> (u16, String, Vec<u8>) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(raw).unwrap();
    let mut all = Vec::new();
    let _ = s.read_to_end(&mut all);
    let at = all
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or(all.len());
    let head = String::from_utf8_lossy(&all[..at]).into_owned();
    let body = all.get(at + 4..).unwrap_or_default().to_vec();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, head, body)
}

fn get(s: &Page, path: &str, extra: &str) -> (u16, String, Vec<u8>) {
    let raw = format!("GET {path} HTTP/1.1\r\nHost: {}\r\n{extra}\r\n", s.addr);
    http(&s.addr, raw.as_bytes())
}

fn post(s: &Page, path: &str, body: &str, extra: &str) -> (u16, String, Vec<u8>) {
    let raw = format!(
        "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra}\r\n{body}",
        s.addr,
        body.len()
    );
    http(&s.addr, raw.as_bytes())
}

#[test]
fn every_request_needs_the_token_and_foreign_hosts_and_origins_change_nothing() {
    let mut s = served();
    let t = s.token.clone();
    let (status, head, body) = get(&s, &format!("/{t}/"), "");
    assert_eq!(status, 200, "{head}");
    let head_l = head.to_ascii_lowercase();
    assert!(
        head_l.contains("content-security-policy: default-src 'none'; script-src 'nonce-"),
        "{head}"
    );
    assert!(!head_l.contains("access-control-allow"), "no CORS: {head}");
    assert!(String::from_utf8_lossy(&body).contains("<title>spectr ralph</title>"));

    for path in [
        "/".to_string(),
        format!("/{}/", "0".repeat(64)),
        format!("/{t}x/events"),
    ] {
        assert_eq!(get(&s, &path, "").0, 401, "{path}");
    }
    let pause = r#"{"op":"pause"}"#;
    assert_eq!(post(&s, "/nope/control", pause, "").0, 401);
    // DNS rebinding: another name for this address.
    let rebound = format!("GET /{t}/ HTTP/1.1\r\nHost: evil.example:80\r\n\r\n");
    assert_eq!(http(&s.addr, rebound.as_bytes()).0, 421);
    // A page elsewhere posting.
    let control = format!("/{t}/control");
    assert_eq!(
        post(&s, &control, pause, "Origin: http://evil.example\r\n").0,
        403
    );
    assert_eq!(
        post(&s, &control, pause, "Sec-Fetch-Site: cross-site\r\n").0,
        403
    );
    let form = format!(
        "POST {control} HTTP/1.1\r\nHost: {}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{pause}",
        s.addr,
        pause.len()
    );
    assert_eq!(http(&s.addr, form.as_bytes()).0, 415);
    // A 1 MiB request.
    let big = format!(
        "POST {control} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        s.addr,
        1 << 20
    );
    let mut raw = big.into_bytes();
    raw.extend(std::iter::repeat_n(b' ', 1 << 20));
    assert_eq!(http(&s.addr, &raw).0, 413);
    assert!(
        !s.run.seen.iter().any(|e| e["event"] == "paused")
            && !s.run.seen.iter().any(|e| e["message"]
                .as_str()
                .is_some_and(|m| m.contains("live page"))),
        "nothing refused reached the run"
    );

    // The page's own request: taken.
    let origin = format!(
        "Origin: http://{}\r\nSec-Fetch-Site: same-origin\r\n",
        s.addr
    );
    let skip = r#"{"op":"answer","answer":"skip","task":"1.1"}"#;
    let (status, _, body) = post(&s, &control, skip, &origin);
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    s.run.until("the answer taken", |seen| {
        seen.iter().any(|e| e["event"] == "answered")
    });
    let (status, _, body) = post(&s, &control, r#"{"op":"answer","answer":"skip"}"#, &origin);
    assert_eq!(status, 409, "no question open now");
    assert!(String::from_utf8_lossy(&body).contains("no question is open"));
    std::fs::write(&s.go, "").unwrap();
    assert_eq!(s.run.run.wait().code(), Some(1));
    assert_eq!(s.fx.status("2.1"), "completed");
}

/// Reads Server-Sent Events until `stop` says so: `(id, data)` each.
fn events(
    reader: &mut BufReader<TcpStream>,
    stop: impl Fn(&[(Option<String>, Value)]) -> bool,
) -> Vec<(Option<String>, Value)> {
    let mut got = Vec::new();
    let (mut id, mut data, mut event): (Option<String>, Option<String>, Option<String>) =
        (None, None, None);
    let mut line = String::new();
    while !stop(&got) {
        line.clear();
        assert!(
            reader.read_line(&mut line).unwrap() > 0,
            "the stream ended: {got:?}"
        );
        let l = line.trim_end_matches(['\r', '\n']);
        if l.is_empty() {
            if let Some(d) = data.take()
                && event.take().is_none()
            {
                got.push((id.take(), serde_json::from_str::<Value>(&d).unwrap()));
            }
            id = None;
            event = None;
        } else if let Some(v) = l.strip_prefix("id: ") {
            id = Some(v.to_owned());
        } else if let Some(v) = l.strip_prefix("data: ") {
            data = Some(v.to_owned());
        } else if let Some(v) = l.strip_prefix("event: ") {
            event = Some(v.to_owned());
        }
    }
    got
}

fn open_events(s: &Page, last: Option<&str>) -> BufReader<TcpStream> {
    let mut c = TcpStream::connect(&s.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let last = last.map_or(String::new(), |l| format!("Last-Event-ID: {l}\r\n"));
    write!(
        c,
        "GET /{}/events HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\n{last}\r\n",
        s.token, s.addr
    )
    .unwrap();
    let mut r = BufReader::new(c);
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    assert!(line.starts_with("HTTP/1.1 200"), "{line}");
    loop {
        line.clear();
        r.read_line(&mut line).unwrap();
        if line == "\r\n" {
            return r;
        }
    }
}

#[test]
fn the_event_stream_resumes_after_a_reconnect_without_a_gap_or_a_duplicate() {
    let mut s = served();
    let mut first = open_events(&s, None);
    let before = events(&mut first, |got| {
        got.iter().any(|(_, e)| e["event"] == "question")
    });
    assert_eq!(before[0].1["event"], "run_started", "from the run's start");
    let (last_id, last) = before
        .iter()
        .rev()
        .find_map(|(id, e)| id.clone().map(|id| (id, e["seq"].as_u64().unwrap())))
        .unwrap();
    drop(first);
    // While nobody watches, the run goes on.
    let origin = format!("Origin: http://{}\r\n", s.addr);
    let skip = r#"{"op":"answer","answer":"skip","task":"1.1"}"#;
    assert_eq!(
        post(&s, &format!("/{}/control", s.token), skip, &origin).0,
        200
    );
    std::fs::write(&s.go, "").unwrap();
    let mut again = open_events(&s, Some(&last_id));
    let after = events(&mut again, |got| {
        got.iter().any(|(_, e)| e["event"] == "summary")
    });
    let seqs: Vec<u64> = after
        .iter()
        .map(|(_, e)| e["seq"].as_u64().expect("no gap line"))
        .collect();
    let expected: Vec<u64> = (last + 1..=last + seqs.len() as u64).collect();
    assert_eq!(seqs, expected, "no gap, no duplicate");
    assert!(after.iter().any(|(_, e)| e["event"] == "answered"));
    assert_eq!(s.run.run.wait().code(), Some(1));
}

#[test]
fn two_hundred_idle_connections_do_not_keep_a_run_from_finishing() {
    let mut s = served();
    let idle: Vec<TcpStream> = (0..200)
        .map(|_| TcpStream::connect(&s.addr).unwrap())
        .collect();
    let origin = format!("Origin: http://{}\r\n", s.addr);
    let skip = r#"{"op":"answer","answer":"skip","task":"1.1"}"#;
    assert_eq!(
        post(&s, &format!("/{}/control", s.token), skip, &origin).0,
        200
    );
    std::fs::write(&s.go, "").unwrap();
    assert_eq!(
        s.run.run.wait().code(),
        Some(1),
        "the run ended with them open"
    );
    drop(idle);
}

#[test]
fn spectr_serve_lists_the_projects_listening_runs_and_streams_the_one_named() {
    let mut s = served();
    let mut serve = s.fx.spectr();
    serve
        .arg("serve")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let mut child = serve.spawn().unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let url = first
        .split_whitespace()
        .find(|w| w.starts_with("http://127.0.0.1:"))
        .unwrap_or_else(|| panic!("{first}"))
        .to_owned();
    let other = Page::from_url(&url);
    let (status, _, body) = get(&other, &format!("/{}/runs", other.token), "");
    assert_eq!(status, 200);
    let runs: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(runs, json!([{ "change": "add-widget" }]));
    let mut stream = open_events(&other, None);
    let got = events(&mut stream, |got| {
        got.iter().any(|(_, e)| e["event"] == "question")
    });
    assert_eq!(got[0].1["event"], "run_started");
    // The other server's token is not this one's.
    assert_eq!(get(&other, &format!("/{}/runs", s.token), "").0, 401);
    let _ = child.kill();
    let _ = child.wait();
    drop(stream);
    let origin = format!("Origin: http://{}\r\n", s.addr);
    let skip = r#"{"op":"answer","answer":"skip","task":"1.1"}"#;
    assert_eq!(
        post(&s, &format!("/{}/control", s.token), skip, &origin).0,
        200
    );
    std::fs::write(&s.go, "").unwrap();
    assert_eq!(s.run.run.wait().code(), Some(1));
}
