//! The progress rows under the printed lines on a terminal. spectr draws
//! them itself: indicatif's `MultiProgress::println` pads each printed line
//! with spaces to the terminal's width and leaves its newline out, so a
//! run's end became one long wrapped row (copying, scrollback search and
//! `tmux capture-pane -J` saw one line). Here a printed line is written as
//! it is, with its newline; only the rows are erased and redrawn in place.
//! Rows are cut to the width so that none wraps and each is one screen row.
//!
//! A question asked during the run (retry / skip / abort, `Quit? [y/N]`,
//! `Restart which task?`) is pinned under the rows ([`pin`]): part of the
//! live region, it is redrawn under every printed line until it is
//! answered, so the other lanes' output keeps flowing above it and never
//! scrolls it away. Its rows are not cut: every word of a question counts,
//! so a row wider than the terminal is left to wrap, and counted as the
//! screen rows it takes.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

const SPINNER: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
const TICK: Duration = Duration::from_millis(200);

struct State {
    pos: u64,
    len: u64,
    started: Instant,
    message: String,
    /// One row per task running in a lane: when it started, what it is.
    lanes: BTreeMap<String, (Instant, String)>,
    /// How many rows are on the screen now (the cursor is on the last).
    drawn: usize,
    /// The width in columns of each row drawn, and the terminal's width when
    /// they were drawn: a window narrowed since wraps them.
    drawn_widths: Vec<usize>,
    drawn_cols: usize,
    /// The terminal rewraps its lines when its width changes (most do:
    /// tmux, VTE, kitty, iTerm2; xterm does not).
    reflows: bool,
    /// Off the screen for good: at the end, or a forced exit.
    hidden: bool,
    frame: usize,
    /// The question waiting for an answer, drawn under the rows.
    question: Option<Question>,
}

/// A question pinned under the progress rows.
struct Question {
    /// Which [`pin`] it is: a handle of an earlier question changes nothing.
    id: u64,
    rows: Vec<String>,
    /// The cursor is hidden while it waits (a list: the cursor would sit at
    /// the end of its last choice).
    hides_cursor: bool,
}

/// The rows, shared with the thread that redraws them (spinner, clock).
pub(crate) struct Progress {
    state: Arc<Mutex<State>>,
}

/// The rows on the screen now (at most one set per process), for lines
/// written from elsewhere: see [`say`].
static ACTIVE: Mutex<Option<Weak<Mutex<State>>>> = Mutex::new(None);

/// Writes `line` on stderr as a line of its own: above the progress rows
/// when they are drawn (else it would be glued to the last one).
pub fn say(line: &str) {
    let active = ACTIVE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .and_then(Weak::upgrade);
    let Some(state) = active else {
        let _ = writeln!(std::io::stderr(), "{line}");
        return;
    };
    let mut s = lock(&state);
    let mut erase = String::new();
    s.erase(&mut erase);
    write(&erase);
    let _ = writeln!(std::io::stderr(), "{line}");
    let mut draw = String::new();
    s.draw(&mut draw);
    write(&draw);
}

/// Takes the rows off the screen for good (a forced exit): nothing is
/// drawn again, and what is said afterwards is a plain line.
pub fn take_down() {
    let active = ACTIVE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
        .and_then(|w| w.upgrade());
    if let Some(state) = active {
        let mut s = lock(&state);
        s.hidden = true;
        let erase = s.take_question();
        write(&erase);
    }
}

/// A question pinned under the progress rows (see [`pin`]). Cloned, every
/// handle acts on the same question; once it is gone (answered, removed, or
/// the rows taken down) a handle changes nothing.
#[derive(Clone)]
pub struct Pinned {
    id: u64,
    state: Weak<Mutex<State>>,
}

