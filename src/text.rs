//! Plain text below every layer: makes a line of agent output safe to print
//! among our own lines. The agent layer strips what it parses with it, the ui
//! renders with it; it depends on nothing of ours.
//!
//! Kept: printable text, tabs, and (only when colour is on) SGR colour and
//! style sequences, with a reset appended so colour never leaks into the
//! next line. Dropped: cursor movement, erase, scroll, OSC (titles,
//! hyperlinks), DCS and every other control.
//!
//! A bare `\r` means "overwrite this line" (progress bars). We keep what the
//! terminal would finally show: the text after the last `\r` that is followed
//! by more text; the overwritten text is dropped. A trailing `\r` (CRLF
//! endings) changes nothing.
//!
//! Text taken from files (task ids, sections and descriptions, titles, error
//! messages that quote a file) goes through [`clean`] before it is printed,
//! always, colour or not: a tasks file must not be able to set the terminal's
//! title or clear the screen. `--json` output keeps such text as it is (serde
//! escapes every control character).

use std::borrow::Cow;
use std::fmt::Write as _;
use vte::{Params, Parser, Perform};

/// `line` with every control sequence handled as the module docs say.
pub fn sanitize(line: &str, color: bool) -> Cow<'_, str> {
    // A branch-free scan (the compiler vectorises it): most lines are clean.
    if !has_controls(line) {
        return Cow::Borrowed(line);
    }
    Cow::Owned(filter(line, color, true))
}

fn has_controls(text: &str) -> bool {
    text.as_bytes()
        .iter()
        .fold(false, |found, b| found | needs_filter(*b))
}

fn filter(line: &str, color: bool, overwrite_cr: bool) -> String {
    let mut filter = Filter {
        out: String::with_capacity(line.len()),
        color,
        overwrite_cr,
        sgr: String::new(),
        pending_cr: false,
    };
    let mut parser = Parser::new();
    parser.advance(&mut filter, line.as_bytes());
    if color && !filter.sgr.is_empty() {
        filter.out.push_str("\x1b[0m");
    }
    filter.out
}

/// Text taken from a file, made safe for one line of output: every escape
/// sequence and control character removed (tabs kept), a line break turned
/// into a space, a carriage return dropped.
pub fn clean(text: &str) -> Cow<'_, str> {
    if !has_controls(text) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(filter(text, false, false))
}

/// One line for a multi-line text from a file (an OpenSpec story's
/// checkboxes, a description with line breaks): its first non-blank line,
/// [`clean`]ed, ending in ` …` when more text follows.
pub fn headline(text: &str) -> Cow<'_, str> {
    let mut lines = text
        .lines()
        .map(str::trim_end)
        .skip_while(|l| l.trim().is_empty());
    let first = lines.next().unwrap_or("");
    let more = lines.any(|l| !l.trim().is_empty());
    match (clean(first), more) {
        (line, false) if line.len() == text.len() => Cow::Borrowed(text),
        (line, false) => Cow::Owned(line.into_owned()),
        (line, true) => Cow::Owned(format!("{line} …")),
    }
}

/// Whether a line is a Markdown checkbox (`- [ ] …`, `* [x] …`), and
/// whether it is ticked.
fn checkbox_state(line: &str) -> Option<bool> {
    let rest = line.trim_start();
    let rest = rest.strip_prefix(['-', '*', '+'])?.trim_start();
    let b = rest.as_bytes();
    (b.len() >= 3 && b[0] == b'[' && b[2] == b']' && matches!(b[1], b' ' | b'x' | b'X'))
        .then_some(b[1] != b' ')
}

/// An OpenSpec story's one line: its title (`## 3. Title`) and its
/// checkboxes counted, as a person reads a story; `None` for a task whose
/// description is not a checklist.
pub fn story_line(section: &str, description: &str) -> Option<String> {
    let first = description.lines().find(|l| !l.trim().is_empty())?;
    checkbox_state(first)?;
    let ticks: Vec<bool> = description.lines().filter_map(checkbox_state).collect();
    let (n, done) = (ticks.len(), ticks.iter().filter(|t| **t).count());
    let steps = if n == 1 {
        "1 step".to_string()
    } else {
        format!("{n} steps")
    };
    let title = headline(section);
    Some(match done {
        0 => format!("{title} · {steps}"),
        d if d == n => format!("{title} · {steps}, all ticked"),
        d => format!("{title} · {steps}, {d} ticked"),
    })
}

/// A task in one line: `Section: description's first line`, or a story's
/// line.
pub fn task_what(section: &str, description: &str) -> String {
    story_line(section, description)
        .unwrap_or_else(|| format!("{}: {}", headline(section), headline(description)))
}

/// A task's title: its description's first line, or a story's line.
pub fn task_title(section: &str, description: &str) -> String {
    story_line(section, description).unwrap_or_else(|| headline(description).into_owned())
}

