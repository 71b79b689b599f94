//! The JSON Schemas the Rust types actually produce (schemars 1, draft 2020-12): what rmcp
//! advertises for tool parameters and structured output, and what `generated/schemas/`
//! holds.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::Validate;
use crate::roots::RootVisitor;

/// The `$id` prefix of exported schemas (`urn:subzero:protocol:1:exported:<stem>`).
pub const EXPORTED_ID_PREFIX: &str = "urn:subzero:protocol:1:exported:";

/// The schema of `T` as exported: draft 2020-12, with an `$id`.
pub fn schema_of<T: JsonSchema>(stem: &str) -> Value {
    let generator = SchemaSettings::draft2020_12().into_generator();
    let schema = generator.into_root_schema_for::<T>();
    let mut value = schema.to_value();
    if let Some(map) = value.as_object_mut() {
        map.insert(
            "$id".to_string(),
            Value::String(format!("{EXPORTED_ID_PREFIX}{stem}")),
        );
    }
    value
}

/// Every top-level schema by file stem.
pub fn exported_schemas() -> BTreeMap<String, Value> {
    struct Export(BTreeMap<String, Value>);
    impl RootVisitor for Export {
        fn visit<T>(&mut self, stem: &'static str)
        where
            T: JsonSchema + Serialize + DeserializeOwned + Validate + 'static,
        {
            self.0.insert(stem.to_string(), schema_of::<T>(stem));
        }
    }
    let mut export = Export(BTreeMap::new());
    crate::v1::visit_roots(&mut export);
    export.0
}
