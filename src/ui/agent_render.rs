//! Human rendering of agent events: one readable line per event (assistant
//! text: one line per line of text, never truncated), and a one-line receipt
//! per attempt.
//!
//! Every function takes `color`: the caller decides (a colour terminal
//! without NO_COLOR). Agent text goes through [`crate::ui::ansi`], so the
//! agent's colours pass only when `color` is on and its cursor movement never
//! reaches the terminal.

use crate::agent::parse::{SUMMARY_MAX_CHARS, one_line};
use crate::agent::{
    AgentEvent, AgentExit, CompletionSignal, Ending, FinalResult, RateLimit, Receipt, TokenUsage,
};
use crate::ui::ansi::sanitize;
use std::fmt::Write as _;
use std::time::{Duration, UNIX_EPOCH};

const DIM: &str = "2";
const BOLD: &str = "1";
const RED: &str = "31";
const GREEN: &str = "32";
const YELLOW: &str = "33";
const CYAN: &str = "36";

/// The lines for one event (none for events with nothing to show, such as
/// usage updates).
pub fn render_event(event: &AgentEvent, color: bool) -> Vec<String> {
    let mut out = String::new();
    write_event(&mut out, event, color);
    out.lines().map(str::to_string).collect()
}

/// Appends the lines for one event to `out`, each ending with `\n`.
pub fn write_event(out: &mut String, event: &AgentEvent, color: bool) {
    match event {
        AgentEvent::Init { session_id, model } => {
            let parts: Vec<String> = [
                session_id
                    .as_deref()
                    .map(|s| format!("session {}", one_line(&sanitize(s, false), 60))),
                model.as_deref().map(|m| one_line(&sanitize(m, false), 60)),
            ]
            .into_iter()
            .flatten()
            .collect();
            if !parts.is_empty() {
                line(out, |o| {
                    paint(o, DIM, &format!("· {}", parts.join(" · ")), color)
                });
            }
        }
        AgentEvent::Text { text } => write_text(out, "", text, color),
        AgentEvent::Thinking { text } => {
            let first = text
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .unwrap_or_default();
            let first = one_line(&sanitize(first, false), SUMMARY_MAX_CHARS);
            line(out, |o| paint(o, DIM, &format!("∴ {first}"), color));
        }
        AgentEvent::ToolUse { name, summary } => {
            let name = one_line(&sanitize(name, false), 40);
            let summary = one_line(&sanitize(summary, false), SUMMARY_MAX_CHARS);
            line(out, |o| {
                paint(o, CYAN, "→ ", color);
                paint(o, BOLD, &name, color);
                if !summary.is_empty() {
                    o.push_str("  ");
                    o.push_str(&summary);
                }
            });
        }
        AgentEvent::ToolResult { is_error, summary } => {
            let summary = one_line(&sanitize(summary, false), SUMMARY_MAX_CHARS);
            if *is_error {
                let text = if summary.is_empty() {
                    "failed".to_string()
                } else {
                    summary
                };
                line(out, |o| {
                    o.push_str("  ");
                    paint(o, RED, &format!("✗ {text}"), color);
                });
            } else {
                let text = if summary.is_empty() {
                    "ok".to_string()
                } else {
                    summary
                };
                line(out, |o| {
                    o.push_str("  ");
                    paint(o, DIM, &format!("✓ {text}"), color);
                });
            }
        }
        AgentEvent::Usage { .. } => {}
        AgentEvent::Permission {
            tool,
            allowed,
            reason,
            ..
        } => {
            let tool = one_line(&sanitize(tool, false), 60);
            if *allowed {
                line(out, |o| {
                    paint(o, DIM, &format!("  ⚑ allowed: {tool}"), color)
                });
            } else {
                let why = reason
                    .as_deref()
                    .map(|r| format!(" ({})", one_line(&sanitize(r, false), SUMMARY_MAX_CHARS)))
                    .unwrap_or_default();
                line(out, |o| {
                    paint(o, YELLOW, &format!("  ⚑ refused: {tool}{why}"), color)
                });
            }
        }
        AgentEvent::RateLimit { limit } => {
            if let Some(text) = rate_limit_text(limit) {
                line(out, |o| paint(o, YELLOW, &format!("⏸ {text}"), color));
            }
        }
        AgentEvent::ApiRetry {
            attempt,
            max_retries,
            delay_ms,
            message,
        } => {
            let mut text = String::from("↻ API retry");
            match (attempt, max_retries) {
                (Some(a), Some(m)) => {
                    let _ = write!(text, " {a}/{m}");
                }
                (Some(a), None) => {
                    let _ = write!(text, " {a}");
                }
                _ => {}
            }
            if let Some(ms) = delay_ms {
                let _ = write!(text, " in {}", format_duration(Duration::from_millis(*ms)));
            }
            if let Some(why) = message.as_deref().filter(|m| !m.trim().is_empty()) {
                let why = one_line(&sanitize(why, false), SUMMARY_MAX_CHARS);
                let _ = write!(text, " · {why}");
            }
            line(out, |o| paint(o, YELLOW, &text, color));
        }
        AgentEvent::Result { result } => write_result(out, result, color),
        AgentEvent::Raw { line: raw } => {
            let trimmed = raw.trim_start();
            if trimmed.starts_with('{') {
                // A JSON line we did not understand: a hint of it, no more.
                let hint = one_line(&sanitize(trimmed, false), SUMMARY_MAX_CHARS);
                line(out, |o| paint(o, DIM, &format!("· {hint}"), color));
            } else {
                let text = sanitize(raw, color);
                line(out, |o| o.push_str(&text));
            }
        }
        AgentEvent::Stderr { line: err } => {
            let text = sanitize(err, false);
            line(out, |o| paint(o, DIM, &format!("stderr: {text}"), color));
        }
    }
}

