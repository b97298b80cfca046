//! A tiny terminal screen for the bytes spectr writes to a pty: enough of a
//! reflowing terminal (tmux, VTE, kitty) to see what a person sees,
//! including after the window was resized.
//!
//! The screen is kept as logical lines (what a newline ends) with unlimited
//! scrollback; a logical line longer than the width takes several screen
//! rows, and a resize rewraps them, as those terminals do. It knows the
//! bytes spectr writes: text, `\r`, `\n`, cursor up (`ESC[nA`), erase below
//! (`ESC[J`) and to the end of the row (`ESC[K`); colours and other CSI
//! sequences (cursor shown or hidden) are read and ignored.

pub struct Screen {
    width: usize,
    lines: Vec<Vec<char>>,
    /// The cursor: a logical line and an offset in it.
    line: usize,
    offset: usize,
    /// The last column was just written: the cursor still shows on its row
    /// until the next character wraps.
    pending_wrap: bool,
}

impl Screen {
    pub fn new(width: usize) -> Screen {
        Screen {
            width,
            lines: vec![Vec::new()],
            line: 0,
            offset: 0,
            pending_wrap: false,
        }
    }

    /// The window is now `width` columns wide: the lines rewrap.
    pub fn resize(&mut self, width: usize) {
        self.width = width;
        self.pending_wrap = false;
    }

    /// The cursor's screen row within its logical line, and its column.
    fn row_col(&self) -> (usize, usize) {
        if self.pending_wrap && self.offset > 0 {
            (self.offset / self.width - 1, self.width - 1)
        } else {
            (self.offset / self.width, self.offset % self.width)
        }
    }

    fn rows_of(&self, line: usize) -> usize {
        self.lines[line].len().div_ceil(self.width).max(1)
    }

    fn put(&mut self, c: char) {
        let line = &mut self.lines[self.line];
        while line.len() < self.offset {
            line.push(' ');
        }
        if self.offset < line.len() {
            line[self.offset] = c;
        } else {
            line.push(c);
        }
        self.offset += 1;
        self.pending_wrap = self.offset.is_multiple_of(self.width);
    }

    fn carriage_return(&mut self) {
        let (row, _) = self.row_col();
        self.offset = row * self.width;
        self.pending_wrap = false;
    }

    fn line_feed(&mut self) {
        let (row, col) = self.row_col();
        if row + 1 < self.rows_of(self.line) {
            self.offset = (row + 1) * self.width + col;
        } else {
            self.line += 1;
            if self.line == self.lines.len() {
                self.lines.push(Vec::new());
            }
            self.offset = col;
        }
        self.pending_wrap = false;
    }

    fn up(&mut self, n: usize) {
        let (mut row, col) = self.row_col();
        for _ in 0..n {
            if row > 0 {
                row -= 1;
            } else if self.line > 0 {
                self.line -= 1;
                row = self.rows_of(self.line) - 1;
            }
        }
        self.offset = row * self.width + col;
        self.pending_wrap = false;
    }

    /// `ESC[J`: from the cursor to the end of the screen.
    fn erase_below(&mut self) {
        self.lines[self.line].truncate(self.offset);
        self.lines.truncate(self.line + 1);
    }

    /// `ESC[K`: from the cursor to the end of its screen row.
    fn erase_row(&mut self) {
        let (row, _) = self.row_col();
        let end = ((row + 1) * self.width).min(self.lines[self.line].len());
        let line = &mut self.lines[self.line];
        if end == line.len() {
            line.truncate(self.offset.min(end));
        } else {
            for c in &mut line[self.offset.min(end)..end] {
                *c = ' ';
            }
        }
    }

    /// Writes `bytes` (UTF-8) as a terminal would show them.
    pub fn feed(&mut self, bytes: &str) {
        let mut chars = bytes.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\r' => self.carriage_return(),
                '\n' => self.line_feed(),
                '\x1b' => {
                    if chars.peek() != Some(&'[') {
                        chars.next();
                        continue;
                    }
                    chars.next();
                    let mut params = String::new();
                    let mut last = '\0';
                    for c in chars.by_ref() {
                        if ('\x40'..='\x7e').contains(&c) {
                            last = c;
                            break;
                        }
                        params.push(c);
                    }
                    let n = params.parse::<usize>().unwrap_or(1).max(1);
                    match last {
                        'A' => self.up(n),
                        'J' => self.erase_below(),
                        'K' => self.erase_row(),
                        _ => {}
                    }
                }
                '\x07' | '\x08' => {}
                c => self.put(c),
            }
        }
    }

    /// The logical lines, trailing blanks trimmed, without the empty last
    /// line the cursor sits on after a final newline.
    pub fn lines(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .lines
            .iter()
            .map(|l| l.iter().collect::<String>().trim_end().to_string())
            .collect();
        while out.last().is_some_and(String::is_empty) {
            out.pop();
        }
        out
    }

    /// [`Screen::lines`] joined with newlines.
    pub fn text(&self) -> String {
        self.lines().join("\n")
    }
}
