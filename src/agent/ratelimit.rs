//! Recognising "you hit a usage/rate limit" in an agent's error, so the loop
//! waits for the reset instead of burning retries, and reading when to try
//! again from what the agent says.
//!
//! Only ever applied to the error that *ended* a run (a failed result, a
//! fatal error line): an agent that hit a limit, retried and went on is not
//! rate limited.

use crate::agent::{FinalResult, RateLimit};
use std::time::{SystemTime, UNIX_EPOCH};

/// Phrases agents use when a limit, not the task, stopped them (lower case).
const LIMIT_PHRASES: [&str; 12] = [
    "usage limit",
    "rate limit",
    "rate_limit",
    "ratelimit",
    "limit reached",
    "too many requests",
    "exceeded your current quota",
    "quota exceeded",
    "check quota",
    "resource_exhausted",
    // Gemini's 429: "[API Error: Resource has been exhausted (e.g. check quota).]"
    "resource has been exhausted",
    "resource exhausted",
];

/// A rejected limit when `error_text` reads like one, with the reset time when
/// the text gives one (an epoch after `|`, or a delay such as "retry in 20s").
pub fn rate_limit_in_text(error_text: &str) -> Option<RateLimit> {
    let lower = error_text.to_ascii_lowercase();
    if !LIMIT_PHRASES.iter().any(|p| lower.contains(p)) {
        return None;
    }
    Some(rejected(resets_from_text(error_text)))
}

/// A rejected limit when a failed final result is an HTTP 429 or reads like
/// a limit (`Claude AI usage limit reached|1712345678`).
pub fn rate_limit_in_result(result: &FinalResult) -> Option<RateLimit> {
    if !result.is_error {
        return None;
    }
    if result.api_error_status == Some(429) {
        return Some(rejected(resets_from_text(&result.text)));
    }
    rate_limit_in_text(&result.text)
}

/// A rejected limit resetting at `resets_at`.
pub fn rejected(resets_at: Option<u64>) -> RateLimit {
    RateLimit {
        status: "rejected".to_string(),
        resets_at,
        kind: None,
    }
}

/// Two sightings of one limit: the later one wins, but a reset time is
/// never lost to a sighting that gives none.
pub fn merge(earlier: Option<RateLimit>, later: RateLimit) -> RateLimit {
    let resets_at = later
        .resets_at
        .or_else(|| earlier.as_ref().and_then(|e| e.resets_at));
    let kind = later.kind.clone().or_else(|| earlier.and_then(|e| e.kind));
    RateLimit {
        resets_at,
        kind,
        ..later
    }
}

/// Unix seconds `secs` from now.
pub fn epoch_in(secs: u64) -> u64 {
    now_epoch().saturating_add(secs)
}

fn now_epoch() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The reset the text names: an epoch after `|`, else now plus a delay.
fn resets_from_text(text: &str) -> Option<u64> {
    reset_epoch(text).or_else(|| retry_delay_secs(text).map(epoch_in))
}

/// Unix seconds written after a `|` (Claude's usage-limit message format).
fn reset_epoch(text: &str) -> Option<u64> {
    text.split('|').skip(1).find_map(|part| {
        let digits: String = part
            .trim_start()
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        // Ten digits: seconds between 2001 and 2286, not some other number.
        (digits.len() == 10).then(|| digits.parse().ok()).flatten()
    })
}

/// A delay the text asks for, in whole seconds (rounded up): "Please retry in
/// 23.5s", "try again in 20s", "retry after 2 minutes", `"retryDelay": "30s"`,
/// `retry-after: 7`. The longest one named wins.
pub fn retry_delay_secs(text: &str) -> Option<u64> {
    const CUES: [&str; 6] = [
        "retry in",
        "try again in",
        "retry after",
        "try again after",
        "retrydelay",
        "retry-after",
    ];
    let lower = text.to_ascii_lowercase();
    CUES.iter()
        .flat_map(|cue| lower.match_indices(cue).map(move |(i, _)| i + cue.len()))
        .filter_map(|at| delay_at(&lower[at..]))
        .max()
}