/// Each line of assistant text as its own output line, after `prefix`;
/// outer blank lines dropped, inner ones kept as paragraph breaks. The hot
/// path of a chatty agent: the human reporter passes its task tag here
/// instead of prefixing the rendered lines in a second pass.
pub fn write_text(out: &mut String, prefix: &str, text: &str, color: bool) {
    let text = text.trim_matches(|c| c == '\n' || c == '\r');
    for l in text.split('\n') {
        let l = sanitize(l, color);
        out.push_str(prefix);
        if !l.trim().is_empty() {
            out.push_str("  ");
            out.push_str(&l);
        }
        out.push('\n');
    }
}

fn write_result(out: &mut String, result: &FinalResult, color: bool) {
    let mut parts = Vec::new();
    if let Some(turns) = result.turns {
        parts.push(format!("{turns} turn{}", if turns == 1 { "" } else { "s" }));
    }
    if let Some(usage) = &result.usage {
        parts.push(format!(
            "{} in / {} out",
            format_tokens(usage.input),
            format_tokens(usage.output)
        ));
    }
    parts.push(format_cost(result.cost_usd));
    if let Some(ms) = result.duration_ms {
        parts.push(format_duration(Duration::from_millis(ms)));
    }
    let details = parts.join(" · ");
    line(out, |o| {
        if result.is_error {
            let kind = result
                .subtype
                .as_deref()
                .filter(|s| *s != "success")
                .unwrap_or("error");
            paint(o, RED, &format!("✗ result ({kind})"), color);
        } else {
            paint(o, GREEN, "✓ result", color);
        }
        o.push_str("  ");
        o.push_str(&details);
    });
    if result.is_error {
        let first = result
            .text
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or_default();
        if !first.is_empty() {
            let first = one_line(&sanitize(first, false), SUMMARY_MAX_CHARS);
            line(out, |o| {
                o.push_str("  ");
                paint(o, RED, &first, color);
            });
        }
    }
}

fn rate_limit_text(limit: &RateLimit) -> Option<String> {
    let what = match limit.status.as_str() {
        "allowed" => return None,
        "rejected" => "rate limit reached",
        "allowed_warning" => "nearing the rate limit",
        _ => "rate limit",
    };
    let mut text = what.to_string();
    if let Some(kind) = &limit.kind {
        let _ = write!(text, " ({})", one_line(&sanitize(kind, false), 30));
    }
    if let Some(at) = limit.resets_at {
        let _ = write!(text, " · resets {}", format_epoch(at));
    }
    Some(text)
}

/// One line summing up an attempt:
/// `receipt  41s · claude-x · 4 turns · 12.3k in / 2.1k out · 30.0k cached · $0.084 · exit 0 · COMPLETE`
/// (`turns not reported` when the agent does not show its round trips; tokens as
/// [`TokenUsage`] defines them, the same for every agent).
pub fn render_receipt(receipt: &Receipt, color: bool) -> String {
    render_receipt_decided(receipt, None, color)
}

