//! Conversions between `subzero-core`'s values and the wire types (feature `core`, which
//! the runtime enables; the worker speaks the wire types, and asks the core only for the
//! decisions it carries out).
//!
//! They live here because the orphan rule allows them only next to one of the two types,
//! and the core must not know the protocol. What a caller may rely on:
//! - The closed enums (`ChildState`, `RunStatus`, `ErrorCode`, built-in tool names) convert
//!   both ways with `From`; each match is exhaustive, so a variant added on one side only
//!   is a compile error here, not a wrong string on the wire.
//! - Ids and digests convert to the wire with `From`: the core's text forms always match
//!   the wire patterns (tested in `ids`). Back to the core they are `TryFrom`: the core's
//!   own parse stays the one judge of what an id is.
//! - Values the wire bounds more tightly than the core (the grant snapshot's texts, lists
//!   and limits) convert with `TryFrom`, failing with [`OutOfContract`] naming the field.
//! - Tool limits convert both ways with `TryFrom`: the core's are `u64`, the wire's are
//!   the schema's bounded integers (`processes` a `NonZeroU64`, the others `i64`).

mod enums;
mod grant_snapshot;
mod ids;
mod limits;

use std::fmt;

pub use enums::NotTerminal;
pub use grant_snapshot::network_grant;

/// A core value the wire bounds more tightly, named by its JSON path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutOfContract {
    field: String,
    problem: String,
}

impl OutOfContract {
    /// `field` (a JSON path such as `mcpServers[0].command`) is refused for `problem`.
    pub fn new(field: impl Into<String>, problem: impl fmt::Display) -> Self {
        Self {
            field: field.into(),
            problem: problem.to_string(),
        }
    }

    /// The JSON path of the refused value.
    pub fn field(&self) -> &str {
        &self.field
    }
}

impl fmt::Display for OutOfContract {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.problem)
    }
}

impl std::error::Error for OutOfContract {}
