//! Cutting a byte stream read in chunks into whole lines: the supervisor's
//! readers (and the benchmark) use it, so the transcript always receives
//! whole lines and the parser never sees half of one.

use crate::agent::AgentEvent;
use crate::agent::parse::LineParser;

/// Holds the unfinished line between chunks.
#[derive(Debug, Default)]
pub struct LineSplitter {
    pending: Vec<u8>,
    max_line: usize,
}

impl LineSplitter {
    /// A splitter that passes on a line longer than `max_line` bytes even
    /// without its end, so one endless line cannot take all memory.
    pub fn new(max_line: usize) -> LineSplitter {
        LineSplitter {
            pending: Vec::new(),
            max_line,
        }
    }

    /// Feeds one chunk; calls `whole` with the complete lines it finished
    /// (blocks ending in `\n`, or a cut overlong line), if any: at most
    /// twice, the line that was pending first.
    pub fn feed(&mut self, chunk: &[u8], mut whole: impl FnMut(&[u8])) {
        let mut rest = chunk;
        // Finish the pending line alone, so the chunk's other lines go out
        // without being copied (a chunk almost always starts mid-line).
        if !self.pending.is_empty()
            && let Some(i) = rest.iter().position(|b| *b == b'\n')
        {
            self.pending.extend_from_slice(&rest[..=i]);
            whole(&self.pending);
            self.pending.clear();
            rest = &rest[i + 1..];
        }
        if self.pending.is_empty()
            && let Some(i) = rest.iter().rposition(|b| *b == b'\n')
        {
            whole(&rest[..=i]);
            rest = &rest[i + 1..];
        }
        self.pending.extend_from_slice(rest);
        if self.pending.len() >= self.max_line.max(1) {
            whole(&self.pending);
            self.pending.clear();
        }
    }

    /// At end of input: the last line, if it had no line end.
    pub fn finish(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.pending)
    }
}

/// Parses every line of `block` (lines end with `\n`, optionally `\r\n`;
/// invalid UTF-8 is replaced, never an error). Blank lines reach the parser
/// too: a text agent's layout keeps them.
pub fn parse_block(block: &[u8], parser: &mut dyn LineParser, out: &mut Vec<AgentEvent>) {
    if block.is_empty() {
        return;
    }
    let block = block.strip_suffix(b"\n").unwrap_or(block);
    // Validating the whole block at once is fast, and `str::split` finds line
    // ends with a vectorised search; only a block with bad bytes goes line by
    // line through the lossy conversion.
    match std::str::from_utf8(block) {
        Ok(text) => {
            for line in text.split('\n') {
                parser.parse_line(line.strip_suffix('\r').unwrap_or(line), out);
            }
        }
        Err(_) => {
            for line in block.split(|b| *b == b'\n') {
                let line = line.strip_suffix(b"\r").unwrap_or(line);
                parser.parse_line(&String::from_utf8_lossy(line), out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::parse::TextParser;

    fn split_all(chunks: &[&[u8]], max: usize) -> (Vec<String>, Vec<u8>) {
        let mut s = LineSplitter::new(max);
        let mut blocks = Vec::new();
        for c in chunks {
            s.feed(c, |b| blocks.push(String::from_utf8_lossy(b).into_owned()));
        }
        (blocks, s.finish())
    }

    #[test]
    fn lines_across_chunks() {
        let (blocks, rest) = split_all(&[b"ab", b"c\nde", b"f\ng\ni\nh"], 1024);
        assert_eq!(blocks, ["abc\n", "def\n", "g\ni\n"]);
        assert_eq!(rest, b"h");
    }

    proptest::proptest! {
        /// However the stream is cut into reads, the blocks and the rest put
        /// back together are the stream, and every block ends a line.
        #[test]
        fn any_chunking_gives_the_stream_back_in_whole_lines(
            text in "[ab\n]{0,200}",
            cuts in proptest::collection::vec(0usize..200, 0..10),
        ) {
            let bytes = text.as_bytes();
            let mut at: Vec<usize> = cuts.into_iter().map(|c| c.min(bytes.len())).collect();
            at.push(0);
            at.push(bytes.len());
            at.sort();
            let chunks: Vec<&[u8]> = at.windows(2).map(|w| &bytes[w[0]..w[1]]).collect();
            let (blocks, rest) = split_all(&chunks, 1024);
            proptest::prop_assert!(blocks.iter().all(|b| b.ends_with('\n')));
            proptest::prop_assert_eq!(blocks.concat().into_bytes().into_iter().chain(rest).collect::<Vec<u8>>(), bytes.to_vec());
        }
    }

    #[test]
    fn overlong_lines_are_cut() {
        let (blocks, rest) = split_all(&[b"aaaa", b"bbbb", b"c\n"], 6);
        assert_eq!(blocks, ["aaaabbbb", "c\n"]);
        assert!(rest.is_empty());
    }

    #[test]
    fn parse_block_handles_crlf_blank_lines_and_bad_utf8() {
        let mut out = Vec::new();
        parse_block(b"one\r\n\ntw\xffo\n", &mut TextParser, &mut out);
        assert_eq!(
            out,
            [
                AgentEvent::Raw { line: "one".into() },
                AgentEvent::Raw {
                    line: String::new()
                },
                AgentEvent::Raw {
                    line: "tw\u{fffd}o".into()
                }
            ]
        );
    }
}
