//! Object ids computed without git, where asking git would cost a process
//! for a few bytes: a blob's id is the SHA-1 of `blob <len>\0` and its bytes.
//! Only for SHA-1 repositories; a SHA-256 one gets `None` and asks git.

use sha1::{Digest, Sha1};

/// The id git gives a blob of `bytes` (as `git hash-object --no-filters`).
pub(crate) fn blob_id(bytes: &[u8], hash_len: usize) -> Option<String> {
    if hash_len != 20 {
        return None;
    }
    let mut hasher = Sha1::new();
    hasher.update(format!("blob {}\0", bytes.len()).as_bytes());
    hasher.update(bytes);
    Some(hex(&hasher.finalize()))
}

/// Lower-case hex, as git prints ids.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::process::{Command, Stdio};

    #[test]
    fn a_blob_id_is_gits() {
        for bytes in [
            &b""[..],
            b"a",
            b"{ \"version\": 1 }\n",
            &[0, 159, 255, 10][..],
        ] {
            let mut child = Command::new("git")
                .args(["hash-object", "--no-filters", "--stdin"])
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("git hash-object");
            child.stdin.take().unwrap().write_all(bytes).unwrap();
            let out = child.wait_with_output().unwrap();
            let git = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            assert_eq!(
                blob_id(bytes, 20).as_deref(),
                Some(git.as_str()),
                "{bytes:?}"
            );
        }
        assert_eq!(blob_id(b"a", 32), None, "SHA-256: git is asked");
    }
}