/// Multi-line text (a rendered error report that may quote files), each line
/// [`sanitize`]d: colour kept when `color`, every other control removed.
pub fn clean_block(text: &str, color: bool) -> Cow<'_, str> {
    if !has_controls(&text.replace('\n', "")) {
        return Cow::Borrowed(text);
    }
    let lines: Vec<Cow<'_, str>> = text.split('\n').map(|l| sanitize(l, color)).collect();
    Cow::Owned(lines.join("\n"))
}

/// Removes every escape sequence and control (colour off).
pub fn strip(line: &str) -> Cow<'_, str> {
    sanitize(line, false)
}

/// Whether a byte may start something to filter: C0 controls but tab, DEL,
/// and 0xC2, the UTF-8 lead byte of the C1 controls (U+0080..U+009F; also of
/// harmless U+00A0..U+00BF, which then only take the slower path).
fn needs_filter(b: u8) -> bool {
    (b < 0x20 && b != b'\t') || b == 0x7f || b == 0xc2
}

struct Filter {
    out: String,
    color: bool,
    /// A bare `\r` overwrites the line (agent output) or is dropped (file text).
    overwrite_cr: bool,
    /// Every SGR sequence kept so far: replayed when `\r` clears the line, so
    /// the surviving text keeps its colour.
    sgr: String,
    pending_cr: bool,
}

impl Filter {
    fn before_text(&mut self) {
        if self.pending_cr {
            self.pending_cr = false;
            self.out.clear();
            self.out.push_str(&self.sgr);
        }
    }
}

impl Perform for Filter {
    fn print(&mut self, c: char) {
        // DEL, and C1 controls arriving as UTF-8 (U+0080..U+009F): some
        // terminals obey them.
        if ('\u{7f}'..='\u{9f}').contains(&c) {
            return;
        }
        self.before_text();
        self.out.push(c);
    }

    fn execute(&mut self, byte: u8) {
        match byte {
            b'\t' => {
                self.before_text();
                self.out.push('\t');
            }
            b'\r' => self.pending_cr = self.overwrite_cr,
            // One line in, one line out: an embedded newline becomes a space.
            b'\n' => {
                self.before_text();
                self.out.push(' ');
            }
            // Bell, backspace, shifts and the rest: nothing to show.
            _ => {}
        }
    }

    fn csi_dispatch(&mut self, params: &Params, intermediates: &[u8], ignore: bool, action: char) {
        if !(self.color && action == 'm' && intermediates.is_empty() && !ignore) {
            return;
        }
        let mut seq = String::from("\x1b[");
        for (i, param) in params.iter().enumerate() {
            if i > 0 {
                seq.push(';');
            }
            for (j, sub) in param.iter().enumerate() {
                if j > 0 {
                    seq.push(':');
                }
                let _ = write!(seq, "{sub}");
            }
        }
        seq.push('m');
        self.out.push_str(&seq);
        self.sgr.push_str(&seq);
    }
}