/// [`render_receipt`], ending with what decided the attempt when that was
/// not the agent's own signal (`--verify` failing after the agent said
/// COMPLETE, a merge conflict): `verify failed: … (the agent said COMPLETE)`.
pub fn render_receipt_decided(receipt: &Receipt, decided: Option<&str>, color: bool) -> String {
    let parts = receipt_facts(receipt);
    let claim = claim(receipt);
    let verdict = match decided {
        Some(why) if receipt.signal.is_some() => {
            format!(
                "{} (the agent said {claim})",
                one_line(why, SUMMARY_MAX_CHARS)
            )
        }
        Some(why) => one_line(why, SUMMARY_MAX_CHARS),
        None => claim,
    };
    let mut out = String::new();
    paint(&mut out, DIM, "receipt", color);
    out.push_str("  ");
    out.push_str(&parts.join(" · "));
    out.push_str(" · ");
    let verdict_color = match (&receipt.signal, decided) {
        (_, Some(_)) => RED,
        (Some(CompletionSignal::Complete), None) => GREEN,
        (Some(CompletionSignal::Failed(_)), None) => RED,
        (None, None) => YELLOW,
    };
    paint(&mut out, verdict_color, &verdict, color);
    out
}

/// The one line that ends an attempt on screen, after its mark and tag:
/// `completed · 41s · claude-x · 4 turns · 12.3k in / 2.1k out · 30.0k cached · $0.084 · the agent said COMPLETE`.
/// `head` says what happened, the receipt's facts follow (a clean `exit 0`
/// left out), and `decided` (what decided the outcome, cut to one short
/// line) ends it, green when `ok`, then what the agent said when that was
/// overruled (`agent_said`). Without an agent run (`Receipt::none()`) only
/// `head` and `decided`. `ending_told`: `decided` already says how the
/// agent ended (a stop spectr asked for), so the receipt's `stopped: …`
/// is left out rather than said twice.
pub fn render_verdict(
    head: &str,
    receipt: &Receipt,
    decided: &str,
    agent_said: bool,
    ok: bool,
    ending_told: bool,
    color: bool,
) -> String {
    let mut out = String::new();
    paint(&mut out, BOLD, head, color);
    if *receipt != Receipt::none() {
        let told = (ending_told && matches!(receipt.ending, Ending::Stopped { .. }))
            .then(|| format_ending(&receipt.ending));
        for fact in receipt_facts(receipt) {
            if fact == "exit 0" || told.as_ref() == Some(&fact) {
                continue;
            }
            out.push_str(" · ");
            out.push_str(&fact);
        }
    }
    out.push_str(" · ");
    let mut decided = one_line(decided, SUMMARY_MAX_CHARS);
    if agent_said && receipt.signal.is_some() {
        let _ = write!(decided, " (the agent said {})", claim(receipt));
    }
    paint(&mut out, if ok { GREEN } else { RED }, &decided, color);
    out
}

/// What the agent said of its attempt: `COMPLETE`, `FAILED: …`, or that it
/// said nothing.
pub fn claim(receipt: &Receipt) -> String {
    match &receipt.signal {
        Some(CompletionSignal::Complete) => "COMPLETE".to_string(),
        Some(CompletionSignal::Failed(reason)) if reason.is_empty() => "FAILED".to_string(),
        Some(CompletionSignal::Failed(reason)) => {
            format!("FAILED: {}", one_line(reason, SUMMARY_MAX_CHARS))
        }
        None => "no completion signal".to_string(),
    }
}

/// A receipt's facts: time, model, turns, tokens, cost, how the agent
/// ended, a rate limit.
fn receipt_facts(receipt: &Receipt) -> Vec<String> {
    let mut parts = vec![format_duration(Duration::from_millis(receipt.duration_ms))];
    if let Some(model) = receipt.model.as_deref().filter(|m| !m.trim().is_empty()) {
        parts.push(one_line(&sanitize(model, false), 40));
    }
    match receipt.turns {
        Some(turns) => parts.push(format!("{turns} turn{}", if turns == 1 { "" } else { "s" })),
        None => parts.push("turns not reported".to_string()),
    }
    match &receipt.tokens {
        Some(t) => parts.push(format_usage(t)),
        None => parts.push("tokens not reported".to_string()),
    }
    parts.push(format_cost(receipt.cost_usd));
    parts.push(format_ending(&receipt.ending));
    if let Some(limit) = &receipt.rate_limited {
        parts.push(match limit.resets_at {
            Some(at) => format!("rate limited until {}", format_epoch(at)),
            None => "rate limited".to_string(),
        });
    }
    if let Some(p) = &receipt.permissions {
        parts.push(format!(
            "{} of {} permission{} refused",
            p.refused,
            p.asked,
            if p.asked == 1 { "" } else { "s" }
        ));
    }
    parts
}