/// Pins `rows` (a question) under the progress rows until [`Pinned::remove`]:
/// redrawn with them under every printed line. None when no rows are on the
/// screen (stdout is not a terminal): the question is asked another way.
/// `hide_cursor`: a list, whose cursor would sit after its last choice.
pub fn pin(rows: Vec<String>, hide_cursor: bool) -> Option<Pinned> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let weak = ACTIVE.lock().unwrap_or_else(|e| e.into_inner()).clone()?;
    let state = weak.upgrade()?;
    let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let mut s = lock(&state);
    if s.hidden {
        return None;
    }
    let mut buf = String::new();
    if hide_cursor {
        buf.push_str(HIDE_CURSOR);
    }
    s.erase(&mut buf);
    if let Some(earlier) = s.question.take()
        && earlier.hides_cursor
        && !hide_cursor
    {
        buf.push_str(SHOW_CURSOR);
    }
    s.question = Some(Question {
        id,
        rows,
        hides_cursor: hide_cursor,
    });
    s.draw(&mut buf);
    write(&buf);
    Some(Pinned { id, state: weak })
}

const HIDE_CURSOR: &str = "\x1b[?25l";
const SHOW_CURSOR: &str = "\x1b[?25h";

impl Pinned {
    /// The question's rows are now `rows` (a choice moved), redrawn at once.
    pub fn set(&self, rows: Vec<String>) {
        let Some(state) = self.state.upgrade() else {
            return;
        };
        let mut s = lock(&state);
        match &mut s.question {
            Some(q) if q.id == self.id => q.rows = rows,
            _ => return,
        }
        let buf = s.redraw();
        write(&buf);
    }

    /// Takes the question off the screen, and prints `record` (the line
    /// that says what was answered) where the question's rows were, in the
    /// same write: the rows are drawn again under it.
    pub fn remove(&self, record: Option<&str>) {
        let Some(state) = self.state.upgrade() else {
            // The rows are gone for good: a plain line.
            if let Some(record) = record {
                write(&format!("{record}\n"));
            }
            return;
        };
        let mut s = lock(&state);
        if s.question.as_ref().is_none_or(|q| q.id != self.id) {
            return;
        }
        let mut buf = s.take_question();
        if let Some(record) = record {
            buf.push_str(record);
            buf.push('\n');
        }
        s.draw(&mut buf);
        write(&buf);
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    // A panic while drawing left plain numbers and strings: still usable.
    state.lock().unwrap_or_else(|e| e.into_inner())
}

/// The terminal's width now, if stdout is one.
fn terminal_cols() -> Option<usize> {
    console::Term::stdout()
        .size_checked()
        .map(|(_, cols)| usize::from(cols))
}

/// How many screen rows the rows drawn `widths` wide, on a terminal
/// `drawn_cols` wide, take now that it is `cols` wide (None: unknown): a
/// terminal that `reflows` has rewrapped each into several when narrowed.
/// A row wider than the terminal was (a question) took several already.
pub(crate) fn screen_rows(
    widths: &[usize],
    drawn_cols: usize,
    cols: Option<usize>,
    reflows: bool,
) -> usize {
    let cols = match cols {
        Some(cols) if reflows && cols > 0 => cols,
        _ => drawn_cols,
    };
    if cols == 0 {
        return widths.len();
    }
    widths.iter().map(|w| w.div_ceil(cols).max(1)).sum()
}

/// Whether the terminal rewraps lines on a resize. Most do; a genuine xterm
/// (it sets `XTERM_VERSION`, and passes it on to a tmux started in it)
/// does not, unless inside tmux, which does.
pub(crate) fn terminal_reflows() -> bool {
    std::env::var_os("TMUX").is_some() || std::env::var_os("XTERM_VERSION").is_none()
}

fn write(bytes: &str) {
    if bytes.is_empty() {
        return;
    }
    let mut out = std::io::stdout().lock();
    // A closed terminal must not stop the run (the transcripts have it all).
    let _ = out.write_all(bytes.as_bytes());
    let _ = out.flush();
}

/// `12s`, `3m04s`, `2h05m`: short, for a lane's row.
fn short_elapsed(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
    }
}

