//! The control socket's line protocol: UTF-8 JSON, one object a line, the
//! client's `hello` first. Shared by the run ([`super::ControlSocket`]) and
//! the commands that steer it ([`super::client`]).

use serde::{Deserialize, Serialize};

/// The protocol's version, in both hellos.
pub const PROTO: u32 = 1;
/// The longest line either side reads.
pub const MAX_LINE: usize = 64 * 1024;

/// What a client asks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    Hello {
        proto: u32,
        client: String,
    },
    Pause,
    Resume,
    Stop,
    /// Restart a task's attempt (`task`: which, when several run).
    Restart {
        task: Option<String>,
    },
    /// Skip a task and its dependents.
    Skip {
        task: Option<String>,
    },
    /// From now on the connection streams the run's events, each its
    /// `--json` line with `seq`, after `from` (0: from the start), with a
    /// `gap` line for lines let go before they were read; it ends after
    /// the run's last event.
    Subscribe {
        #[serde(default)]
        from: u64,
        /// At most this many of each task's agent lines per batch (the
        /// last ones; a batch is what gathered in ~0.1 s), the others
        /// said as `gap` lines naming the task: for a page that shows a
        /// task's last lines. None: every line.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent_lines: Option<usize>,
    },
    /// A learning every later task of the change is told (as `spectr
    /// learn` writes it).
    Learn {
        text: String,
    },
    /// Answer the open retry / skip / abort question (`task`: which task it
    /// must be about).
    Answer {
        answer: Answer,
        task: Option<String>,
    },
}

/// An answer to a task out of retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    Retry,
    Skip,
    Abort,
}

impl Answer {
    pub fn word(self) -> &'static str {
        match self {
            Answer::Retry => "retry",
            Answer::Skip => "skip",
            Answer::Abort => "abort",
        }
    }
}

impl Request {
    /// The request as the run's notice names it (`pause`, `skip 1.2`).
    pub fn words(&self) -> String {
        match self {
            Request::Hello { .. } => "hello".into(),
            Request::Pause => "pause".into(),
            Request::Resume => "resume".into(),
            Request::Stop => "stop".into(),
            Request::Restart { task } => with_task("restart", task.as_deref()),
            Request::Skip { task } => with_task("skip", task.as_deref()),
            Request::Subscribe { .. } => "watch".into(),
            Request::Learn { text } => format!("learn: {}", crate::text::clean(text)),
            Request::Answer { answer, task } => {
                with_task(&format!("answer {}", answer.word()), task.as_deref())
            }
        }
    }
}

fn with_task(verb: &str, task: Option<&str>) -> String {
    match task {
        Some(t) => format!("{verb} {t}"),
        None => verb.to_owned(),
    }
}

/// The run's hello.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    pub proto: u32,
    pub change: String,
    pub pid: u32,
    /// This run, apart from earlier ones of the change (a watcher that
    /// reconnects to another instance starts again from 0).
    #[serde(default)]
    pub instance: String,
}

/// The run's answer to a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Reply {
    Hello {
        hello: Hello,
    },
    Done {
        ok: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
}

impl Reply {
    pub fn ok() -> Reply {
        Reply::Done {
            ok: true,
            error: None,
            message: None,
        }
    }

    /// A refusal: a code for programs, words for people.
    pub fn refused(error: &str, message: impl Into<String>) -> Reply {
        Reply::Done {
            ok: false,
            error: Some(error.to_owned()),
            message: Some(message.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_replies_read_back_as_written() {
        let requests = [
            r#"{"op":"hello","proto":1,"client":"spectr ralph pause"}"#,
            r#"{"op":"pause"}"#,
            r#"{"op":"skip","task":"1.2"}"#,
            r#"{"op":"restart","task":null}"#,
            r#"{"op":"answer","answer":"skip","task":"1.2"}"#,
            r#"{"op":"subscribe","from":7}"#,
            r#"{"op":"subscribe","from":7,"agent_lines":50}"#,
            r#"{"op":"learn","text":"run make first"}"#,
        ];
        for line in requests {
            let r: Request = serde_json::from_str(line).unwrap();
            let again: Request = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
            assert_eq!(r, again, "{line}");
        }
        assert_eq!(
            serde_json::to_string(&Reply::ok()).unwrap(),
            r#"{"ok":true}"#
        );
        let refused = Reply::refused("busy", "several tasks run");
        let line = serde_json::to_string(&refused).unwrap();
        assert_eq!(
            line,
            r#"{"ok":false,"error":"busy","message":"several tasks run"}"#
        );
        assert_eq!(serde_json::from_str::<Reply>(&line).unwrap(), refused);
        let hello = Reply::Hello {
            hello: Hello {
                proto: 1,
                change: "c".into(),
                pid: 7,
                instance: "i".into(),
            },
        };
        let line = serde_json::to_string(&hello).unwrap();
        assert_eq!(serde_json::from_str::<Reply>(&line).unwrap(), hello);
        assert!(serde_json::from_str::<Request>(r#"{"op":"format_disk"}"#).is_err());
    }
}
