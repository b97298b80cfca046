//! Recognising "you hit a usage/rate limit" in an agent's error, so the loop
//! waits for the reset instead of burning retries.

use crate::agent::{FinalResult, RateLimit};

/// Phrases agents use when a limit, not the task, stopped them. Only applied
/// to error text (never to ordinary output, where the words may be about code).
const LIMIT_PHRASES: [&str; 8] = [
    "usage limit",
    "rate limit",
    "rate_limit",
    "limit reached",
    "too many requests",
    "exceeded your current quota",
    "quota exceeded",
    "resource_exhausted",
];

/// A rejected limit when `error_text` reads like one.
pub fn rate_limit_in_text(error_text: &str) -> Option<RateLimit> {
    let lower = error_text.to_ascii_lowercase();
    if !LIMIT_PHRASES.iter().any(|p| lower.contains(p)) {
        return None;
    }
    Some(RateLimit {
        status: "rejected".to_string(),
        resets_at: reset_epoch(error_text),
        kind: None,
    })
}

/// A rejected limit when Claude's final result is an API 429 or a usage-limit
/// message (`Claude AI usage limit reached|1712345678`).
pub fn rate_limit_in_result(result: &FinalResult) -> Option<RateLimit> {
    if !result.is_error {
        return None;
    }
    if result.api_error_status == Some(429) {
        return Some(RateLimit {
            status: "rejected".to_string(),
            resets_at: reset_epoch(&result.text),
            kind: None,
        });
    }
    rate_limit_in_text(&result.text)
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
}