impl State {
    /// Takes the rows off the screen with the pinned question, which is
    /// forgotten (the cursor it hid is shown); the rows are not drawn again.
    fn take_question(&mut self) -> String {
        let mut buf = String::new();
        self.erase(&mut buf);
        if self.question.take().is_some_and(|q| q.hides_cursor) {
            buf.push_str(SHOW_CURSOR);
        }
        buf
    }

    /// Takes the rows off the screen; the cursor goes to where the first was.
    fn erase(&mut self, buf: &mut String) {
        self.erase_at(buf, terminal_cols());
    }

    /// [`State::erase`] on a terminal `cols` wide now (None: unknown). A
    /// window narrowed since the rows were drawn has rewrapped each into
    /// several screen rows, with the cursor on the last: going up only one
    /// screen row per row would leave the others behind as fragments.
    fn erase_at(&mut self, buf: &mut String, cols: Option<usize>) {
        if self.drawn == 0 {
            return;
        }
        let screen_rows = screen_rows(&self.drawn_widths, self.drawn_cols, cols, self.reflows);
        buf.push('\r');
        if screen_rows > 1 {
            buf.push_str(&format!("\x1b[{}A", screen_rows - 1));
        }
        buf.push_str("\x1b[J");
        self.drawn = 0;
        self.drawn_widths.clear();
    }

    fn rows(&self, now: Instant) -> Vec<String> {
        let spin = SPINNER[self.frame % SPINNER.len()];
        let e = now.saturating_duration_since(self.started).as_secs();
        let mut rows = vec![format!(
            "{spin} [{}/{}] {:02}:{:02}:{:02} {}",
            self.pos,
            self.len,
            e / 3600,
            e % 3600 / 60,
            e % 60,
            self.message
        )];
        for (started, text) in self.lanes.values() {
            let e = short_elapsed(now.saturating_duration_since(*started));
            rows.push(format!("  {spin} {e:>5} {text}"));
        }
        rows
    }

    /// Draws the rows from the cursor's line on; the last row has no
    /// newline, so nothing scrolls for it.
    fn draw(&mut self, buf: &mut String) {
        if self.hidden {
            return;
        }
        // Read at every draw: the window may have been resized since.
        let (height, cols) = console::Term::stdout().size();
        let cols = usize::from(cols);
        let shown = self.frame_rows(Instant::now(), usize::from(height), cols);
        self.drawn_widths.clear();
        for (i, row) in shown.iter().enumerate() {
            if i > 0 {
                buf.push('\n');
            }
            self.drawn_widths.push(console::measure_text_width(row));
            buf.push_str(row);
        }
        self.drawn = shown.len();
        self.drawn_cols = cols;
    }

    /// The rows of the live region on a terminal `height` × `cols`: the
    /// progress rows, each cut to the width, then the pinned question's,
    /// whole (the terminal wraps a wide one: it takes several screen rows).
    /// The question is kept first; the progress rows take the screen rows
    /// left (one stays free for the printed lines).
    fn frame_rows(&self, now: Instant, height: usize, cols: usize) -> Vec<String> {
        // The last column stays free: a row that fills it would wrap.
        let width = cols.saturating_sub(1).max(10);
        let max_rows = height.saturating_sub(1).max(1);
        let mut room = max_rows;
        let mut question = Vec::new();
        for row in self.question.iter().flat_map(|q| q.rows.iter()) {
            if room == 0 {
                break;
            }
            // Taller than the room left (a tiny window): cut to fit it.
            let row = console::truncate_str(row, (room * cols.max(1)).saturating_sub(1), "…");
            room -= console::measure_text_width(&row)
                .div_ceil(cols.max(1))
                .max(1);
            question.push(row.into_owned());
        }
        let mut rows: Vec<String> = self
            .rows(now)
            .into_iter()
            .take(room)
            .map(|row| console::truncate_str(&row, width, "…").into_owned())
            .collect();
        rows.append(&mut question);
        rows
    }