/// `1 task`, `2 tasks`, `0 tasks`: a count with its noun in agreement.
pub fn count(n: impl Into<u64>, one: &str, many: &str) -> String {
    let n = n.into();
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A commit's id as spectr shows it to a person: its first 10 characters,
/// as the run's `● [1.2] committed 3f2a1b9c04` line has it.
pub fn short_commit(id: &str) -> &str {
    id.get(..10).unwrap_or(id)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_commit_is_shown_by_its_first_ten_characters() {
        assert_eq!(
            super::short_commit("3f2a1b9c04e5d6c7b8a9f0e1d2c3b4a5f6e7d8c9"),
            "3f2a1b9c04"
        );
        assert_eq!(super::short_commit("3f2a"), "3f2a");
    }

    #[test]
    fn a_count_agrees_with_its_noun() {
        assert_eq!(super::count(1u32, "task", "tasks"), "1 task");
        assert_eq!(super::count(0u32, "task", "tasks"), "0 tasks");
        assert_eq!(super::count(2u64, "file", "files"), "2 files");
    }

    use super::*;

    #[test]
    fn plain_text_is_untouched_and_not_copied() {
        assert!(matches!(
            sanitize("hello\tworld ✓", true),
            Cow::Borrowed("hello\tworld ✓")
        ));
    }

    #[test]
    fn colours_pass_only_when_on() {
        let s = "\x1b[1;31merror\x1b[0m: bad";
        assert_eq!(sanitize(s, true), "\x1b[1;31merror\x1b[0m: bad\x1b[0m");
        assert_eq!(sanitize(s, false), "error: bad");
        assert_eq!(sanitize("\x1b[38:5:196mx", true), "\x1b[38:5:196mx\x1b[0m");
    }

    #[test]
    fn cursor_moves_erase_and_osc_are_dropped() {
        let s = "\x1b[2K\x1b[1A\x1b[10;5Habc\x1b]0;title\x07def\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\\x1b[?25l";
        assert_eq!(sanitize(s, true), "abcdeflink");
        assert_eq!(sanitize("a\x07b\x08c\x1bM", false), "abc");
    }

    #[test]
    fn carriage_returns_keep_what_the_terminal_would_show() {
        assert_eq!(sanitize("10%\r50%\r100%", false), "100%");
        assert_eq!(sanitize("done\r", false), "done");
        assert_eq!(sanitize("\x1b[32mok 1\rok 2", true), "\x1b[32mok 2\x1b[0m");
    }

    #[test]
    fn file_text_loses_every_control_but_tabs() {
        // The repro from issue 8: a title change and a screen clear.
        let evil = "d\x1b]0;PWNED\x07\x1b[2J\x1b[31mred\x1b[0m\tok\u{9b}1m\r\nnext\x00\x7f";
        assert_eq!(clean(evil), "dred\tok1m next");
        assert!(matches!(clean("plain ✓"), Cow::Borrowed("plain ✓")));
        assert_eq!(
            clean("a\rb"),
            "ab",
            "a carriage return is dropped, not obeyed"
        );
    }

    #[test]
    fn headline_is_the_first_line() {
        assert_eq!(headline("one line"), "one line");
        assert_eq!(
            headline("\n  \n- [ ] 1.1 a\n- [ ] 1.2 b\n"),
            "- [ ] 1.1 a …"
        );
        assert_eq!(headline("x\x1b[2J\n\n"), "x");
        assert_eq!(headline(""), "");
    }

    #[test]
    fn blocks_keep_their_lines_and_colour() {
        let report = "  \x1b[31m×\x1b[0m bad \x1b]0;t\x07\"x\"\n 1 │ {\x1b[2J}";
        assert_eq!(clean_block(report, false), "  × bad \"x\"\n 1 │ {}");
        assert_eq!(
            clean_block(report, true),
            "  \x1b[31m×\x1b[0m bad \"x\"\x1b[0m\n 1 │ {}"
        );
        assert!(matches!(clean_block("a\nb", true), Cow::Borrowed("a\nb")));
    }

    #[test]
    fn c1_controls_and_stray_newlines() {
        // The C1 CSI is dropped; what followed it is only text then.
        assert_eq!(sanitize("a\u{9b}2Jb", false), "a2Jb");
        assert_eq!(sanitize("a\nb", false), "a b");
    }
}

/// Up to `max` of `candidates` nearest to `typed` (edit distance, a
/// transposition counting one, case ignored), nearest first, ties by name;
/// only those near enough to be a typo of it (a third of its length, at
/// least 2) or that hold it whole.
pub fn nearest<'a>(typed: &str, candidates: &[&'a str], max: usize) -> Vec<&'a str> {
    let t: Vec<char> = typed.to_lowercase().chars().collect();
    let limit = (t.len() / 3).max(2);
    let mut scored: Vec<(usize, &str)> = candidates
        .iter()
        .filter_map(|c| {
            let lower = c.to_lowercase();
            let d = distance(&t, &lower.chars().collect::<Vec<_>>());
            let holds = t.len() >= 3 && lower.contains(&typed.to_lowercase());
            (d <= limit || holds).then_some((d, *c))
        })
        .collect();
    scored.sort();
    scored.into_iter().take(max).map(|(_, c)| c).collect()
}

/// Optimal string alignment distance.
fn distance(a: &[char], b: &[char]) -> usize {
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod story_tests {
    use super::*;

    #[test]
    fn a_story_reads_as_its_title_and_steps() {
        let story =
            "- [x] 3.1 Run pnpm install\n  with the lockfile\n- [ ] 3.2 Build\n- [ ] 3.3 Test";
        assert_eq!(
            task_what("Build and test", story),
            "Build and test · 3 steps, 1 ticked"
        );
        assert_eq!(
            task_title("Build and test", "- [ ] 1.1 Only"),
            "Build and test · 1 step"
        );
        assert_eq!(
            task_what("Core", "Add the parser\nwith tests"),
            "Core: Add the parser …"
        );
        assert_eq!(task_title("Core", "Add the parser"), "Add the parser");
        assert_eq!(
            task_what("Done", "- [x] a\n- [X] b"),
            "Done · 2 steps, all ticked"
        );
    }
}

#[cfg(test)]
mod nearest_tests {
    use super::nearest;

    #[test]
    fn a_typo_finds_the_id_it_meant() {
        let ids = [
            "add-timeline-slash-command",
            "add-widget",
            "fix-login",
            "remove-cache",
        ];
        assert_eq!(
            nearest("add-timline-slash-command", &ids, 3),
            ["add-timeline-slash-command"]
        );
        assert_eq!(nearest("ADD-WIDGTE", &ids, 3), ["add-widget"]);
        assert_eq!(nearest("fix-logn", &ids, 3), ["fix-login"]);
        assert!(nearest("zzzzzz", &ids, 3).is_empty());
        assert!(nearest("x", &ids, 3).is_empty());
    }
}
