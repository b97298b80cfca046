//! `--interactive`'s task list, drawn by spectr rather than dialoguer's
//! MultiSelect: that one erases by counting the lines it wrote, so a row
//! that wrapped, or a window narrowed while the list was open, left stale
//! rows behind. Here every row is cut to the width read at each draw, a
//! draw first erases the screen rows the last one takes at the width now
//! (a reflowing terminal has rewrapped them), and a resize redraws at once.

use crate::ui::progress::{screen_rows, terminal_reflows};
use console::{Key, Term};
use dialoguer::theme::{ColorfulTheme, Theme};
use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::termios::{self, LocalFlags, SetArg, SpecialCharacterIndices};
use std::io::Write;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};

/// How often a resize is looked for while no key comes.
const RESIZE_CHECK_MS: u8 = 100;

/// The list's state: what is ticked, where the cursor is, what is drawn.
struct Checklist {
    prompt: String,
    items: Vec<String>,
    /// What the answer line says of each item (its task id).
    labels: Vec<String>,
    checked: Vec<bool>,
    sel: usize,
    /// The first item shown when the list is taller than the terminal.
    top: usize,
    /// The width of each screen row drawn, and the terminal's size then.
    drawn_widths: Vec<usize>,
    drawn_size: (usize, usize),
}

impl Checklist {
    /// The rows for a terminal `rows` × `cols`: the question, then the items
    /// that fit under it (a window that follows the cursor), each cut so it
    /// never reaches the last column (a row filling it would wrap).
    fn frame(&mut self, rows: usize, cols: usize) -> Vec<String> {
        let theme = ColorfulTheme::default();
        let width = cols.saturating_sub(1).max(1);
        // The question, the items and the line the cursor waits on.
        let shown = rows.saturating_sub(2).clamp(1, self.items.len());
        if self.sel < self.top {
            self.top = self.sel;
        } else if self.sel >= self.top + shown {
            self.top = self.sel + 1 - shown;
        }
        self.top = self.top.min(self.items.len() - shown);
        let mut prompt = self.prompt.clone();
        if shown < self.items.len() {
            prompt.push_str(&format!(
                " ({}-{} of {})",
                self.top + 1,
                self.top + shown,
                self.items.len()
            ));
        }
        let mut head = String::new();
        let _ = theme.format_multi_select_prompt(&mut head, &prompt);
        let mut out = vec![head];
        for i in self.top..self.top + shown {
            let active = i == self.sel;
            // The cursor is marked, not only coloured: NO_COLOR shows it too.
            let mut row = if active {
                format!("{} ", theme.active_item_prefix)
            } else {
                format!("{} ", theme.inactive_item_prefix)
            };
            let _ = theme.format_multi_select_prompt_item(
                &mut row,
                &self.items[i],
                self.checked[i],
                active,
            );
            out.push(row);
        }
        out.into_iter()
            .map(|row| console::truncate_str(&row, width, "…").into_owned())
            .collect()
    }

    /// Takes the list off the screen: the cursor goes back to where the
    /// question started. Rows drawn wider than the window is now take
    /// several screen rows each on a terminal that rewraps.
    fn erase(&mut self, buf: &mut String, cols: usize) {
        if self.drawn_widths.is_empty() {
            return;
        }
        let up = screen_rows(
            &self.drawn_widths,
            self.drawn_size.1,
            Some(cols),
            terminal_reflows(),
        );
        buf.push_str(&format!("\r\x1b[{up}A\x1b[J"));
        self.drawn_widths.clear();
    }

    /// Erases the list as drawn and draws it at the terminal's size now.
    /// Each row ends its line: the cursor waits under the list.
    fn redraw(&mut self, (rows, cols): (usize, usize)) -> String {
        let mut buf = String::new();
        self.erase(&mut buf, cols);
        for row in self.frame(rows, cols) {
            self.drawn_widths.push(console::measure_text_width(&row));
            buf.push_str(&row);
            buf.push('\n');
        }
        self.drawn_size = (rows, cols);
        buf
    }