/// For an attempt that ended without the agent's own result (it exited at
/// once, crashed or could not start): why, in the agent's own words — the
/// last lines of its stderr. Empty when there is nothing to add.
pub fn render_failure_cause(exit: &AgentExit, color: bool) -> Vec<String> {
    if exit.result.is_some() || matches!(exit.ending, Ending::Stopped { .. }) {
        return Vec::new();
    }
    let lines: Vec<&str> = exit
        .stderr_tail
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect();
    let shown = &lines[lines.len().saturating_sub(10)..];
    shown
        .iter()
        .map(|l| {
            let mut out = String::from("  ");
            paint(&mut out, RED, &format!("│ {}", sanitize(l, false)), color);
            out
        })
        .collect()
}

fn format_usage(t: &TokenUsage) -> String {
    let mut s = format!(
        "{} in / {} out",
        format_tokens(t.input),
        format_tokens(t.output)
    );
    let cached = t.cache_read + t.cache_creation;
    if cached > 0 {
        let _ = write!(s, " · {} cached", format_tokens(cached));
    }
    s
}

/// How an attempt's process ended, in words.
pub fn format_ending(ending: &Ending) -> String {
    match ending {
        Ending::Exited { code } => format!("exit {code}"),
        Ending::Signaled { signal } => match nix::sys::signal::Signal::try_from(*signal) {
            Ok(s) => format!("killed by {}", s.as_str()),
            Err(_) => format!("killed by signal {signal}"),
        },
        Ending::AttemptTimeout => "attempt timed out".to_string(),
        Ending::IdleTimeout => "idle timeout (no output)".to_string(),
        Ending::Stopped { reason } => format!("stopped: {}", one_line(reason, SUMMARY_MAX_CHARS)),
        Ending::SpawnFailed { error } => {
            format!("could not start: {}", one_line(error, SUMMARY_MAX_CHARS))
        }
    }
}

/// `950`, `12.3k`, `1.2M`.
pub fn format_tokens(n: u64) -> String {
    match n {
        0..=999 => n.to_string(),
        1_000..=999_949 => format!("{:.1}k", n as f64 / 1_000.0),
        _ => format!("{:.1}M", n as f64 / 1_000_000.0),
    }
}

/// `$0.084`, `$12.35`, or `cost not reported` for agents that report none.
pub fn format_cost(cost: Option<f64>) -> String {
    match cost {
        Some(c) if c < 10.0 => format!("${c:.3}"),
        Some(c) => format!("${c:.2}"),
        None => "cost not reported".to_string(),
    }
}

/// `4.2s`, `41s`, `2m 05s`, `1h 02m`.
pub fn format_duration(d: Duration) -> String {
    let secs = d.as_secs();
    if secs < 10 {
        format!("{:.1}s", d.as_secs_f64())
    } else if secs < 60 {
        format!("{secs}s")
    } else if secs < 3600 {
        format!("{}m {:02}s", secs / 60, secs % 60)
    } else {
        format!("{}h {:02}m", secs / 3600, (secs % 3600) / 60)
    }
}

/// An agent's reset time (seconds since the epoch) as RFC 3339. The number
/// comes from the agent: one past year 9999 (where RFC 3339 ends, and
/// `SystemTime` may overflow) is shown as it is instead of panicking.
pub fn format_epoch(secs: u64) -> String {
    const YEAR_10000: u64 = 253_402_300_800;
    match UNIX_EPOCH.checked_add(Duration::from_secs(secs)) {
        Some(at) if secs < YEAR_10000 => humantime::format_rfc3339_seconds(at).to_string(),
        _ => format!("{secs} (seconds since 1970)"),
    }
}

/// One output line: two spaces of indent, the body, a newline.
fn line(out: &mut String, body: impl FnOnce(&mut String)) {
    out.push_str("  ");
    body(out);
    out.push('\n');
}

fn paint(out: &mut String, code: &str, text: &str, color: bool) {
    if color {
        let _ = write!(out, "\x1b[{code}m{text}\x1b[0m");
    } else {
        out.push_str(text);
    }
}

