//! The table of top-level schemas: each file stem of `schema-src/v1/` with a root type,
//! and that Rust type. Generated as [`crate::v1::visit_roots`].

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::Validate;

/// Receives every root type; implement it to do something per top-level schema.
pub trait RootVisitor {
    /// Called once per top-level schema, in stem order.
    fn visit<T>(&mut self, stem: &'static str)
    where
        T: JsonSchema + Serialize + DeserializeOwned + Validate + 'static;
}
