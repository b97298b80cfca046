//! Just enough HTTP/1.1 for the live page, on `std::net`: one request per
//! connection (`Connection: close`), headers parsed by `httparse`, every
//! size and wait bounded, the same security headers on every response.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// A request's head, at most (bytes).
pub const MAX_HEAD: usize = 16 * 1024;
/// A request's body, at most (bytes): a control request is a line.
pub const MAX_BODY: usize = 16 * 1024;
/// How long a client has to send its whole request.
pub const REQUEST_TIME: Duration = Duration::from_secs(5);
const MAX_HEADERS: usize = 48;

#[derive(Debug)]
pub struct Request {
    pub method: String,
    /// The path without the query, percent-encoding kept.
    pub path: String,
    pub query: String,
    /// Names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// A query parameter's value (no percent-decoding: ids and numbers).
    pub fn param(&self, name: &str) -> Option<&str> {
        self.query
            .split('&')
            .filter_map(|kv| kv.split_once('='))
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v)
    }
}

/// Why no request was read; `Some(status)` when the client is told.
#[derive(Debug)]
pub struct Refused(pub Option<(u16, &'static str)>);

/// Reads one request within [`REQUEST_TIME`].
pub fn read_request(stream: &mut TcpStream) -> Result<Request, Refused> {
    let deadline = Instant::now() + REQUEST_TIME;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    let (head_len, mut request) = loop {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut parsed = httparse::Request::new(&mut headers);
        match parsed.parse(&buf) {
            Ok(httparse::Status::Complete(n)) => {
                let request = Request {
                    method: parsed.method.unwrap_or("").to_owned(),
                    path: String::new(),
                    query: String::new(),
                    headers: parsed
                        .headers
                        .iter()
                        .map(|h| {
                            (
                                h.name.to_ascii_lowercase(),
                                String::from_utf8_lossy(h.value).into_owned(),
                            )
                        })
                        .collect(),
                    body: Vec::new(),
                };
                let target = parsed.path.unwrap_or("/");
                let (path, query) = target.split_once('?').unwrap_or((target, ""));
                break (
                    n,
                    Request {
                        path: path.to_owned(),
                        query: query.to_owned(),
                        ..request
                    },
                );
            }
            Ok(httparse::Status::Partial) => {}
            Err(httparse::Error::TooManyHeaders) => {
                return Err(Refused(Some((431, "too many headers"))));
            }
            Err(_) => return Err(Refused(Some((400, "not an HTTP request")))),
        }
        if buf.len() >= MAX_HEAD {
            return Err(Refused(Some((431, "request head too large"))));
        }
        let n = read_some(stream, &mut chunk, deadline)?;
        buf.extend_from_slice(&chunk[..n]);
    };
    if request.header("transfer-encoding").is_some() {
        return Err(Refused(Some((411, "a Content-Length is needed"))));
    }
    let length = match request.header("content-length") {
        None => 0,
        Some(v) => v
            .trim()
            .parse::<usize>()
            .map_err(|_| Refused(Some((400, "bad Content-Length"))))?,
    };
    if length > MAX_BODY {
        return Err(Refused(Some((413, "request body too large"))));
    }
    let mut body = buf.split_off(head_len);
    while body.len() < length {
        let n = read_some(stream, &mut chunk, deadline)?;
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(length);
    request.body = body;
    Ok(request)
}

fn read_some(
    stream: &mut TcpStream,
    chunk: &mut [u8],
    deadline: Instant,
) -> Result<usize, Refused> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(Refused(Some((408, "request too slow"))));
    }
    let _ = stream.set_read_timeout(Some(left));
    match stream.read(chunk) {
        Ok(0) => Err(Refused(None)),
        Ok(n) => Ok(n),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            Err(Refused(Some((408, "request too slow"))))
        }
        Err(_) => Err(Refused(None)),
    }
}

/// The headers every response carries: nothing cached, sniffed, framed or
/// referred, and no CORS header ever (a page elsewhere reads nothing).
const SECURITY: &[(&str, &str)] = &[
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "no-referrer"),
    ("Cache-Control", "no-store"),
    ("Cross-Origin-Resource-Policy", "same-origin"),
    ("Cross-Origin-Opener-Policy", "same-origin"),
];

pub fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        411 => "Length Required",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        421 => "Misdirected Request",
        431 => "Request Header Fields Too Large",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Error",
    }
}

/// Writes a whole response and ends the connection's use.
pub fn respond(
    stream: &mut TcpStream,
    status: u16,
    headers: &[(&str, &str)],
    body: &[u8],
) -> std::io::Result<()> {
    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
    for (name, value) in SECURITY.iter().chain(headers) {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    ));
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    stream.flush()
}

/// A refusal as plain text.
pub fn refuse(stream: &mut TcpStream, status: u16, why: &str) {
    let _ = respond(
        stream,
        status,
        &[("Content-Type", "text/plain; charset=utf-8")],
        format!("{why}\n").as_bytes(),
    );
}

/// The head of a response whose body follows unbounded (Server-Sent
/// Events), written at once.
pub fn stream_head(stream: &mut TcpStream, content_type: &str) -> std::io::Result<()> {
    let mut head = String::from("HTTP/1.1 200 OK\r\n");
    for (name, value) in SECURITY {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!(
        "Content-Type: {content_type}\r\nX-Accel-Buffering: no\r\nConnection: close\r\n\r\n"
    ));
    stream.write_all(head.as_bytes())?;
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// Sends `raw` to a fresh server side and reads it back as a request.
    fn parse(raw: Vec<u8>) -> Result<Request, Refused> {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let client = std::thread::spawn(move || {
            let mut c = TcpStream::connect(addr).unwrap();
            let _ = c.write_all(&raw);
            std::thread::sleep(Duration::from_millis(200));
        });
        let (mut s, _) = listener.accept().unwrap();
        let r = read_request(&mut s);
        client.join().unwrap();
        r
    }

    #[test]
    fn a_request_is_read_with_its_query_headers_and_body() {
        let r = parse(
            b"POST /tok/control?change=add-widget HTTP/1.1\r\nHost: 127.0.0.1:1\r\nContent-Length: 14\r\n\r\n{\"op\":\"pause\"}"
                .to_vec(),
        )
        .unwrap();
        assert_eq!(
            (r.method.as_str(), r.path.as_str()),
            ("POST", "/tok/control")
        );
        assert_eq!(r.param("change"), Some("add-widget"));
        assert_eq!(r.header("host"), Some("127.0.0.1:1"));
        assert_eq!(r.body, br#"{"op":"pause"}"#);
    }

    #[test]
    fn sizes_are_bounded() {
        let big = format!(
            "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
            1 << 20
        );
        assert!(matches!(
            parse(big.into_bytes()),
            Err(Refused(Some((413, _))))
        ));
        let long = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(MAX_HEAD));
        assert!(matches!(
            parse(long.into_bytes()),
            Err(Refused(Some((431, _))))
        ));
        let chunked = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        assert!(matches!(parse(chunked), Err(Refused(Some((411, _))))));
        assert!(matches!(
            parse(b"\x00\x01garbage\r\n\r\n".to_vec()),
            Err(Refused(Some((400, _))))
        ));
    }
}
