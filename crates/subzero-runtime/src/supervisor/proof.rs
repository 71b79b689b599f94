//! Where the runtime mints the core's capability tokens — and why this module has no
//! function that does.
//!
//! The core's tokens stand for evidence: `StopConfirmed` for a worker's
//! `cancel_confirmed`, `LeafRecorded` for its `leaf_committed`, `WorkerCapabilities`
//! (and through it `Steering`) for its `hello`, `ObservedLeaf` for a transcript leaf
//! read from disk. The store accepts `stopped` and `completed` settlements, and a resume,
//! only with these tokens, so a stop cannot be recorded without the worker's cancel
//! confirmation, a completion without its committed leaf, or a resume without reading
//! the transcript.
//!
//! The only minting authority is the core's `unsafe fn Supervisor::designate`, and the
//! runtime calls it inline, as `unsafe { Supervisor::designate() }.<token>(…)` under a
//! `// SAFETY:` comment, at exactly the points that observe the evidence:
//!
//! * `broker::worker` — the driver that reads the worker's control lines: the parsed
//!   `hello` (`capabilities`), `cancel_confirmed` of the run the worker reported
//!   stopped (`confirm_stop`), and the run's `leaf_committed` when it completes
//!   (`leaf_recorded`);
//! * `broker::checkpoint` — the resume path's transcript read (`observed_leaf`).
//!
//! There is deliberately no public (or crate-wide) helper here: a function that mints
//! from its arguments would let any caller assert evidence it never saw, which is what
//! the ui-tests show cannot compile from outside. `crates/subzero-core/tests/capabilities.rs`
//! lists these mint points and fails when one is added elsewhere, lacks its `SAFETY`
//! comment, or hands the authority on.