/// A number and unit at the start of `rest` (after up to a few quote, colon
/// or space characters).
fn delay_at(rest: &str) -> Option<u64> {
    let rest = rest.trim_start_matches(['"', ':', ' ', '=']);
    let number: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let value: f64 = number.parse().ok()?;
    let unit = rest[number.len()..].trim_start();
    // `m` alone or `min…` is minutes; `ms` / `millisecond…` are not.
    let is = |short: &str, long: &str| {
        unit.starts_with(long)
            || unit
                .strip_prefix(short)
                .is_some_and(|after| !after.starts_with(|c: char| c.is_ascii_alphabetic()))
    };
    let scale = if is("ms", "millisecond") {
        0.001
    } else if is("h", "hour") {
        3600.0
    } else if is("m", "min") {
        60.0
    } else {
        1.0
    };
    let secs = (value * scale).ceil();
    // A day at most: anything longer is not a retry delay we should trust.
    (0.0..=86_400.0).contains(&secs).then_some(secs as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_usage_limit_message_carries_the_reset() {
        let r = FinalResult {
            text: "Claude AI usage limit reached|1760000000".into(),
            is_error: true,
            ..FinalResult::default()
        };
        let limit = rate_limit_in_result(&r).unwrap();
        assert_eq!(limit.status, "rejected");
        assert_eq!(limit.resets_at, Some(1_760_000_000));
    }

    #[test]
    fn http_429_without_words_is_a_limit() {
        let r = FinalResult {
            text: "API Error".into(),
            is_error: true,
            api_error_status: Some(429),
            ..FinalResult::default()
        };
        assert_eq!(rate_limit_in_result(&r).unwrap().resets_at, None);
    }

    #[test]
    fn successes_and_other_errors_are_not_limits() {
        let ok = FinalResult {
            text: "fixed the rate limit bug".into(),
            is_error: false,
            ..FinalResult::default()
        };
        assert!(rate_limit_in_result(&ok).is_none());
        let other = FinalResult {
            text: "API Error: 500".into(),
            is_error: true,
            api_error_status: Some(500),
            ..FinalResult::default()
        };
        assert!(rate_limit_in_result(&other).is_none());
        assert!(rate_limit_in_text("compile error").is_none());
    }

    #[test]
    fn gemini_resource_exhausted_is_a_limit() {
        let text = "[API Error: Resource has been exhausted (e.g. check quota).]\n\
                    Please wait and try again later.";
        let limit = rate_limit_in_text(text).unwrap();
        assert_eq!(limit.status, "rejected");
        assert_eq!(limit.resets_at, None);
    }

    #[test]
    fn retry_delays_in_words() {
        assert_eq!(retry_delay_secs("Please retry in 23.5s."), Some(24));
        assert_eq!(
            retry_delay_secs("Rate limit reached. Please try again in 20s."),
            Some(20)
        );
        assert_eq!(retry_delay_secs(r#""retryDelay": "30s""#), Some(30));
        assert_eq!(retry_delay_secs("retry after 2 minutes"), Some(120));
        assert_eq!(retry_delay_secs("retry in 500ms"), Some(1));
        assert_eq!(retry_delay_secs("try again later"), None);
        assert_eq!(retry_delay_secs("no delay here"), None);
        let before = now_epoch();
        let limit = rate_limit_in_text("quota exceeded, retry in 60s").unwrap();
        let at = limit.resets_at.unwrap();
        assert!(at >= before + 60 && at <= now_epoch() + 60);
    }

    #[test]
    fn merging_keeps_a_known_reset() {
        let early = rejected(Some(1_700_000_000));
        assert_eq!(
            merge(Some(early.clone()), rejected(None)).resets_at,
            Some(1_700_000_000)
        );
        assert_eq!(
            merge(Some(early), rejected(Some(1_800_000_000))).resets_at,
            Some(1_800_000_000)
        );
        assert_eq!(merge(None, rejected(None)).resets_at, None);
    }
}
