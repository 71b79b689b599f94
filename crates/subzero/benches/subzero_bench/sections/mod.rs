//! The bench's sections, one module each, in the order they run: each measures its
//! scenarios and puts the figures, ratios and notes in the [`Sink`](crate::sink::Sink).

pub mod host;
pub mod install;
pub mod isolation;
pub mod lean;
pub mod processes;
pub mod real_model;
pub mod store;
