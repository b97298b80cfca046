//! The values spectr's options take, shared by the command line and
//! spectr.yaml: their bounds, and the plain words an error uses for them.

use std::time::Duration;

/// The longest any wait may be: 7 days.
pub const MAX_WAIT: Duration = Duration::from_secs(7 * 24 * 3600);
pub const MAX_RETRIES: u32 = 1000;
pub const MAX_TURNS: u32 = 10_000;
pub const MAX_BUDGET_USD: f64 = 1_000_000.0;
pub const MAX_JOBS: usize = 64;

/// How a duration is written, for errors.
pub const DURATION_WORDS: &str = "a duration such as 90s, 30m or 1h";

/// `90s`, `30m`, `1h`, `1h30m`. A bare number is refused: `10` could mean
/// seconds or minutes, and a wrong guess is a run cut short or one left
/// hanging for hours.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("`{t}` needs a unit: {t}s, {t}m or {t}h"));
    }
    humantime::parse_duration(t).map_err(|_| {
        format!("`{t}` is not a duration: write a number and a unit, such as 90s, 30m or 1h")
    })
}

/// What `ralph.<key>` in spectr.yaml takes, in plain words; `None` for a
/// key whose type alone says it.
pub fn ralph_expects(key: &str) -> Option<String> {
    let secs = MAX_WAIT.as_secs();
    Some(match key {
        "max_retries" | "max_conflicts" => format!("a whole number from 0 to {MAX_RETRIES}"),
        "jobs" => format!("a whole number from 0 to {MAX_JOBS}"),
        "max_turns" => format!("a whole number from 1 to {MAX_TURNS}"),
        "max_budget_usd" | "budget_usd" => "a USD amount above 0, such as 2.50".to_string(),
        "budget_tokens" => "a whole number of tokens above 0, such as 500000".to_string(),
        "command_timeout" => format!("a whole number of seconds from 1 to {secs}"),
        "task_timeout" | "idle_timeout" | "lane_setup_timeout" => DURATION_WORDS.to_string(),
        _ => return None,
    })
}
