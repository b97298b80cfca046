//! Splits `--agent-cmd` into words the way a POSIX shell would quote them,
//! without running a shell: `'…'` is literal, `"…"` allows `\"`, `\\`, `\$`
//! and `` \` `` escapes, a backslash outside quotes escapes the next
//! character. Nothing is expanded (no `$VAR`, globs, pipes or redirections):
//! the words go to the program exactly as written, so a `{prompt_file}` path
//! with spaces can never be re-split. Wrap the command in `sh -c '…'` when
//! shell features are wanted.

/// The words of `line`, or why it cannot be split.
pub fn split(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    // A word exists once anything (even `''`) was seen since the last blank.
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\n' | '\r' => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err("unterminated single quote".to_string()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => word.push(c),
                            Some('\n') => {}
                            Some(c) => {
                                word.push('\\');
                                word.push(c);
                            }
                            None => return Err("unterminated double quote".to_string()),
                        },
                        Some(c) => word.push(c),
                        None => return Err("unterminated double quote".to_string()),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some('\n') => {}
                    Some(c) => word.push(c),
                    None => return Err("a trailing backslash escapes nothing".to_string()),
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::split;

    fn ok(s: &str) -> Vec<String> {
        split(s).unwrap()
    }

    #[test]
    fn plain_words() {
        assert_eq!(ok("  my-agent --yes  -x "), ["my-agent", "--yes", "-x"]);
        assert!(ok("   ").is_empty());
    }

    #[test]
    fn quotes_and_escapes() {
        assert_eq!(
            ok(r#"a 'b c' "d \"e\" $f" g\ h"#),
            ["a", "b c", "d \"e\" $f", "g h"]
        );
        assert_eq!(ok(r#"x '' "" y"#), ["x", "", "", "y"]);
        assert_eq!(
            ok(r#"--file={prompt_file} 'it'"'"'s'"#),
            ["--file={prompt_file}", "it's"]
        );
        assert_eq!(ok(r#""a\nb""#), ["a\\nb"]);
        assert_eq!(ok("sh -c 'cat | wc -l'"), ["sh", "-c", "cat | wc -l"]);
    }

    #[test]
    fn errors() {
        assert!(split("a 'b").is_err());
        assert!(split("a \"b").is_err());
        assert!(split("a \\").is_err());
    }
}
