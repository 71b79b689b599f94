//! A checkout as plain data: the git object ids it names, the change it carries and the
//! stored record [`AnyCheckout::load`](super::AnyCheckout::load) checks.

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error_code::{Coded, Described, ErrorCode};
use crate::ids::ChildId;
use crate::state::CheckoutState;

/// A git object id: 40 (SHA-1) or 64 (SHA-256) hex digits, kept in lowercase.
/// Deserializing validates like [`GitOid::parse`].
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct GitOid(String);

/// Why a text is not a git object id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitOidError {
    len: usize,
}

impl Described for GitOidError {
    fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a git object id is 40 or 64 hex digits, got {} characters; pass the full id `git rev-parse` prints",
            self.len
        )
    }
}

impl Coded for GitOidError {
    fn code(&self) -> ErrorCode {
        ErrorCode::InvalidRequest
    }
}

crate::coded_display!(GitOidError);
impl std::error::Error for GitOidError {}

impl GitOid {
    /// The id `text` spells: 40 or 64 hex digits, either case.
    pub fn parse(text: &str) -> Result<GitOid, GitOidError> {
        let well_formed =
            matches!(text.len(), 40 | 64) && text.bytes().all(|b| b.is_ascii_hexdigit());
        if !well_formed {
            return Err(GitOidError {
                len: text.chars().count(),
            });
        }
        Ok(GitOid(text.to_ascii_lowercase()))
    }

    /// The id in lowercase hex.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether both ids come from the same hash function (same length).
    pub fn same_kind(&self, other: &GitOid) -> bool {
        self.0.len() == other.0.len()
    }
}

impl TryFrom<String> for GitOid {
    type Error = GitOidError;
    fn try_from(text: String) -> Result<Self, Self::Error> {
        GitOid::parse(&text)
    }
}

impl From<GitOid> for String {
    fn from(oid: GitOid) -> Self {
        oid.0
    }
}

impl fmt::Display for GitOid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for GitOid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GitOid({})", self.0)
    }
}

/// The size of a change, as `git diff --shortstat` counts it.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DiffStats {
    /// Files changed.
    pub files_changed: u64,
    /// Lines added.
    pub insertions: u64,
    /// Lines removed.
    pub deletions: u64,
}

/// A recorded change: the commit that holds it and its size against the base.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChangeRecord {
    /// The checkout's head commit.
    pub head: GitOid,
    /// Its diff against the checkout's base.
    pub stats: DiffStats,
}

/// Where a checkout is and what it was made from; fixed when it is prepared.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CheckoutSite {
    /// The checkout's directory.
    pub path: PathBuf,
    /// The commit it was made from (a change is measured against it).
    pub base: GitOid,
    /// The main checkout's `HEAD` when it was prepared.
    pub workspace_head: GitOid,
    /// Whether the main checkout had uncommitted changes then.
    pub dirty: bool,
    /// Whether those uncommitted changes were carried into the checkout.
    pub carried: bool,
}

/// A checkout as stored: plain data, checked by
/// [`AnyCheckout::load`](super::AnyCheckout::load) (which needs the store's key).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CheckoutRecord {
    /// The child the checkout belongs to (one checkout per child).
    pub child: ChildId,
    /// Its state.
    pub state: CheckoutState,
    /// Where it is and what it was made from.
    pub site: CheckoutSite,
    /// The recorded change: present when settled with a change, applied or discarded,
    /// absent otherwise.
    pub change: Option<ChangeRecord>,
    /// The version of the stored row (bumped by every write of it), so a decision
    /// applies only to the row it was made from.
    pub version: u64,
}
