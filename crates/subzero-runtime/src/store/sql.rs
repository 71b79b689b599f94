//! How values cross SQL: typed both ways, columns read by name.
//!
//! Every enum and id the store keeps (states, checkout states, git object ids, statuses, phases, ownership, APIs, error
//! codes, event kinds, ids, digests, timestamps) is bound and read through `ToSql` /
//! `FromSql` of [`Sql`], never as a string its caller must remember to spell or parse;
//! a stored value that does not parse is a typed conversion error naming the column, never
//! a default. A row type reads each of its columns by name ([`Column`]), and its column
//! list is declared once, with the struct ([`table_row!`](crate::store::rows)).

use rusqlite::Row;
use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSql, ToSqlOutput, ValueRef};
use subzero_core::events::EventKind;
use subzero_core::lifecycle::GitOid;
use subzero_core::{
    ArtifactId, CheckoutState, ChildId, ChildState, ErrorCode, EventSeq, Ownership, Phase, RunId,
    RunStatus, Sha256Digest,
};
use subzero_protocol as p;

/// A value that the store writes as text: its stored spelling.
pub(crate) trait ToText {
    /// The stored spelling.
    fn to_text(&self) -> String;
}

impl<T: ToText + ?Sized> ToText for &T {
    fn to_text(&self) -> String {
        (**self).to_text()
    }
}

/// A value that the store keeps as text: its stored spelling and the one parse of it.
pub(crate) trait SqlText: ToText + Sized {
    /// What the value is, for conversion errors.
    const WHAT: &'static str;
    /// The value a stored spelling names, if any.
    fn from_text(text: &str) -> Option<Self>;
}

/// `T` as a SQL parameter or column value.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sql<T>(pub T);

impl<T: ToText> ToSql for Sql<T> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::from(self.0.to_text()))
    }
}

impl<T: SqlText> FromSql for Sql<T> {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        let text = value.as_str()?;
        T::from_text(text).map(Sql).ok_or_else(|| {
            FromSqlError::Other(format!("stored {} {text:?} is not valid", T::WHAT).into())
        })
    }
}

macro_rules! sql_text {
    ($($ty:ty => $what:literal, |$v:ident| $to:expr, |$t:ident| $from:expr;)+) => {$(
        impl ToText for $ty {
            fn to_text(&self) -> String {
                let $v = self;
                $to
            }
        }
        impl SqlText for $ty {
            const WHAT: &'static str = $what;
            fn from_text($t: &str) -> Option<Self> {
                $from
            }
        }
    )+};
}

sql_text! {
    ChildState => "child state", |v| v.as_str().to_owned(), |t| ChildState::parse(t);
    CheckoutState => "checkout state", |v| v.as_str().to_owned(), |t| CheckoutState::parse(t);
    GitOid => "git object id", |v| v.as_str().to_owned(), |t| GitOid::parse(t).ok();
    RunStatus => "run status", |v| v.as_str().to_owned(), |t| RunStatus::parse(t);
    Ownership => "ownership", |v| v.as_str().to_owned(), |t| Ownership::parse(t);
    Phase => "phase", |v| v.as_str().to_owned(), |t| Phase::parse(t);
    ErrorCode => "error code", |v| v.as_str().to_owned(), |t| ErrorCode::parse(t);
    EventKind => "event type", |v| v.as_str().to_owned(), |t| EventKind::parse(t);
    ChildId => "child id", |v| v.to_string(), |t| ChildId::parse(t).ok();
    RunId => "run id", |v| v.to_string(), |t| RunId::parse(t).ok();
    ArtifactId => "artifact id", |v| v.to_string(), |t| ArtifactId::parse(t).ok();
    Sha256Digest => "digest", |v| v.to_string(), |t| Sha256Digest::parse(t).ok();
    p::ModelApi => "model API", |v| v.to_string(), |t| t.parse().ok();
    p::Timestamp => "timestamp", |v| v.to_string(), |t| p::Timestamp::try_from(t).ok();
}

/// A value read from a row by column name (or, for a value kept in several columns,
/// from those columns).
pub(crate) trait Column: Sized {
    /// The columns a `SELECT` must name for a field `name` of this type.
    fn names(name: &'static str) -> Vec<&'static str> {
        vec![name]
    }

    /// The value of field `name` in `row`.
    fn read(row: &Row<'_>, name: &'static str) -> rusqlite::Result<Self>;
}

impl<T: SqlText> Column for T {
    fn read(row: &Row<'_>, name: &'static str) -> rusqlite::Result<Self> {
        Ok(row.get::<_, Sql<T>>(name)?.0)
    }
}

impl<T: SqlText> Column for Option<T> {
    fn read(row: &Row<'_>, name: &'static str) -> rusqlite::Result<Self> {
        Ok(row.get::<_, Option<Sql<T>>>(name)?.map(|v| v.0))
    }
}

macro_rules! plain_column {
    ($($ty:ty),+) => {$(
        impl Column for $ty {
            fn read(row: &Row<'_>, name: &'static str) -> rusqlite::Result<Self> {
                row.get(name)
            }
        }
    )+};
}

plain_column!(String, Option<String>, bool, Option<u32>);

/// A count, stored as SQLite's signed integer; a negative one is a conversion error.
fn count(row: &Row<'_>, name: &'static str, value: i64) -> rusqlite::Result<u64> {
    u64::try_from(value).map_err(|e| conversion(row, name, e))
}

impl Column for u64 {
    fn read(row: &Row<'_>, name: &'static str) -> rusqlite::Result<Self> {
        count(row, name, row.get(name)?)
    }
}

impl Column for Option<u64> {
    fn read(row: &Row<'_>, name: &'static str) -> rusqlite::Result<Self> {
        row.get::<_, Option<i64>>(name)?
            .map(|v| count(row, name, v))
            .transpose()
    }
}

impl Column for EventSeq {
    fn read(row: &Row<'_>, name: &'static str) -> rusqlite::Result<Self> {
        Ok(EventSeq::new(u64::read(row, name)?))
    }
}

impl Column for serde_json::Value {
    fn read(row: &Row<'_>, name: &'static str) -> rusqlite::Result<Self> {
        let text: String = row.get(name)?;
        serde_json::from_str(&text).map_err(|e| conversion(row, name, e))
    }
}

/// A conversion error of column `name` (by its index, as rusqlite reports them).
pub(crate) fn conversion(
    row: &Row<'_>,
    name: &str,
    err: impl Into<Box<dyn std::error::Error + Send + Sync>>,
) -> rusqlite::Error {
    let index = row.as_ref().column_index(name).unwrap_or(usize::MAX);
    rusqlite::Error::FromSqlConversionFailure(index, rusqlite::types::Type::Text, err.into())
}

/// Read a typed column by name: `row.col::<ChildState>("state")`.
pub(crate) trait RowExt {
    /// The value of column `name`.
    fn col<T: Column>(&self, name: &'static str) -> rusqlite::Result<T>;
}

impl RowExt for Row<'_> {
    fn col<T: Column>(&self, name: &'static str) -> rusqlite::Result<T> {
        T::read(self, name)
    }
}

/// A `u64` count as SQLite's signed integer (saturating; counts never get near it).
pub(crate) fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}
