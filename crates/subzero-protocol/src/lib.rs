//! Subzero's wire types, generated from `schema-src/v1/` by `cargo xtask codegen`.
//!
//! Every type derives serde and schemars 1 `JsonSchema`, so rmcp can use the tool inputs
//! and outputs directly as parameters and structured content, and the worker reads and
//! writes the control messages with them. Serde enforces what the schemas say about
//! shapes, patterns and string lengths; [`Validate`] enforces the bounds serde cannot
//! (integer maxima, byte lengths) and names the offending field.
//!
//! Module map (all types are also re-exported at the crate root):
//! - MCP tools: [`InfoInput`]→[`Info`], [`SpawnInput`]→[`SpawnOutput`],
//!   [`GetInput`]→[`ChildSnapshot`], [`ListInput`]→[`ListOutput`] (of [`ChildSummary`]),
//!   [`SendInput`]→[`SendOutput`], [`StopInput`]→[`StopOutput`],
//!   [`ResumeInput`]→[`ResumeOutput`], [`OutputInput`]→[`ArtifactChunk`].
//! - Events and errors: [`ChildEvent`], [`ErrorBody`] with [`ErrorCode`].
//! - Worker control: [`BrokerMessage`] (stdin of the worker), [`WorkerMessage`] (its
//!   stdout) with [`WorkerEvent`].
//! - Templates and configuration: [`UserTemplate`], [`GrantSnapshot`], [`Config`].
//! - With feature `core`: `From`/`TryFrom` between `subzero-core`'s values and these types
//!   (`convert`).

// The generated code is prettyplease output; `cargo xtask check` compares it byte for byte,
// so rustfmt must leave it alone. Its only `unwrap`s compile the schema's own regex
// literals (checked by codegen), never external input.
#[rustfmt::skip]
#[allow(
    clippy::all,
    clippy::unwrap_used,
    clippy::pedantic,
    missing_debug_implementations,
    unused_imports,
    dead_code,
    missing_docs
)]
#[path = "../../../generated/rust/mod.rs"]
pub mod v1;

pub mod advertised;
#[cfg(any(feature = "core", test))]
pub mod convert;
pub mod defaults;
mod event;
pub mod export;
pub mod roots;
pub mod schema_fix;
pub mod secret;
mod summary;
pub mod timestamp;
pub mod transcript;
pub mod validate;

pub use secret::{ApiKey, SecretText};
pub use v1::*;
pub use validate::{InvalidRequest, Validate};

/// The crate's test suite (`tests/testsuite/`, a module per area) is compiled into its
/// unit-test binary, so the crate links one test binary, not two; the suite names the crate
/// by its name, as an outside user would.
#[cfg(test)]
extern crate self as subzero_protocol;
#[cfg(test)]
#[path = "../tests/testsuite/mod.rs"]
mod testsuite;
