//! Identifiers as validated newtypes.
//!
//! Every id has a readable prefixed form (`ch_…`, `run_…`, `art_…`) followed by a
//! 26-character Crockford base32 ULID, so ids sort by creation time and a caller can
//! tell at a glance which kind of id it holds. Parsing is the only way to turn text
//! into an id; a malformed id is `invalid_request`, a well-formed unknown one is
//! `not_found` (decided by the store, not here).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use ulid::Ulid;

/// Why a piece of text is not an id of the expected kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{kind} `{shown}` is malformed: expected `{prefix}` followed by 26 Crockford base32 characters, e.g. `{prefix}01JH8Z6Q2V3W4X5Y6Z7A8B9C0D`"
)]
pub struct IdParseError {
    kind: &'static str,
    prefix: &'static str,
    shown: String,
}

impl IdParseError {
    /// The field-style name of the id kind (`childId`, `runId`, `artifactId`).
    pub fn kind(&self) -> &'static str {
        self.kind
    }
}

macro_rules! prefixed_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal, $kind:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(Ulid);

        impl $name {
            /// The textual prefix, including the underscore.
            pub const PREFIX: &'static str = $prefix;

            /// A fresh id, unique and ordered by creation time.
            pub fn generate() -> Self {
                Self(Ulid::new())
            }

            /// Parse the prefixed textual form.
            pub fn parse(text: &str) -> Result<Self, IdParseError> {
                let malformed = || IdParseError {
                    kind: $kind,
                    prefix: $prefix,
                    shown: shorten(text),
                };
                let body = text.strip_prefix($prefix).ok_or_else(malformed)?;
                if body.len() != 26 || !body.bytes().all(|b| b.is_ascii_alphanumeric()) {
                    return Err(malformed());
                }
                Ulid::from_string(body).map(Self).map_err(|_| malformed())
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}{}", $prefix, self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(self, f)
            }
        }

        impl FromStr for $name {
            type Err = IdParseError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Self::parse(s)
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = String::deserialize(d)?;
                Self::parse(&text).map_err(serde::de::Error::custom)
            }
        }
    };
}

prefixed_id!(
    /// A persistent child session.
    ChildId, "ch_", "childId"
);
prefixed_id!(
    /// One attempt to process one prompt in a child.
    RunId, "run_", "runId"
);
prefixed_id!(
    /// An opaque reference to a full result stored as a file.
    ArtifactId, "art_", "artifactId"
);

fn shorten(text: &str) -> String {
    const MAX: usize = 48;
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// A per-child event sequence number, and the cursor a reader passes back.
///
/// Sequence numbers start at 1 and strictly increase per child; cursor `0` means
/// "from the beginning". A reader that passes `n` receives events with `seq > n`.
#[derive(
    Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct EventSeq(u64);

impl EventSeq {
    /// The cursor before every event.
    pub const START: EventSeq = EventSeq(0);

    /// Wrap a raw sequence number.
    pub const fn new(raw: u64) -> Self {
        Self(raw)
    }

    /// The raw number.
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The sequence number that follows this one.
    #[must_use]
    pub const fn next(self) -> Self {
        Self(self.0 + 1)
    }
}

impl fmt::Display for EventSeq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_through_their_text_form() {
        let id = ChildId::generate();
        let text = id.to_string();
        assert!(text.starts_with("ch_"));
        assert_eq!(ChildId::parse(&text), Ok(id));
    }

    #[test]
    fn an_id_of_another_kind_is_malformed() {
        let run = RunId::generate().to_string();
        let err = ChildId::parse(&run).unwrap_err();
        assert_eq!(err.kind(), "childId");
        assert!(err.to_string().contains("expected `ch_`"));
    }

    #[test]
    fn garbage_is_malformed_and_shown_shortened() {
        let long = "x".repeat(500);
        let err = RunId::parse(&long).unwrap_err();
        assert!(err.to_string().len() < 300);
        assert!(RunId::parse("run_").is_err());
        assert!(RunId::parse("run_01JH8Z6Q2V3W4X5Y6Z7A8B9C0Ü").is_err());
    }

    #[test]
    fn ids_order_by_creation() {
        let a = RunId::generate();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = RunId::generate();
        assert!(a < b);
    }
}
