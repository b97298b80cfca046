//! The live page: `spectr ralph --serve` and `spectr serve` answer HTTP on
//! 127.0.0.1 (or the address given) with one self-contained page that shows
//! a run live and steers it. Everything goes through the run's control
//! socket (`ralph::steer`), as `spectr watch` does: the page's events are
//! the socket's subscription ([`sse`]), its buttons the socket's requests.
//! So the server holds no state of the run's, and a server that is slow,
//! stalled or gone never holds the run up.
//!
//! Guarded ([`guard`]) by a random token in the URL, a Host check, and for
//! anything that changes the run its Origin; bounded everywhere ([`http`]).

pub mod guard;
pub mod http;
pub mod sse;

use crate::model::Project;
use crate::ralph::steer::client::{self, NotTaken};
use crate::ralph::steer::proto::Request;
use guard::Guard;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Connections served at once; more are answered 503 at once.
pub const MAX_CONNECTIONS: usize = 256;

const PAGE: &str = include_str!("page.html");

/// Which runs the server shows.
#[derive(Debug, Clone)]
pub enum Runs {
    /// `spectr ralph --serve`: this change's run.
    One { change: String, change_dir: PathBuf },
    /// `spectr serve`: whichever change of the project has a run listening.
    Project { root: PathBuf },
}

impl Runs {
    /// The changes whose runs listen now, sorted.
    fn listening(&self) -> Vec<(String, PathBuf)> {
        let all = match self {
            Runs::One { change, change_dir } => vec![(change.clone(), change_dir.clone())],
            Runs::Project { root } => Project::discover(root)
                .and_then(|p| p.active_changes())
                .map(|changes| changes.into_iter().map(|c| (c.id, c.dir)).collect())
                .unwrap_or_default(),
        };
        let mut found: Vec<(String, PathBuf)> = all
            .into_iter()
            .filter(|(_, dir)| crate::ralph::steer::listens_in(dir))
            .collect();
        found.sort();
        found
    }

    /// The state folder of the change named (or the only one).
    fn state_dir(&self, change: Option<&str>) -> Result<(String, PathBuf), (u16, String)> {
        let dir_of = |id: &str, dir: &PathBuf| (id.to_owned(), crate::ralph::paths::state_dir(dir));
        match (self, change) {
            (Runs::One { change, change_dir }, None) => Ok(dir_of(change, change_dir)),
            (Runs::One { change, change_dir }, Some(asked)) if asked == change => {
                Ok(dir_of(change, change_dir))
            }
            (Runs::One { .. }, Some(asked)) => {
                Err((404, format!("this page serves no run of {asked}")))
            }
            (Runs::Project { root }, asked) => {
                let changes = Project::discover(root)
                    .and_then(|p| p.active_changes())
                    .map_err(|e| (502, e.to_string()))?;
                let listening = self.listening();
                let id = match asked {
                    Some(id) => id.to_owned(),
                    None => match listening.as_slice() {
                        [(only, _)] => only.clone(),
                        _ => return Err((404, "name the change: ?change=<id>".into())),
                    },
                };
                changes
                    .iter()
                    .find(|c| c.id == id)
                    .map(|c| dir_of(&c.id, &c.dir))
                    .ok_or((404, format!("no active change {id}")))
            }
        }
    }
}

/// A server answering on its own thread until the process ends.
pub struct Server {
    /// The page's address, token included: what the person opens.
    pub url: String,
    pub addr: SocketAddr,
}

impl Server {
    /// Binds `addr` (`127.0.0.1:0`: a free port) and serves `runs`.
    pub fn start(addr: &str, runs: Runs) -> Result<Server, String> {
        let listener =
            TcpListener::bind(addr).map_err(|e| format!("cannot listen on {addr}: {e}"))?;
        let bound = listener.local_addr().map_err(|e| e.to_string())?;
        let guard = Arc::new(Guard::new(guard::new_token()?, bound));
        let host = if bound.ip().is_unspecified() {
            format!("127.0.0.1:{}", bound.port())
        } else {
            bound.to_string()
        };
        let url = format!("http://{host}/{}/", guard.token());
        let runs = Arc::new(runs);
        std::thread::Builder::new()
            .name("spectr-serve".into())
            .spawn(move || accept(&listener, &guard, &runs))
            .map_err(|e| e.to_string())?;
        Ok(Server { url, addr: bound })
    }
}

