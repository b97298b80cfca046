//! Who may use the page: whoever holds the URL's random token (every
//! request, reads included), through a Host this server answers to (a
//! DNS-rebinding page elsewhere names its own), and for anything that
//! changes the run, only the page itself (its Origin, JSON, same-site).

use super::http::Request;

/// A random 256-bit token, as 64 hex digits.
pub fn new_token() -> Result<String, String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| format!("no randomness for the page's token: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Compares in time that does not depend on where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

pub struct Guard {
    token: String,
    /// The Host values accepted (`127.0.0.1:8080`, `localhost:8080`, …);
    /// empty: any (a server bound to a non-loopback address answers to
    /// whatever name reaches it; the token still guards it).
    hosts: Vec<String>,
}

/// A refusal: the status and why.
pub type Denied = (u16, &'static str);

impl Guard {
    pub fn new(token: String, addr: std::net::SocketAddr) -> Guard {
        let port = addr.port();
        let hosts = if addr.ip().is_loopback() {
            vec![
                format!("127.0.0.1:{port}"),
                format!("localhost:{port}"),
                format!("[::1]:{port}"),
                addr.to_string(),
            ]
        } else {
            Vec::new()
        };
        Guard { token, hosts }
    }

    pub fn token(&self) -> &str {
        &self.token
    }

    /// The path under the token (`/`, `/events`) when `req` may go on.
    pub fn check<'r>(&self, req: &'r Request) -> Result<&'r str, Denied> {
        let host = req.header("host").unwrap_or("");
        if !self.hosts.is_empty() && !self.hosts.iter().any(|h| h.eq_ignore_ascii_case(host)) {
            return Err((421, "this server does not answer to that Host"));
        }
        let rest = req.path.strip_prefix('/').unwrap_or("");
        let (token, under) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        if !same(token.as_bytes(), self.token.as_bytes()) {
            return Err((401, "the URL's token is missing or wrong"));
        }
        if req.method != "GET" && req.method != "HEAD" {
            // A page elsewhere can send a form or a simple request (no
            // preflight): it is told apart by its Origin and its fetch
            // metadata, and it cannot send JSON without a preflight,
            // which gets no CORS answer.
            if let Some(origin) = req.header("origin")
                && origin != format!("http://{host}")
            {
                return Err((403, "a request from another origin"));
            }
            if let Some(site) = req.header("sec-fetch-site")
                && site != "same-origin"
                && site != "none"
            {
                return Err((403, "a request from another site"));
            }
            let json = req.header("content-type").is_some_and(|t| {
                t.split(';')
                    .next()
                    .is_some_and(|m| m.trim() == "application/json")
            });
            if !json {
                return Err((415, "requests that change the run are JSON"));
            }
        }
        Ok(under)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(method: &str, path: &str, headers: &[(&str, &str)]) -> Request {
        Request {
            method: method.into(),
            path: path.into(),
            query: String::new(),
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
            body: Vec::new(),
        }
    }

    #[test]
    fn the_token_host_origin_and_type_are_checked() {
        let token = new_token().unwrap();
        assert_eq!(token.len(), 64);
        assert_ne!(token, new_token().unwrap());
        let g = Guard::new(token.clone(), "127.0.0.1:8080".parse().unwrap());
        let host = ("host", "127.0.0.1:8080");
        let page = format!("/{token}/");
        assert_eq!(g.check(&req("GET", &page, &[host])), Ok("/"));
        assert_eq!(g.check(&req("GET", &format!("/{token}"), &[host])), Ok("/"));
        let events = format!("/{token}/events");
        assert_eq!(g.check(&req("GET", &events, &[host])), Ok("/events"));
        assert_eq!(g.check(&req("GET", "/", &[host])).unwrap_err().0, 401);
        let wrong = format!("/{}x/", &token[..63]);
        assert_eq!(g.check(&req("GET", &wrong, &[host])).unwrap_err().0, 401);
        // DNS rebinding: the page is asked for under another name.
        let rebound = ("host", "evil.example:8080");
        assert_eq!(g.check(&req("GET", &page, &[rebound])).unwrap_err().0, 421);
        assert_eq!(g.check(&req("GET", &page, &[])).unwrap_err().0, 421);
        let control = format!("/{token}/control");
        let json = ("content-type", "application/json");
        let ours = ("origin", "http://127.0.0.1:8080");
        assert!(g.check(&req("POST", &control, &[host, json, ours])).is_ok());
        let theirs = ("origin", "http://evil.example");
        assert_eq!(
            g.check(&req("POST", &control, &[host, json, theirs]))
                .unwrap_err()
                .0,
            403
        );
        let cross = ("sec-fetch-site", "cross-site");
        assert_eq!(
            g.check(&req("POST", &control, &[host, json, cross]))
                .unwrap_err()
                .0,
            403
        );
        let form = ("content-type", "application/x-www-form-urlencoded");
        assert_eq!(
            g.check(&req("POST", &control, &[host, form, ours]))
                .unwrap_err()
                .0,
            415
        );
        // Bound elsewhere: any name, the token still needed.
        let g = Guard::new(token.clone(), "0.0.0.0:9".parse().unwrap());
        assert!(g.check(&req("GET", &page, &[rebound])).is_ok());
        assert_eq!(g.check(&req("GET", "/x/", &[rebound])).unwrap_err().0, 401);
    }
}