#[cfg(test)]
mod epoch_tests {
    #[test]
    fn any_reset_time_renders() {
        assert_eq!(super::format_epoch(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(
            super::format_epoch(u64::MAX),
            "18446744073709551615 (seconds since 1970)"
        );
        assert!(super::format_epoch(253_402_300_800).contains("seconds since"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(e: &AgentEvent) -> Vec<String> {
        render_event(e, false)
    }

    #[test]
    fn tool_use_and_results() {
        assert_eq!(
            plain(&AgentEvent::ToolUse {
                name: "Bash".into(),
                summary: "cargo test".into()
            }),
            ["  → Bash  cargo test"]
        );
        let long = AgentEvent::ToolUse {
            name: "Bash".into(),
            summary: "x".repeat(300),
        };
        let l = &plain(&long)[0];
        assert!(l.ends_with('…'));
        assert!(l.chars().count() < 120);
        assert_eq!(
            plain(&AgentEvent::ToolResult {
                is_error: true,
                summary: "boom".into()
            }),
            ["    ✗ boom"]
        );
        assert_eq!(
            plain(&AgentEvent::ToolResult {
                is_error: false,
                summary: String::new()
            }),
            ["    ✓ ok"]
        );
    }

    #[test]
    fn result_line() {
        let r = FinalResult {
            text: "done".into(),
            turns: Some(4),
            usage: Some(TokenUsage {
                input: 12_300,
                output: 2_100,
                cache_read: 0,
                cache_creation: 0,
            }),
            cost_usd: Some(0.084),
            duration_ms: Some(41_000),
            ..FinalResult::default()
        };
        assert_eq!(
            plain(&AgentEvent::Result { result: r }),
            ["  ✓ result  4 turns · 12.3k in / 2.1k out · $0.084 · 41s"]
        );
        let e = FinalResult {
            text: "Reached max turns\nmore".into(),
            is_error: true,
            subtype: Some("error_max_turns".into()),
            ..FinalResult::default()
        };
        assert_eq!(
            plain(&AgentEvent::Result { result: e }),
            [
                "  ✗ result (error_max_turns)  cost not reported",
                "    Reached max turns"
            ]
        );
    }

    #[test]
    fn assistant_text_is_one_line_per_line_and_never_cut() {
        let long = "y".repeat(5000);
        let text = format!("\nfirst\n\n{long}\n\x1b[2Klast\n");
        assert_eq!(
            plain(&AgentEvent::Text { text }),
            vec![
                "  first".to_string(),
                String::new(),
                format!("  {long}"),
                "  last".into()
            ]
        );
    }

    #[test]
    fn colour_only_when_asked() {
        let e = AgentEvent::Raw {
            line: "\x1b[31mred\x1b[0m\x1b[1A".into(),
        };
        assert_eq!(render_event(&e, false), ["  red"]);
        assert_eq!(render_event(&e, true), ["  \x1b[31mred\x1b[0m\x1b[0m"]);
        let t = AgentEvent::ToolUse {
            name: "Bash".into(),
            summary: "ls".into(),
        };
        assert!(render_event(&t, true)[0].contains("\x1b["));
        assert!(!render_event(&t, false)[0].contains('\x1b'));
    }

    #[test]
    fn quiet_and_notice_events() {
        assert!(
            plain(&AgentEvent::Usage {
                usage: TokenUsage::default()
            })
            .is_empty()
        );
        let allowed = RateLimit {
            status: "allowed".into(),
            resets_at: None,
            kind: None,
        };
        assert!(plain(&AgentEvent::RateLimit { limit: allowed }).is_empty());
        let rejected = RateLimit {
            status: "rejected".into(),
            resets_at: Some(1_700_000_000),
            kind: Some("five_hour".into()),
        };
        assert_eq!(
            plain(&AgentEvent::RateLimit { limit: rejected }),
            ["  ⏸ rate limit reached (five_hour) · resets 2023-11-14T22:13:20Z"]
        );
        assert_eq!(
            plain(&AgentEvent::ApiRetry {
                attempt: Some(2),
                max_retries: Some(10),
                delay_ms: Some(1500),
                message: None,
            }),
            ["  ↻ API retry 2/10 in 1.5s"]
        );
        assert_eq!(
            plain(&AgentEvent::ApiRetry {
                attempt: Some(1),
                max_retries: Some(3),
                delay_ms: None,
                message: Some("Reconnecting... 1/3 (429 Too Many Requests)".into()),
            }),
            ["  ↻ API retry 1/3 · Reconnecting... 1/3 (429 Too Many Requests)"]
        );
        assert_eq!(
            plain(&AgentEvent::Raw {
                line: r#"{"type":"x"}"#.into()
            }),
            [r#"  · {"type":"x"}"#]
        );
        assert_eq!(
            plain(&AgentEvent::Stderr {
                line: "warn".into()
            }),
            ["  stderr: warn"]
        );
        assert_eq!(
            plain(&AgentEvent::Init {
                session_id: Some("abc".into()),
                model: Some("m".into())
            }),
            ["  · session abc · m"]
        );
    }

    #[test]
    fn receipts() {
        let r = Receipt {
            duration_ms: 41_000,
            turns: Some(4),
            tokens: Some(TokenUsage {
                input: 12_300,
                output: 2_100,
                cache_read: 30_000,
                cache_creation: 0,
            }),
            cost_usd: Some(0.084),
            ending: Ending::Exited { code: 0 },
            signal: Some(CompletionSignal::Complete),
            is_error: Some(false),
            rate_limited: None,
            session_id: None,
            model: Some("claude-x".into()),
            summary: None,
            permissions: None,
        };
        assert_eq!(
            render_receipt(&r, false),
            "receipt  41s · claude-x · 4 turns · 12.3k in / 2.1k out · 30.0k cached · $0.084 · exit 0 · COMPLETE"
        );
        // What decided the attempt, when the agent's signal did not.
        assert_eq!(
            render_receipt_decided(&r, Some("verify failed: 2 tests red"), false),
            "receipt  41s · claude-x · 4 turns · 12.3k in / 2.1k out · 30.0k cached · $0.084 · exit 0 · verify failed: 2 tests red (the agent said COMPLETE)"
        );
        // The verdict line: the receipt's facts without a clean `exit 0`,
        // then what decided it, then what the agent said when overruled.
        assert_eq!(
            render_verdict(
                "completed",
                &r,
                "the agent said COMPLETE",
                false,
                true,
                false,
                false
            ),
            "completed · 41s · claude-x · 4 turns · 12.3k in / 2.1k out · 30.0k cached · $0.084 · the agent said COMPLETE"
        );
        assert_eq!(
            render_verdict(
                "attempt 2",
                &r,
                "verify failed: 2 tests red",
                true,
                false,
                false,
                false
            ),
            "attempt 2 · 41s · claude-x · 4 turns · 12.3k in / 2.1k out · 30.0k cached · $0.084 · verify failed: 2 tests red (the agent said COMPLETE)"
        );
        assert_eq!(
            render_verdict(
                "attempt 1",
                &Receipt::none(),
                "git error: locked",
                true,
                false,
                false,
                false
            ),
            "attempt 1 · git error: locked"
        );
        let r = Receipt {
            duration_ms: 125_000,
            turns: None,
            tokens: None,
            cost_usd: None,
            ending: Ending::Signaled { signal: 9 },
            signal: None,
            is_error: None,
            rate_limited: Some(RateLimit {
                status: "rejected".into(),
                resets_at: Some(0),
                kind: None,
            }),
            session_id: None,
            model: None,
            summary: None,
            permissions: None,
        };
        assert_eq!(
            render_receipt(&r, false),
            "receipt  2m 05s · turns not reported · tokens not reported · cost not reported · killed by SIGKILL · rate limited until \
             1970-01-01T00:00:00Z · no completion signal"
        );
    }

    #[test]
    fn failure_cause_shows_the_stderr_tail() {
        let exit = AgentExit {
            ending: Ending::Exited { code: 1 },
            duration: Duration::from_millis(300),
            result: None,
            final_answer: None,
            signal: None,
            rate_limited: None,
            stderr_tail: "warming up\n\nError: cannot be used with root/sudo privileges".into(),
            session_id: None,
            model: None,
        };
        assert_eq!(
            render_failure_cause(&exit, false),
            [
                "  │ warming up",
                "  │ Error: cannot be used with root/sudo privileges"
            ]
        );
        let stopped = AgentExit {
            ending: Ending::Stopped { reason: "q".into() },
            ..exit.clone()
        };
        assert!(render_failure_cause(&stopped, false).is_empty());
    }

    #[test]
    fn number_formats() {
        assert_eq!(format_tokens(950), "950");
        assert_eq!(format_tokens(12_345), "12.3k");
        assert_eq!(format_tokens(999_999), "1.0M");
        assert_eq!(format_tokens(1_234_567), "1.2M");
        assert_eq!(format_cost(Some(12.345)), "$12.35");
        assert_eq!(format_duration(Duration::from_millis(4_200)), "4.2s");
        assert_eq!(format_duration(Duration::from_secs(3_720)), "1h 02m");
        assert_eq!(
            format_ending(&Ending::Stopped {
                reason: "user".into()
            }),
            "stopped: user"
        );
    }
}
