//! Redaction of the model key and configured secrets from everything the worker writes.
//!
//! One process-wide secret set: every outbound control line, transcript line and log line goes
//! through [`redact`]. Streams use [`StreamRedactor`], which holds back a tail so that a secret
//! split across deltas is still caught.

use std::sync::{PoisonError, RwLock};

/// What a secret is replaced with.
pub const PLACEHOLDER: &str = "[REDACTED]";

static SECRETS: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Adds secrets (ignoring empty strings). Their JSON-escaped forms are added too, so a secret
/// containing a quote or backslash is caught inside serialized lines as well.
pub fn add_secrets<'a>(secrets: impl IntoIterator<Item = &'a str>) {
    let mut set = SECRETS.write().unwrap_or_else(PoisonError::into_inner);
    for secret in secrets {
        if secret.is_empty() {
            continue;
        }
        let mut forms = vec![secret.to_owned()];
        if let Ok(json) = serde_json::to_string(secret) {
            let escaped = &json[1..json.len() - 1];
            if escaped != secret {
                forms.push(escaped.to_owned());
            }
        }
        for form in forms {
            if !set.contains(&form) {
                set.push(form);
            }
        }
    }
    // Longest first, so a secret that contains another is replaced whole.
    set.sort_by_key(|s| std::cmp::Reverse(s.len()));
}

fn longest_secret() -> usize {
    SECRETS
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .first()
        .map_or(0, String::len)
}

/// Replaces every known secret in `text`.
pub fn redact(text: &str) -> String {
    let set = SECRETS.read().unwrap_or_else(PoisonError::into_inner);
    let mut out = text.to_owned();
    for secret in set.iter() {
        if out.contains(secret.as_str()) {
            out = out.replace(secret.as_str(), PLACEHOLDER);
        }
    }
    out
}

/// Redacts a stream of text chunks, holding back `longest secret - 1` bytes so a secret split
/// across chunks is replaced before any of it is released.
#[derive(Debug, Default)]
pub struct StreamRedactor {
    pending: String,
}

impl StreamRedactor {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds a chunk; returns the text that is now safe to release.
    pub fn push(&mut self, chunk: &str) -> String {
        self.pending.push_str(chunk);
        self.pending = redact(&self.pending);
        let hold = longest_secret().saturating_sub(1);
        if self.pending.len() <= hold {
            return String::new();
        }
        let mut cut = self.pending.len() - hold;
        while !self.pending.is_char_boundary(cut) {
            cut -= 1;
        }
        let rest = self.pending.split_off(cut);
        std::mem::replace(&mut self.pending, rest)
    }

    /// Releases whatever is held back.
    pub fn finish(&mut self) -> String {
        redact(&std::mem::take(&mut self.pending))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_split_across_chunks_is_never_released() {
        add_secrets(["sk-test-split-0123456789"]);
        let mut r = StreamRedactor::new();
        let mut out = String::new();
        for chunk in ["hello sk-test-sp", "lit-0123", "456789 world"] {
            out.push_str(&r.push(chunk));
        }
        out.push_str(&r.finish());
        assert_eq!(out, format!("hello {PLACEHOLDER} world"));
    }

    #[test]
    fn a_secret_with_a_quote_is_redacted_in_json() {
        add_secrets(["ab\"cdef-secret"]);
        let line = serde_json::json!({ "ab\"cdef-secret": 1 }).to_string();
        assert!(!redact(&line).contains("cdef-secret"));
    }
}
