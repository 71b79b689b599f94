//! The git engine for isolated checkouts: every git operation a child working in its own
//! checkout needs, over the `git` CLI (2.40 or newer).
//!
//! Pure, synchronous functions with typed results and one error type
//! ([`CheckoutError`], a stable `code()` each); no broker, store or MCP code. The
//! lifecycle, in order:
//!
//! - [`probe`]: can this workspace be isolated at all?
//! - [`prepare`]: a `git clone --shared --no-checkout` of the workspace's repository into
//!   the caller's directory, its base (HEAD plus uncommitted changes, or a named revision)
//!   checked out detached, submodules initialized, included ignored files copied, heavy
//!   ignored directories linked. The child's own git commands work and write only there.
//! - [`record`]: the checkout's files as a commit on the base, read without trusting the
//!   checkout's `.git`.
//! - [`diff_chunk`]: that change's patch, a page at a time.
//! - [`apply`]: the change into the workspace, all or nothing.
//! - [`remove`], [`disk_usage`], [`refs_under`]: cleanup and accounting, never following
//!   symlinks.
//!
//! Every git call runs with a fixed environment (no system config, no prompt, no pager,
//! no optional locks, `LC_ALL=C`, stdin closed); git's stderr, bounded, is in the error.

mod apply;
mod changes;
mod diff;
mod error;
mod exclude;
mod git;
mod include;
mod oid;
mod placing;
mod prepare;
mod probe;
mod record;
mod refs;
mod remove;
mod shared;
mod snapshot;
mod submodules;

pub use apply::{Applied, ApplyMode, ConflictPath, ConflictReason, apply};
pub use changes::{Change, ChangedFile, FileStatus};
pub use diff::{DiffChunk, diff_chunk};
pub use error::CheckoutError;
pub use include::INCLUDE_FILE;
pub use oid::Oid;
pub use prepare::{Base, PrepareRequest, Prepared, prepare};
pub use probe::{MIN_GIT, RepoInfo, probe};
pub use record::{RecordRequest, Recorded, record};
pub use refs::refs_under;
pub use remove::{disk_usage, remove};
