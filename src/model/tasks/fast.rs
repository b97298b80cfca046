//! A fast path for well-formed tasks files: walks jsonc-parser's token stream
//! instead of building its AST (about half the cost on a 10,000-task change).
//!
//! It answers only when sure: on anything unusual (a syntax error, a wrong
//! type, an unknown status, a duplicate key, ...) it returns `None` and the
//! AST-based parser in `parse.rs` runs and gives the precise error. When it does
//! answer, the result is what that parser would return (checked by a
//! differential property test below).

use super::MAX_DEPTH;
use super::raw::{Children, RawEntry, RawFile};
use crate::model::TaskStatus;
use jsonc_parser::tokens::Token;
use jsonc_parser::{Scanner, ScannerOptions};
use std::borrow::Cow;
use std::ops::Range;

/// Deepest nesting of values we walk (the AST parser stops at 512).
const MAX_NESTING: usize = 256;

/// Parses `text` when it is a plain, valid tasks file; `None` otherwise.
pub(crate) fn parse(text: &str) -> Option<RawFile> {
    let base = if text.starts_with('\u{feff}') { 3 } else { 0 };
    let options = ScannerOptions {
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        allow_bare_decimal_point_numbers: false,
        allow_non_finite_numbers: false,
        allow_extended_string_escapes: false,
    };
    let mut w = Walker {
        scanner: Scanner::new(text.get(base..)?, &options),
        base,
    };
    let file = w.root()?;
    // Nothing but comments may follow the root object.
    loop {
        match w.scanner.scan() {
            Ok(None) => return Some(file),
            Ok(Some(Token::CommentLine(_) | Token::CommentBlock(_))) => continue,
            _ => return None,
        }
    }
}

struct Walker<'a> {
    scanner: Scanner<'a>,
    base: usize,
}

