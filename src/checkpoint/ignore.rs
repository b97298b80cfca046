//! The checkpoint's ignore rules as one exclude file, so a revert decides
//! what is ignored as the checkpoint did: an agent that empties, deletes,
//! renames or symlinks a `.gitignore` cannot make a revert snapshot (or
//! delete) a `.env` or `node_modules/`.
//!
//! Precedence as git's: `core.excludesFile`, then `.git/info/exclude`, then
//! each `.gitignore` of the checkpoint tree from the top down, the last match
//! winning (`git ls-files --exclude-from` reads one file that way). A pattern
//! of `d/.gitignore` is rewritten relative to the top: `p` without a slash
//! becomes `d/**/p`, `/p` or `a/p` becomes `d/p` / `d/a/p`.

/// One `.gitignore` of the checkpoint: its directory (`""` or ending in `/`)
/// and its bytes.
pub(crate) struct IgnoreFile {
    pub(crate) dir: Vec<u8>,
    pub(crate) content: Vec<u8>,
}

/// Builds the exclude file's bytes. `global` and `info_exclude` are the
/// contents of `core.excludesFile` and `.git/info/exclude` when present.
pub(crate) fn assemble(
    global: Option<&[u8]>,
    info_exclude: Option<&[u8]>,
    mut files: Vec<IgnoreFile>,
) -> Vec<u8> {
    let mut out = Vec::new();
    for content in [global, info_exclude].into_iter().flatten() {
        push_lines(&mut out, b"", content);
    }
    // Parents before children: a deeper file's match must come later.
    files.sort_by(|a, b| {
        let depth = |d: &[u8]| d.iter().filter(|&&c| c == b'/').count();
        depth(&a.dir).cmp(&depth(&b.dir)).then(a.dir.cmp(&b.dir))
    });
    for f in &files {
        push_lines(&mut out, &f.dir, &f.content);
    }
    out
}

fn push_lines(out: &mut Vec<u8>, dir: &[u8], content: &[u8]) {
    let content = content.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(content);
    for line in content.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() || line[0] == b'#' {
            continue;
        }
        if dir.is_empty() {
            out.extend_from_slice(line);
        } else {
            rewrite(out, dir, line);
        }
        out.push(b'\n');
    }
}

fn rewrite(out: &mut Vec<u8>, dir: &[u8], line: &[u8]) {
    let (neg, pat) = match line.strip_prefix(b"!") {
        Some(rest) => (true, rest),
        None => (false, line),
    };
    if neg {
        out.push(b'!');
    }
    for &c in dir {
        if matches!(c, b'*' | b'?' | b'[' | b'\\') {
            out.push(b'\\');
        }
        out.push(c);
    }
    let body = pat.strip_suffix(b"/").unwrap_or(pat);
    if let Some(anchored) = pat.strip_prefix(b"/") {
        out.extend_from_slice(anchored);
    } else if body.contains(&b'/') {
        out.extend_from_slice(pat);
    } else {
        out.extend_from_slice(b"**/");
        out.extend_from_slice(pat);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_patterns_are_anchored_to_their_directory() {
        let files = vec![
            IgnoreFile {
                dir: b"sub/".to_vec(),
                content: b"# c\n*.log\n/only-here\nbuild/\na/b\n!keep.log\r\n".to_vec(),
            },
            IgnoreFile {
                dir: Vec::new(),
                content: b"\xEF\xBB\xBF.env\nnode_modules/\n".to_vec(),
            },
            IgnoreFile {
                dir: b"w[1]/".to_vec(),
                content: b"x\n".to_vec(),
            },
        ];
        let out = assemble(Some(b"*.swp\n"), None, files);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "*.swp\n.env\nnode_modules/\nsub/**/*.log\nsub/only-here\nsub/**/build/\nsub/a/b\n!sub/**/keep.log\nw\\[1]/**/x\n"
        );
    }
}