    /// What a key does: None goes on, Some ends the question.
    fn key(&mut self, key: Key) -> Option<Option<Vec<usize>>> {
        let last = self.items.len() - 1;
        match key {
            Key::ArrowDown | Key::Tab | Key::Char('j') => {
                self.sel = if self.sel == last { 0 } else { self.sel + 1 };
            }
            Key::ArrowUp | Key::BackTab | Key::Char('k') => {
                self.sel = if self.sel == 0 { last } else { self.sel - 1 };
            }
            Key::Home => self.sel = 0,
            Key::End => self.sel = last,
            Key::Char(' ') => self.checked[self.sel] = !self.checked[self.sel],
            Key::Char('a') => {
                let all = self.checked.iter().all(|c| *c);
                self.checked.fill(!all);
            }
            Key::Enter => {
                return Some(Some(
                    (0..self.items.len()).filter(|i| self.checked[*i]).collect(),
                ));
            }
            Key::Escape | Key::Char('q') => return Some(None),
            _ => {}
        }
        None
    }

    /// The line left once answered: the question and what was chosen.
    fn answer_line(&self) -> String {
        let theme = ColorfulTheme::default();
        let chosen: Vec<&str> = (0..self.items.len())
            .filter(|i| self.checked[*i])
            .map(|i| self.labels[i].as_str())
            .collect();
        let mut line = String::new();
        let _ = theme.format_multi_select_prompt_selection(&mut line, &self.prompt, &chosen);
        line
    }
}

/// The terminal's size now: rows, columns.
fn size() -> (usize, usize) {
    let (rows, cols) = Term::stderr().size();
    (usize::from(rows), usize::from(cols))
}

fn write(bytes: &str) -> std::io::Result<()> {
    let mut err = std::io::stderr().lock();
    err.write_all(bytes.as_bytes())?;
    err.flush()
}

/// Keys are not echoed or held for a line while the list waits between
/// reads (console's read_key goes raw only for the read itself); the
/// settings are put back on drop. Ctrl+C stays a signal meanwhile.
struct Quiet(Option<termios::Termios>);

impl Quiet {
    fn new() -> Quiet {
        let stdin = std::io::stdin();
        let Ok(before) = termios::tcgetattr(&stdin) else {
            return Quiet(None);
        };
        let mut quiet = before.clone();
        quiet
            .local_flags
            .remove(LocalFlags::ICANON | LocalFlags::ECHO);
        quiet.control_chars[SpecialCharacterIndices::VMIN as usize] = 1;
        quiet.control_chars[SpecialCharacterIndices::VTIME as usize] = 0;
        let _ = termios::tcsetattr(&stdin, SetArg::TCSANOW, &quiet);
        Quiet(Some(before))
    }
}

impl Drop for Quiet {
    fn drop(&mut self) {
        if let Some(before) = &self.0 {
            let _ = termios::tcsetattr(std::io::stdin(), SetArg::TCSANOW, before);
        }
    }
}

/// Whether a key can be read now, waiting at most [`RESIZE_CHECK_MS`]. A
/// hang-up or an error reads as ready, so the read reports it.
fn key_ready() -> bool {
    let stdin = std::io::stdin();
    let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
    match nix::poll::poll(&mut fds, PollTimeout::from(RESIZE_CHECK_MS)) {
        Ok(0) | Err(nix::errno::Errno::EINTR) => false,
        Ok(_) | Err(_) => true,
    }
}