    fn redraw(&mut self) -> String {
        let mut buf = String::new();
        self.erase(&mut buf);
        self.draw(&mut buf);
        buf
    }
}

impl Progress {
    /// Draws the rows now and keeps them turning until dropped.
    pub fn start(len: u64) -> Progress {
        let state = Arc::new(Mutex::new(State {
            pos: 0,
            len,
            started: Instant::now(),
            message: String::new(),
            lanes: BTreeMap::new(),
            drawn: 0,
            drawn_widths: Vec::new(),
            drawn_cols: 0,
            reflows: terminal_reflows(),
            hidden: false,
            frame: 0,
            question: None,
        }));
        let weak = Arc::downgrade(&state);
        *ACTIVE.lock().unwrap_or_else(|e| e.into_inner()) = Some(weak.clone());
        // Without the thread the rows are still redrawn at every line.
        let _ = std::thread::Builder::new()
            .name("progress".into())
            .spawn(move || ticker(&weak));
        let progress = Progress { state };
        progress.update(|_| {});
        progress
    }

    fn update(&self, f: impl FnOnce(&mut State)) {
        let mut s = lock(&self.state);
        f(&mut s);
        let buf = s.redraw();
        write(&buf);
    }

    /// Writes `text` (whole lines; a missing last newline is added) above
    /// the rows, in one write.
    pub fn print(&self, text: &str) {
        let mut s = lock(&self.state);
        let mut buf = String::with_capacity(text.len() + 256);
        s.erase(&mut buf);
        buf.push_str(text);
        if !text.ends_with('\n') {
            buf.push('\n');
        }
        s.draw(&mut buf);
        write(&buf);
    }

    pub fn set_message(&self, message: String) {
        self.update(|s| s.message = message);
    }

    pub fn set_position(&self, pos: u64) {
        self.update(|s| s.pos = pos);
    }

    pub fn set_lane(&self, task: &str, text: String) {
        self.update(|s| {
            s.lanes.insert(task.to_string(), (Instant::now(), text));
        });
    }

    pub fn end_lane(&self, task: &str) {
        self.update(|s| {
            s.lanes.remove(task);
        });
    }

    /// Off the screen for good, with a question still pinned.
    pub fn hide(&self) {
        let mut s = lock(&self.state);
        s.hidden = true;
        let buf = s.take_question();
        write(&buf);
    }

    /// Takes a question still pinned off the screen (it was left
    /// unanswered: the run stops), and draws the rows without it.
    pub fn drop_question(&self) {
        let mut s = lock(&self.state);
        if s.question.is_none() {
            return;
        }
        let mut buf = s.take_question();
        s.draw(&mut buf);
        write(&buf);
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.hide();
    }
}