fn accept(listener: &TcpListener, guard: &Arc<Guard>, runs: &Arc<Runs>) {
    let live = Arc::new(AtomicUsize::new(0));
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else {
            continue;
        };
        if live.load(Ordering::SeqCst) >= MAX_CONNECTIONS {
            let _ = stream.set_write_timeout(Some(std::time::Duration::from_secs(1)));
            http::refuse(&mut stream, 503, "too many connections");
            continue;
        }
        live.fetch_add(1, Ordering::SeqCst);
        let (guard, runs, mine) = (guard.clone(), runs.clone(), live.clone());
        let spawned = std::thread::Builder::new()
            .name("spectr-serve-conn".into())
            .spawn(move || {
                serve(stream, &guard, &runs);
                mine.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            // Not served: counted back (the stream went with the closure).
            live.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

fn serve(mut stream: TcpStream, guard: &Guard, runs: &Runs) {
    let _ = stream.set_write_timeout(Some(std::time::Duration::from_secs(10)));
    let request = match http::read_request(&mut stream) {
        Ok(r) => r,
        Err(http::Refused(Some((status, why)))) => return http::refuse(&mut stream, status, why),
        Err(http::Refused(None)) => return,
    };
    let under = match guard.check(&request) {
        Ok(under) => under.to_owned(),
        Err((status, why)) => return http::refuse(&mut stream, status, why),
    };
    let change = request.param("change");
    match (request.method.as_str(), under.as_str()) {
        ("GET" | "HEAD", "/") => page(&mut stream),
        ("GET", "/runs") => {
            let list: Vec<serde_json::Value> = runs
                .listening()
                .into_iter()
                .map(|(id, _)| serde_json::json!({ "change": id }))
                .collect();
            let body = serde_json::to_vec(&list).unwrap_or_default();
            let _ = http::respond(
                &mut stream,
                200,
                &[("Content-Type", "application/json")],
                &body,
            );
        }
        ("GET", "/events") => match runs.state_dir(change) {
            Ok((id, state_dir)) => {
                let last = request
                    .header("last-event-id")
                    .map(str::to_owned)
                    .or_else(|| request.param("last").map(str::to_owned));
                sse::stream(stream, &id, &state_dir, last.as_deref());
            }
            Err((status, why)) => http::refuse(&mut stream, status, &why),
        },
        ("POST", "/control") => control(&mut stream, runs, change, &request.body),
        (_, "/" | "/runs" | "/events" | "/control") => {
            http::refuse(&mut stream, 405, "method not allowed")
        }
        _ => http::refuse(&mut stream, 404, "not found"),
    }
}

/// The page, with a fresh nonce for its own script and style.
fn page(stream: &mut TcpStream) {
    let nonce = match guard::new_token() {
        Ok(t) => t[..32].to_owned(),
        Err(why) => return http::refuse(stream, 503, &why),
    };
    let csp = format!(
        "default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    );
    let body = PAGE.replace("{{NONCE}}", &nonce);
    let _ = http::respond(
        stream,
        200,
        &[
            ("Content-Type", "text/html; charset=utf-8"),
            ("Content-Security-Policy", &csp),
        ],
        body.as_bytes(),
    );
}

/// A button of the page: one request of the control socket's protocol.
fn control(stream: &mut TcpStream, runs: &Runs, change: Option<&str>, body: &[u8]) {
    let request = match serde_json::from_slice::<Request>(body) {
        Ok(Request::Hello { .. } | Request::Subscribe { .. }) | Err(_) => {
            return http::refuse(stream, 400, "not a control request");
        }
        Ok(r) => r,
    };
    let (id, state_dir) = match runs.state_dir(change) {
        Ok(found) => found,
        Err((status, why)) => return http::refuse(stream, status, &why),
    };
    let (status, reply) = match client::send(&state_dir, "live page", &request) {
        Ok(_) => (200, serde_json::json!({ "ok": true })),
        Err(NotTaken::Refused { error, message }) => (
            409,
            serde_json::json!({ "ok": false, "error": error, "message": message }),
        ),
        Err(NotTaken::NoRun(why)) => (
            503,
            serde_json::json!({ "ok": false, "error": "no_run", "message": format!("no run of {id} is listening ({why})") }),
        ),
        Err(NotTaken::Broken(why)) => (
            502,
            serde_json::json!({ "ok": false, "error": "broken", "message": why }),
        ),
    };
    let body = serde_json::to_vec(&reply).unwrap_or_default();
    let _ = http::respond(
        stream,
        status,
        &[("Content-Type", "application/json")],
        &body,
    );
}
