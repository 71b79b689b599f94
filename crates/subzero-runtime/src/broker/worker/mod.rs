//! Driving one child's worker: starting it, feeding it runs, recording what it reports,
//! and closing it when nothing is queued.
//!
//! One driver task per live worker. It is the only writer of that worker's stdin and
//! the only reader of its stdout, so the order of control messages is the order of
//! this task's decisions. The next queued run is dispatched by the same store
//! transaction that settles the previous one (after its leaf is recorded), so a run
//! never starts before its predecessor's result is durable.

mod driver;
mod phase;
mod reserve;
mod retire;
mod settle;
pub(in crate::broker) use settle::transient;
mod start;

pub(super) use start::{FirstRun, StartFrom, mcp_env};

/// Bytes of a result shown inline in `completed` events and `lastRun.preview`.
pub(in crate::broker) const PREVIEW_BYTES: usize = 2048;
