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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_only_cuts_on_a_terminal() {
        let long = "x".repeat(500);
        assert_eq!(fit(&long, 10, false).len(), 500);
    }
}
