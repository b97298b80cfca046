//! JSON string literals taken from a line as written, unescaped in one pass.
//!
//! serde_json builds an escaped string in a scratch buffer that grows as it
//! goes and then copies it out; an agent's text (every line break escaped)
//! paid for both on every message. Here the literal's own length sizes the
//! result once. Anything unusual is left to serde_json.

/// The value of the JSON string literal `literal` (quotes included), or
/// `None` when it is not a plain string literal this reader is sure about
/// (then ask serde_json).
pub(crate) fn unescape(literal: &str) -> Option<String> {
    let inner = literal.strip_prefix('"')?.strip_suffix('"')?;
    let mut out = String::with_capacity(inner.len());
    let mut rest = inner;
    while let Some(at) = rest.find('\\') {
        let (plain, tail) = rest.split_at(at);
        if !clean(plain) {
            return None;
        }
        out.push_str(plain);
        let c = match tail.as_bytes().get(1)? {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let code = hex4(tail.get(2..6)?)?;
                rest = &tail[6..];
                // Surrogate pairs and lone surrogates: serde_json's call.
                out.push(char::from_u32(code)?);
                continue;
            }
            _ => return None,
        };
        out.push(c);
        rest = &tail[2..];
    }
    if !clean(rest) {
        return None;
    }
    out.push_str(rest);
    Some(out)
}

/// No quote or control character: text that may stand unescaped in a literal.
/// Branch-free, so the compiler vectorises it (texts are long, and clean).
fn clean(text: &str) -> bool {
    !text
        .bytes()
        .fold(false, |bad, b| bad | (b == b'"') | (b < 0x20))
}

fn hex4(digits: &str) -> Option<u32> {
    if digits.len() != 4 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(digits, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::unescape;

    #[test]
    fn reads_every_escape() {
        let literal = r#""a\"b\\c\/d\be\ff\ng\rh\ti\u00e9\u20ac""#;
        assert_eq!(
            unescape(literal).as_deref(),
            Some("a\"b\\c/d\u{8}e\u{c}f\ng\rh\ti\u{e9}\u{20ac}")
        );
        assert_eq!(unescape(r#""""#).as_deref(), Some(""));
    }

    #[test]
    fn leaves_the_unusual_to_serde_json() {
        for odd in [
            r#""\ud83d\ude00""#,
            r#""\ud83d""#,
            r#""\x""#,
            r#""\u12""#,
            "\"a\nb\"",
            r#"5"#,
            r#""abc"#,
        ] {
            assert_eq!(unescape(odd), None, "{odd}");
        }
    }

    proptest::proptest! {
        /// Whatever it answers is what serde_json reads.
        #[test]
        fn agrees_with_serde_json(text in "\\PC{0,40}", raw in "[a-z\\\\\"/ubnrtfd0-9]{0,20}") {
            let literal = serde_json::to_string(&text).expect("serialize");
            proptest::prop_assert_eq!(unescape(&literal), Some(text));
            let odd = format!("\"{raw}\"");
            if let Some(got) = unescape(&odd) {
                proptest::prop_assert_eq!(Some(got), serde_json::from_str::<String>(&odd).ok());
            }
        }
    }
}
