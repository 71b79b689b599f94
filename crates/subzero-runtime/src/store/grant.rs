//! A child's frozen grant snapshot as the store holds it: the JSON spawn wrote, parsed into
//! the contract's `GrantSnapshot` once, when the row is read.

use rusqlite::Row;
use serde_json::Value;
use subzero_protocol::GrantSnapshot;

use super::sql::Column;

/// A child's frozen grant snapshot as the store holds it, parsed once when the row is read.
/// A stored value the contract refuses leaves the row readable (it is still listed and
/// shown); what needs the grant (resume) fails naming why.
#[derive(Clone, Debug)]
pub enum StoredSnapshot {
    /// The snapshot spawn froze.
    Grant(Box<GrantSnapshot>),
    /// Stored text that is not a `GrantSnapshot`: what the parser said.
    Unreadable(String),
}

impl StoredSnapshot {
    /// The snapshot of `text`, as spawn wrote it (JSON).
    pub fn parse(text: &str) -> Self {
        let grant =
            serde_json::from_str::<Value>(text).and_then(serde_json::from_value::<GrantSnapshot>);
        match grant {
            Ok(grant) => StoredSnapshot::Grant(Box::new(grant)),
            Err(e) => StoredSnapshot::Unreadable(e.to_string()),
        }
    }

    /// The snapshot, or why the stored one is not one.
    pub fn grant(&self) -> Result<&GrantSnapshot, &str> {
        match self {
            StoredSnapshot::Grant(grant) => Ok(grant),
            StoredSnapshot::Unreadable(why) => Err(why),
        }
    }
}

impl Column for StoredSnapshot {
    fn read(row: &Row<'_>, name: &'static str) -> rusqlite::Result<Self> {
        Ok(StoredSnapshot::parse(&row.get::<_, String>(name)?))
    }
}