impl<'a> Walker<'a> {
    /// The next token that is not a comment; `None` at the end or on an error.
    fn next(&mut self) -> Option<Token<'a>> {
        loop {
            match self.scanner.scan() {
                Ok(Some(Token::CommentLine(_) | Token::CommentBlock(_))) => continue,
                Ok(Some(t)) => return Some(t),
                _ => return None,
            }
        }
    }

    fn range(&self) -> Range<usize> {
        self.base + self.scanner.token_start()..self.base + self.scanner.token_end()
    }

    /// After a member: `,` then (maybe) more, or the closing token.
    /// Returns the token after a comma so callers can spot a trailing comma.
    fn after_member(&mut self, close: &Token<'_>) -> Option<Option<Token<'a>>> {
        match self.next()? {
            Token::Comma => match self.next()? {
                t if &t == close => Some(None),
                t => Some(Some(t)),
            },
            t if &t == close => Some(None),
            _ => None,
        }
    }

    /// Walks an object's members, starting after `{`, calling `member` with
    /// each key (the `:` consumed). Returns `None` on any malformation.
    fn object(
        &mut self,
        mut member: impl FnMut(&mut Self, Cow<'a, str>) -> Option<()>,
    ) -> Option<()> {
        let mut tok = self.next()?;
        loop {
            let key = match tok {
                Token::CloseBrace => return Some(()),
                Token::String(k) => k,
                _ => return None,
            };
            if self.next()? != Token::Colon {
                return None;
            }
            member(self, key)?;
            match self.after_member(&Token::CloseBrace)? {
                None => return Some(()),
                Some(t) => tok = t,
            }
        }
    }

    /// Walks an array's elements, starting after `[`, calling `element` with
    /// each element's first token.
    fn array(&mut self, mut element: impl FnMut(&mut Self, Token<'a>) -> Option<()>) -> Option<()> {
        let mut tok = self.next()?;
        loop {
            if tok == Token::CloseBracket {
                return Some(());
            }
            element(self, tok)?;
            match self.after_member(&Token::CloseBracket)? {
                None => return Some(()),
                Some(t) => tok = t,
            }
        }
    }

    /// Skips one value whose first token is `first`.
    fn skip(&mut self, first: Token<'a>, depth: usize) -> Option<()> {
        if depth > MAX_NESTING {
            return None;
        }
        match first {
            Token::String(_) | Token::Number(_) | Token::Boolean(_) | Token::Null => Some(()),
            Token::OpenBrace => self.object(|w, _| {
                let t = w.next()?;
                w.skip(t, depth + 1)
            }),
            Token::OpenBracket => self.array(|w, t| w.skip(t, depth + 1)),
            _ => None,
        }
    }

    fn root(&mut self) -> Option<RawFile> {
        if self.next()? != Token::OpenBrace {
            return None;
        }
        let mut entries = None;
        let mut parent = None;
        let mut includes = None;
        self.object(|w, key| match key.as_ref() {
            "tasks" if entries.is_none() => {
                if w.next()? != Token::OpenBracket {
                    return None;
                }
                entries = Some(w.entries(0)?);
                Some(())
            }
            "parent" if parent.is_none() => {
                parent = Some(w.id_value()?);
                Some(())
            }
            "includes" if includes.is_none() => {
                if w.next()? != Token::OpenBracket {
                    return None;
                }
                let mut list = Vec::new();
                w.array(|w, t| match t {
                    Token::String(s) => {
                        list.push((s.into_owned(), w.range()));
                        Some(())
                    }
                    _ => None,
                })?;
                includes = Some(list);
                Some(())
            }
            // A repeated key: the AST parser decides what that means.
            "tasks" | "parent" | "includes" => None,
            _ => {
                let t = w.next()?;
                w.skip(t, 1)
            }
        })?;
        Some(RawFile {
            parent,
            includes: includes.unwrap_or_default(),
            entries: entries?,
            unknown_statuses: Vec::new(),
        })
    }

    /// The elements of a `tasks` (or inline `children`) array, after `[`.
    fn entries(&mut self, depth: usize) -> Option<Vec<RawEntry>> {
        let mut out = Vec::new();
        self.array(|w, t| {
            if t != Token::OpenBrace {
                return None;
            }
            out.push(w.entry(depth)?);
            Some(())
        })?;
        Some(out)
    }

    /// A non-empty string id and its range.
    fn id_value(&mut self) -> Option<(String, Range<usize>)> {
        match self.next()? {
            Token::String(s) if !s.trim().is_empty() && !s.chars().any(char::is_control) => {
                Some((s.into_owned(), self.range()))
            }
            _ => None,
        }
    }

    /// One task object, after `{`.
    fn entry(&mut self, depth: usize) -> Option<RawEntry> {
        let mut id = None;
        let mut section = None;
        let mut description = None;
        let mut status = None;
        let mut children = None;
        self.object(|w, key| {
            match key.as_ref() {
                "id" if id.is_none() => id = Some(w.id_value()?),
                "section" if section.is_none() => section = Some(w.text()?),
                "description" if description.is_none() => description = Some(w.text()?),
                "status" if status.is_none() => match w.next()? {
                    Token::String(s) => status = Some((TaskStatus::parse(&s)?, w.range())),
                    _ => return None,
                },
                "children" if children.is_none() => {
                    children = Some(match w.next()? {
                        Token::Null => Children::None,
                        Token::String(s) => {
                            let target = s.strip_prefix("$ref:")?.trim();
                            if target.is_empty() {
                                return None;
                            }
                            Children::Ref {
                                target: target.to_string(),
                                range: w.range(),
                            }
                        }
                        Token::OpenBracket if depth < MAX_DEPTH => {
                            Children::Inline(w.entries(depth + 1)?)
                        }
                        _ => return None,
                    })
                }
                "id" | "section" | "description" | "status" | "children" => return None,
                _ => {
                    let t = w.next()?;
                    w.skip(t, depth + 2)?;
                }
            }
            Some(())
        })?;
        let (id, id_range) = id?;
        let (status, status_range) = match status {
            Some((s, r)) => (s, Some(r)),
            None => (TaskStatus::Pending, None),
        };
        Some(RawEntry {
            id,
            id_range,
            section: section.unwrap_or_default(),
            description: description.unwrap_or_default(),
            status,
            status_range,
            children: children.unwrap_or(Children::None),
        })
    }

    /// A string (or null, read as empty).
    fn text(&mut self) -> Option<String> {
        match self.next()? {
            // An unescaped string was built with spare room: kept for the
            // whole run, 10,000 descriptions' spare room is most of a MB.
            Token::String(Cow::Owned(mut s)) => {
                s.shrink_to_fit();
                Some(s)
            }
            Token::String(Cow::Borrowed(s)) => Some(s.to_owned()),
            Token::Null => Some(String::new()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::parse::parse_file_ast;
    use super::*;
    use proptest::prelude::*;
    use std::path::Path;

    const FIXTURES: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/spectr-upstream/changes"
    );

    fn fixture_texts() -> Vec<String> {
        let mut out = Vec::new();
        let root = Path::new(FIXTURES);
        for change in std::fs::read_dir(root).unwrap() {
            let change = change.unwrap().path();
            let mut names: Vec<_> = std::fs::read_dir(&change)
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|e| e == "jsonc"))
                .collect();
            names.sort();
            for p in names {
                out.push(std::fs::read_to_string(p).unwrap());
            }
        }
        out
    }

    /// Whenever the fast path answers, the AST parser agrees exactly.
    fn agrees(text: &str) -> Result<bool, TestCaseError> {
        let Some(fast) = parse(text) else {
            return Ok(false);
        };
        match parse_file_ast(Path::new("t.jsonc"), text) {
            Ok(slow) => {
                prop_assert_eq!(format!("{fast:?}"), format!("{slow:?}"));
                Ok(true)
            }
            Err(e) => Err(TestCaseError::fail(format!(
                "fast path accepted what the parser rejects: {e}\n{text}"
            ))),
        }
    }

    #[test]
    fn fixtures_take_the_fast_path() {
        let texts = fixture_texts();
        assert_eq!(texts.len(), 8);
        for t in &texts {
            assert!(agrees(t).unwrap(), "fast path declined a fixture:\n{t}");
        }
    }

    #[test]
    fn unusual_input_falls_back() {
        for t in [
            "{\"tasks\": [{\"id\": 1}]}",
            "{\"tasks\": [{\"id\": \"1\", \"status\": \"done\"}]}",
            "{\"tasks\": [{\"id\": \"1\" \"status\": \"pending\"}]}",
            "{\"tasks\": [], \"tasks\": []}",
            "{\"tasks\": [{\"id\": \"1\", \"id\": \"2\"}]}",
            "{\"tasks\": [,]}",
            "{tasks: []}",
            "{\"tasks\": []} {}",
            "{\"tasks\": [{\"id\": \"\"}]}",
            "[]",
            "",
        ] {
            assert!(parse(t).is_none(), "{t}");
        }
        for t in [
            "{\"tasks\": [],}",
            "// c\n{\"tasks\": [{\"id\": \"1\", /* x */ \"extra\": {\"a\": [1, null, true]},},], \"v\": -1.5e3} // end",
            "\u{feff}{\"tasks\": []}",
        ] {
            assert!(agrees(t).unwrap(), "{t}");
        }
    }

    fn token() -> impl Strategy<Value = &'static str> {
        prop::sample::select(vec![
            "{",
            "}",
            "[",
            "]",
            ",",
            ":",
            "\"tasks\"",
            "\"id\"",
            "\"status\"",
            "\"children\"",
            "\"parent\"",
            "\"includes\"",
            "\"section\"",
            "\"description\"",
            "\"$ref:a.jsonc\"",
            "\"pending\"",
            "\"completed\"",
            "\"1\"",
            "\"1.1\"",
            "\"\"",
            "\" \"",
            "1",
            "-0.5",
            "null",
            "true",
            "x",
            "// c\n",
            "/* c */",
            "\"\\u003c\"",
            "\"\\n\"",
            " ",
            "\n",
        ])
    }

    /// Token soup that often forms valid files.
    fn soup() -> impl Strategy<Value = String> {
        prop::collection::vec(token(), 0..48).prop_map(|v| v.concat())
    }

    /// A valid file, with a random extra member in some tasks (then maybe not
    /// valid any more). Also says whether the fast path must accept it.
    fn valid() -> impl Strategy<Value = (String, bool)> {
        let task = (
            prop::sample::select(vec!["1", "1.2", "2.10", " 3 "]),
            prop::sample::select(vec!["pending", "in_progress", "completed"]),
            prop::option::of(soup()),
            any::<bool>(),
        )
            .prop_map(|(id, st, extra, trailing)| {
                let plain = extra.is_none();
                let extra = extra.map(|x| format!(", \"x\": {x}")).unwrap_or_default();
                let comma = if trailing { "," } else { "" };
                (
                    format!("{{\"id\": \"{id}\", \"status\": \"{st}\"{extra}{comma}}}"),
                    plain,
                )
            });
        prop::collection::vec(task, 0..5).prop_map(|ts| {
            let plain = ts.iter().all(|t| t.1);
            let body: Vec<String> = ts.into_iter().map(|t| t.0).collect();
            (
                format!("// h\n{{\"version\": 2, \"tasks\": [{}]}}", body.join(",")),
                plain,
            )
        })
    }

    proptest! {
        #[test]
        fn fast_path_agrees_with_the_parser(text in soup()) {
            agrees(&text)?;
        }

        #[test]
        fn fast_path_takes_valid_files((text, plain) in valid()) {
            let took = agrees(&text)?;
            if plain {
                prop_assert!(took, "declined a plain valid file:\n{}", text);
            }
        }
    }
}
