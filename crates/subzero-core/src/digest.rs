//! SHA-256 content digests in their readable `sha256:<hex>` form.
//!
//! Digests name transcript leaves and grant snapshots. Two digests are equal exactly
//! when their bytes are; the text form is lowercase hex so stored and recomputed values
//! compare as strings too.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest as _, Sha256};

/// Why a piece of text is not a `sha256:<64 hex>` digest.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "digest `{shown}` is malformed: expected `sha256:` followed by 64 lowercase hex characters"
)]
pub struct DigestParseError {
    shown: String,
}

/// A SHA-256 digest.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Sha256Digest([u8; 32]);

impl Sha256Digest {
    /// The textual prefix.
    pub const PREFIX: &'static str = "sha256:";

    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Self(Sha256::digest(bytes).into())
    }

    /// Parse the `sha256:<hex>` form (lowercase hex only, so the text form is unique).
    pub fn parse(text: &str) -> Result<Self, DigestParseError> {
        let malformed = || DigestParseError {
            shown: text.chars().take(80).collect(),
        };
        let body = text.strip_prefix(Self::PREFIX).ok_or_else(malformed)?;
        if body.len() != 64 || body.bytes().any(|b| b.is_ascii_uppercase()) {
            return Err(malformed());
        }
        let mut raw = [0u8; 32];
        hex::decode_to_slice(body, &mut raw).map_err(|_| malformed())?;
        Ok(Self(raw))
    }
}

impl fmt::Display for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", Self::PREFIX, hex::encode(self.0))
    }
}

impl fmt::Debug for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl Serialize for Sha256Digest {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Sha256Digest {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// The canonical JSON text of `value`: object keys sorted by their UTF-8 bytes at every
/// depth, no insignificant whitespace, strings and numbers as `serde_json` writes them.
/// Equal values always give equal text, whatever order their keys were inserted in.
pub fn canonical_json(value: &serde_json::Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &serde_json::Value, out: &mut String) {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(item, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn canonical_json_sorts_keys_at_every_depth() {
        let v = serde_json::json!({"b": 1, "a": {"d": [1, {"z": null, "y": "é"}], "c": true}});
        assert_eq!(
            canonical_json(&v),
            r#"{"a":{"c":true,"d":[1,{"y":"é","z":null}]},"b":1}"#
        );
    }

    use super::*;

    #[test]
    fn digests_round_trip_through_text() {
        let d = Sha256Digest::of(b"abc");
        assert_eq!(
            d.to_string(),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(Sha256Digest::parse(&d.to_string()), Ok(d));
    }

    #[test]
    fn uppercase_short_and_unprefixed_digests_are_malformed() {
        let upper = Sha256Digest::of(b"abc").to_string().to_uppercase();
        assert!(Sha256Digest::parse(&upper).is_err());
        assert!(Sha256Digest::parse("sha256:abcd").is_err());
        assert!(Sha256Digest::parse("ba7816bf").is_err());
    }
}