fn ticker(state: &Weak<Mutex<State>>) {
    loop {
        std::thread::sleep(TICK);
        let Some(state) = state.upgrade() else {
            return;
        };
        let mut s = lock(&state);
        if s.hidden {
            continue;
        }
        s.frame += 1;
        let buf = s.redraw();
        write(&buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erasing_goes_back_to_the_first_row_and_clears_below() {
        let mut s = State {
            pos: 1,
            len: 2,
            started: Instant::now(),
            message: "m".into(),
            lanes: BTreeMap::new(),
            drawn: 3,
            drawn_widths: vec![5, 5, 5],
            drawn_cols: 80,
            reflows: true,
            hidden: false,
            frame: 0,
            question: None,
        };
        let mut buf = String::new();
        s.erase_at(&mut buf, Some(80));
        assert_eq!(buf, "\r\x1b[2A\x1b[J");
        assert_eq!(s.drawn, 0);
        buf.clear();
        s.erase_at(&mut buf, Some(80));
        assert_eq!(buf, "", "nothing drawn, nothing erased");
    }

    #[test]
    fn erasing_after_the_window_narrowed_goes_up_every_wrapped_row() {
        let drawn = |reflows| State {
            pos: 0,
            len: 1,
            started: Instant::now(),
            message: String::new(),
            lanes: BTreeMap::new(),
            // 119 and 30 columns drawn on a terminal 120 wide.
            drawn: 2,
            drawn_widths: vec![119, 30],
            drawn_cols: 120,
            reflows,
            hidden: false,
            frame: 0,
            question: None,
        };
        // Now 50 wide: the first row takes 3 screen rows, the second 1.
        let mut buf = String::new();
        drawn(true).erase_at(&mut buf, Some(50));
        assert_eq!(buf, "\r\x1b[3A\x1b[J");
        // Wider again: each row is one screen row.
        buf.clear();
        drawn(true).erase_at(&mut buf, Some(200));
        assert_eq!(buf, "\r\x1b[1A\x1b[J");
        // A terminal that does not rewrap (xterm) cut the rows instead.
        buf.clear();
        drawn(false).erase_at(&mut buf, Some(50));
        assert_eq!(buf, "\r\x1b[1A\x1b[J");
    }

    #[test]
    fn a_pinned_question_is_drawn_under_the_rows_and_kept_whole_first() {
        let now = Instant::now();
        let mut lanes = BTreeMap::new();
        lanes.insert("1.1".to_string(), (now, "1.1 Core".to_string()));
        lanes.insert("2.1".to_string(), (now, "2.1 Docs".to_string()));
        let s = State {
            pos: 0,
            len: 2,
            started: now,
            message: "2 running".into(),
            lanes,
            drawn: 0,
            drawn_widths: Vec::new(),
            drawn_cols: 0,
            reflows: true,
            hidden: false,
            frame: 0,
            question: Some(Question {
                id: 1,
                rows: vec!["Quit? [y/N]".into()],
                hides_cursor: false,
            }),
        };
        let rows = s.frame_rows(now, 24, 80);
        assert_eq!(rows.len(), 4, "{rows:?}");
        assert!(rows[0].contains("[0/2]"), "{rows:?}");
        assert_eq!(rows[3], "Quit? [y/N]");
        // Three screen rows: one stays free, the question is kept, one
        // progress row fits.
        let rows = s.frame_rows(now, 3, 80);
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert!(rows[0].contains("[0/2]"), "{rows:?}");
        assert_eq!(rows[1], "Quit? [y/N]");
        // Wider than the terminal, it is not cut: it takes two screen rows,
        // and they are counted when it is erased.
        let mut s = s;
        let long = format!("Quit? {} [y/N]", "word ".repeat(20));
        s.question = Some(Question {
            id: 1,
            rows: vec![long.clone()],
            hides_cursor: false,
        });
        let rows = s.frame_rows(now, 24, 80);
        assert_eq!(rows.last(), Some(&long));
        assert_eq!(rows.len(), 4, "{rows:?}");
        let widths: Vec<usize> = rows
            .iter()
            .map(|r| console::measure_text_width(r))
            .collect();
        assert_eq!(screen_rows(&widths, 80, Some(80), true), 5);
        assert_eq!(screen_rows(&widths, 80, Some(80), false), 5);
    }

    #[test]
    fn rows_show_the_count_the_clock_and_each_lane() {
        let now = Instant::now();
        let mut lanes = BTreeMap::new();
        lanes.insert("2.1".to_string(), (now, "2.1 Docs".to_string()));
        let s = State {
            pos: 1,
            len: 3,
            started: now,
            message: "2 running".into(),
            lanes,
            drawn: 0,
            drawn_widths: Vec::new(),
            drawn_cols: 0,
            reflows: true,
            hidden: false,
            frame: 0,
            question: None,
        };
        let rows = s.rows(now + Duration::from_secs(65));
        assert_eq!(rows[0], "⠋ [1/3] 00:01:05 2 running");
        assert_eq!(rows[1], "  ⠋ 1m05s 2.1 Docs");
        assert_eq!(short_elapsed(Duration::from_secs(7)), "7s");
        assert_eq!(short_elapsed(Duration::from_secs(7260)), "2h01m");
    }
}