/// Asks `prompt` over `items` (all ticked): space toggles, `a` toggles all,
/// arrows move, enter answers the ticked indices, Esc or `q` answers None.
/// `labels` name the items on the answer line. Once `abandoned` is set (the
/// question ended another way: a signal) it draws nothing more.
pub fn ask(
    prompt: &str,
    items: Vec<String>,
    labels: Vec<String>,
    abandoned: &AtomicBool,
) -> Result<Option<Vec<usize>>, dialoguer::Error> {
    let term = Term::stderr();
    if !term.is_term() || items.is_empty() {
        return Err(std::io::Error::new(std::io::ErrorKind::NotConnected, "not a terminal").into());
    }
    let _quiet = Quiet::new();
    let mut list = Checklist {
        prompt: prompt.to_string(),
        checked: vec![true; items.len()],
        items,
        labels,
        sel: 0,
        top: 0,
        drawn_widths: Vec::new(),
        drawn_size: (0, 0),
    };
    write(&format!("\x1b[?25l{}", list.redraw(size())))?;
    loop {
        if abandoned.load(Ordering::SeqCst) {
            return Ok(None);
        }
        if !key_ready() {
            let now = size();
            if now != list.drawn_size {
                write(&list.redraw(now))?;
            }
            continue;
        }
        let key = term.read_key()?;
        if abandoned.load(Ordering::SeqCst) {
            return Ok(None);
        }
        match list.key(key) {
            None => write(&list.redraw(size()))?,
            Some(answer) => {
                let mut end = String::new();
                list.erase(&mut end, size().1);
                if answer.is_some() {
                    end.push_str(&list.answer_line());
                    end.push('\n');
                }
                end.push_str("\x1b[?25h");
                write(&end)?;
                return Ok(answer);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(n: usize, text: &str) -> Checklist {
        Checklist {
            prompt: "Tasks".into(),
            items: (0..n).map(|i| format!("{i} {text}")).collect(),
            labels: (0..n).map(|i| i.to_string()).collect(),
            checked: vec![true; n],
            sel: 0,
            top: 0,
            drawn_widths: Vec::new(),
            drawn_size: (0, 0),
        }
    }

    #[test]
    fn every_row_fits_the_width_however_narrow() {
        for cols in [2, 5, 16, 25, 40, 200] {
            let mut l = list(3, &"word ".repeat(30));
            for row in l.frame(24, cols) {
                let w = console::measure_text_width(&row);
                assert!(w < cols.max(2), "{w} columns at {cols}: {row:?}");
            }
        }
    }

    #[test]
    fn a_list_taller_than_the_terminal_shows_a_window_that_follows_the_cursor() {
        let mut l = list(10, "x");
        let plain = |rows: Vec<String>| -> Vec<String> {
            rows.iter()
                .map(|r| console::strip_ansi_codes(r).into_owned())
                .collect()
        };
        let rows = plain(l.frame(5, 80));
        assert_eq!(rows.len(), 4, "{rows:?}");
        assert!(rows[0].contains("Tasks (1-3 of 10)"), "{rows:?}");
        l.key(Key::End);
        let rows = plain(l.frame(5, 80));
        assert!(rows[0].contains("(8-10 of 10)"), "{rows:?}");
        assert!(
            rows[3].starts_with('❯') && rows[3].contains("9 x"),
            "{rows:?}"
        );
    }

    #[test]
    fn keys_move_toggle_and_answer() {
        let mut l = list(3, "x");
        assert_eq!(l.key(Key::ArrowUp), None);
        assert_eq!(l.sel, 2, "up from the first wraps to the last");
        assert_eq!(l.key(Key::Char(' ')), None);
        assert_eq!(l.key(Key::Enter), Some(Some(vec![0, 1])));
        assert!(console::strip_ansi_codes(&l.answer_line()).ends_with("0, 1"));
        assert_eq!(l.key(Key::Char('a')), None, "not all ticked: all are");
        assert_eq!(l.key(Key::Char('a')), None, "all ticked: none are");
        assert_eq!(l.key(Key::Enter), Some(Some(vec![])));
        assert_eq!(l.key(Key::Escape), Some(None));
    }

    #[test]
    fn a_redraw_erases_every_screen_row_the_last_draw_takes_now() {
        let mut l = list(2, "x");
        l.redraw((24, 80));
        // The question and two items, one screen row each.
        let again = l.redraw((24, 80));
        assert!(again.starts_with("\r\x1b[3A\x1b[J"), "{again:?}");
    }
}
