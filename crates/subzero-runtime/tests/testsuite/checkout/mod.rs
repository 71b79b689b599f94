//! The checkout engine over real git repositories in temporary directories.

mod apply;
mod apply_conflicts;
mod diff;
mod prepare;
mod probe;
mod record;
mod remove;
mod support;
