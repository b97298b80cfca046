//! Agent output and file text made safe to print ([`crate::text`]), and cut
//! to the terminal's width.

pub use crate::text::{clean, clean_block, sanitize};

use std::borrow::Cow;

/// `text` cut with `…` to the terminal's width less `used` columns (at least
/// 20 are kept); unchanged when `terminal` is false or the width is unknown.
pub fn fit(text: &str, used: usize, terminal: bool) -> Cow<'_, str> {
    let width = terminal
        .then(|| console::Term::stdout().size_checked())
        .flatten()
        .map(|(_, cols)| usize::from(cols));
    match width {
        Some(w) => console::truncate_str(text, w.saturating_sub(used).max(20), "…"),
        None => Cow::Borrowed(text),
    }
}

/// One line on a terminal `width` wide (`None`: not a terminal, nothing
/// cut): `what` then `tail`, where `tail` is the first of `tails` that
/// leaves `what` at least 20 columns after `used`, `what` cut to what is
/// left, and the whole cut again when even the shortest tail does not fit:
/// a header never wraps.
pub fn fit_with_tail(what: &str, tails: &[&str], used: usize, width: Option<usize>) -> String {
    let Some(w) = width else {
        return format!("{what}{}", tails.first().copied().unwrap_or(""));
    };
    let cols = |s: &str| console::measure_text_width(s);
    let room = w.saturating_sub(used);
    let tail = tails
        .iter()
        .copied()
        .find(|t| cols(t) + 20 <= room)
        .or_else(|| tails.last().copied())
        .unwrap_or("");
    let left = room.saturating_sub(cols(tail)).max(1);
    let line = format!("{}{tail}", console::truncate_str(what, left, "…"));
    console::truncate_str(&line, room, "…").into_owned()
}

/// The terminal's width when `terminal` (stdout is one).
pub fn width(terminal: bool) -> Option<usize> {
    terminal
        .then(|| console::Term::stdout().size_checked())
        .flatten()
        .map(|(_, cols)| usize::from(cols))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_never_wraps_its_tail_shortens_first() {
        let what = "Core: Add the parser to the command line and its tests";
        let tails = [
            " (attempt 1) · task 5 of 6 · lane 5",
            " (attempt 1) · lane 5",
        ];
        let wide = fit_with_tail(what, &tails, 6, Some(200));
        assert_eq!(wide, format!("{what}{}", tails[0]));
        for w in [40, 50, 60, 80] {
            let line = fit_with_tail(what, &tails, 6, Some(w));
            assert!(console::measure_text_width(&line) + 6 <= w, "{w}: {line}");
        }
        let narrow = fit_with_tail(what, &tails, 6, Some(50));
        assert!(narrow.ends_with(" (attempt 1) · lane 5"), "{narrow}");
        assert_eq!(
            fit_with_tail(what, &tails, 6, None),
            format!("{what}{}", tails[0])
        );
    }

    #[test]
    fn fit_only_cuts_on_a_terminal() {
        let long = "x".repeat(500);
        assert_eq!(fit(&long, 10, false).len(), 500);
    }
}
