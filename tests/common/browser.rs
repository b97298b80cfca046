//! A real browser for the live page's tests: Debian's Chromium, headless,
//! driven through the DevTools protocol over `--remote-debugging-pipe`
//! (JSON messages ending in NUL on fds 3 and 4): no driver, no WebSocket,
//! no crate that downloads anything.
#![allow(dead_code)]

use serde_json::{Value, json};
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The Chromium to drive, if installed.
pub fn chromium() -> Option<std::path::PathBuf> {
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|name| which::which(name).ok())
}

/// Whether `.ci/run` promised a browser (`SPECTR_REQUIRE_BROWSER`).
pub fn browser_required() -> bool {
    std::env::var("SPECTR_REQUIRE_BROWSER").is_ok_and(|v| !v.is_empty())
}

pub struct Browser {
    child: Child,
    to: std::fs::File,
    from: mpsc::Receiver<Value>,
    next: u64,
    session: Option<String>,
    /// Answers that came while another was awaited (a dialog handled
    /// inside a call).
    answers: std::collections::BTreeMap<u64, Value>,
    /// Events seen while waiting for answers (method, params).
    pub events: Vec<(String, Value)>,
    _profile: tempfile::TempDir,
}

fn pipe() -> (OwnedFd, OwnedFd) {
    nix::unistd::pipe().expect("pipe")
}

impl Browser {
    pub fn launch(program: &std::path::Path) -> Browser {
        let profile = tempfile::tempdir().unwrap();
        // Ours -> its fd 3; its fd 4 -> ours.
        let (cmd_read, cmd_write) = pipe();
        let (out_read, out_write) = pipe();
        let mut cmd = Command::new(program);
        cmd.args([
            "--headless=new",
            "--remote-debugging-pipe",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-gpu",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-dev-shm-usage",
            "--hide-scrollbars",
            "--mute-audio",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        if nix::unistd::geteuid().is_root() {
            // Its own sandbox needs a user it can drop to.
            cmd.arg("--no-sandbox");
        }
        cmd.arg("about:blank");
        let (r, w) = (cmd_read.as_raw_fd(), out_write.as_raw_fd());
        use std::os::unix::process::CommandExt;
        // SAFETY: only async-signal-safe calls (dup2) between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                if nix::libc::dup2(r, 3) < 0 || nix::libc::dup2(w, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("chromium starts");
        drop(cmd_read);
        drop(out_write);
        let to = std::fs::File::from(cmd_write);
        let mut reader = std::fs::File::from(out_read);
        let (tx, from) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 65536];
            loop {
                let n = match reader.read(&mut chunk) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                buf.extend_from_slice(&chunk[..n]);
                while let Some(end) = buf.iter().position(|&b| b == 0) {
                    let msg: Vec<u8> = buf.drain(..=end).collect();
                    if let Ok(v) = serde_json::from_slice(&msg[..msg.len() - 1])
                        && tx.send(v).is_err()
                    {
                        return;
                    }
                }
            }
        });
        Browser {
            child,
            to,
            from,
            next: 0,
            session: None,
            answers: std::collections::BTreeMap::new(),
            events: Vec::new(),
            _profile: profile,
        }
    }

    /// Sends a command (to the page once [`Browser::open`] attached) and
    /// waits for its result; events meanwhile are kept in `events`.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let mut msg = json!({ "id": id, "method": method, "params": params });
        if let Some(s) = &self.session {
            msg["sessionId"] = json!(s);
        }
        let mut bytes = serde_json::to_vec(&msg).unwrap();
        bytes.push(0);
        self.to.write_all(&bytes).expect("write to chromium");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(v) = self.answers.remove(&id) {
                assert!(v.get("error").is_none(), "{method}: {v}");
                return v["result"].clone();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let v = self
                .from
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("chromium did not answer {method}"));
            if let Some(answered) = v["id"].as_u64() {
                self.answers.insert(answered, v);
            } else if let Some(m) = v["method"].as_str() {
                self.on_event(m.to_owned(), v["params"].clone());
            }
        }
    }

    fn on_event(&mut self, method: String, params: Value) {
        // A confirm() the page asks is accepted (Stop asks one); an
        // alert() is only recorded (the page never calls one).
        if method == "Page.javascriptDialogOpening" && params["type"] == "confirm" {
            self.events.push((method, params));
            let _ = self.call("Page.handleJavaScriptDialog", json!({ "accept": true }));
            return;
        }
        self.events.push((method, params));
    }

    /// Opens `url` in a new tab sized as a phone (390 x 844) and attaches.
    pub fn open(&mut self, url: &str) {
        let target = self.call("Target.createTarget", json!({ "url": "about:blank" }));
        let attached = self.call(
            "Target.attachToTarget",
            json!({ "targetId": target["targetId"], "flatten": true }),
        );
        self.session = attached["sessionId"].as_str().map(str::to_owned);
        self.call("Page.enable", json!({}));
        self.call("Runtime.enable", json!({}));
        self.call(
            "Emulation.setDeviceMetricsOverride",
            json!({ "width": 390, "height": 844, "deviceScaleFactor": 2, "mobile": true }),
        );
        self.call("Page.navigate", json!({ "url": url }));
    }

    /// The value of a page expression (awaited when it is a promise).
    pub fn eval(&mut self, expression: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({ "expression": expression, "returnByValue": true, "awaitPromise": true }),
        );
        assert!(r.get("exceptionDetails").is_none(), "{expression}: {r}");
        r["result"]["value"].clone()
    }

    /// Waits (a hang guard, nothing timed) until `expression` is true (an
    /// exception counts as not yet: the page may still be loading).
    pub fn wait_for(&mut self, what: &str, expression: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let r = self.call(
                "Runtime.evaluate",
                json!({ "expression": expression, "returnByValue": true }),
            );
            if r.get("exceptionDetails").is_none() && r["result"]["value"] == json!(true) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}: {r}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// A real click at the middle of the element `selector` picks.
    pub fn click(&mut self, selector: &str) {
        let at = self.eval(&format!(
            "(() => {{ const e = document.querySelector({sel}); e.scrollIntoView({{block: 'center'}}); const r = e.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; }})()",
            sel = serde_json::to_string(selector).unwrap()
        ));
        let (x, y) = (at[0].as_f64().unwrap(), at[1].as_f64().unwrap());
        for kind in ["mousePressed", "mouseReleased"] {
            self.call(
                "Input.dispatchMouseEvent",
                json!({ "type": kind, "x": x, "y": y, "button": "left", "clickCount": 1 }),
            );
        }
    }

    /// A PNG of the page as it is.
    pub fn screenshot(&mut self) -> Vec<u8> {
        let shot = self.call("Page.captureScreenshot", json!({ "format": "png" }));
        base64_decode(shot["data"].as_str().unwrap())
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        _ => 63,
    };
    let clean: Vec<u8> = text
        .bytes()
        .filter(|&c| c != b'=' && !c.is_ascii_whitespace())
        .collect();
    let mut out = Vec::with_capacity(clean.len() * 3 / 4);
    for chunk in clean.chunks(4) {
        let v: Vec<u32> = chunk.iter().map(|&c| u32::from(value(c))).collect();
        let n = v
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, &x)| acc | (x << (18 - 6 * i)));
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..chunk.len().saturating_sub(1)]);
    }
    out
}
