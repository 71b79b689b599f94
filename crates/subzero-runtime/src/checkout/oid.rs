//! Object ids and paths as git prints them.

use std::ffi::OsStr;
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::error::CheckoutError;

/// A git object id (SHA-1 or SHA-256), lower-case hex.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Oid(String);

impl Oid {
    /// Parse what git printed (surrounding whitespace allowed).
    pub fn parse(bytes: &[u8], command: &str) -> Result<Oid, CheckoutError> {
        let text = String::from_utf8_lossy(bytes);
        let hex = text.trim();
        let valid = matches!(hex.len(), 40 | 64)
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !valid {
            return Err(CheckoutError::unparsed(
                command,
                format!("expected an object id, got `{}`", bounded(hex, 80)),
            ));
        }
        Ok(Oid(hex.to_owned()))
    }

    /// The hex text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Oid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<OsStr> for Oid {
    fn as_ref(&self) -> &OsStr {
        OsStr::new(&self.0)
    }
}

/// A repository path exactly as git printed it (any bytes but NUL), losslessly.
pub(super) fn path_from_bytes(bytes: &[u8]) -> PathBuf {
    PathBuf::from(OsStr::from_bytes(bytes))
}

/// The bytes of a repository path, for git's input and for exclude files.
pub(super) fn path_bytes(path: &Path) -> &[u8] {
    path.as_os_str().as_bytes()
}

/// Split NUL-terminated records, dropping the empty tail.
pub(super) fn nul_records(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    let body = bytes.strip_suffix(b"\0").unwrap_or(bytes);
    body.split(|b| *b == 0).filter(|r| !r.is_empty())
}

/// At most `max` bytes of `text`, cut on a character boundary.
pub(super) fn bounded(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}
