//! The JSON Schemas the Rust types actually produce (schemars 1, draft 2020-12): what rmcp
//! advertises for tool parameters and structured output, and what `generated/schemas/`
//! holds.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use schemars::Schema;
use schemars::generate::SchemaSettings;
use schemars::transform::RecursiveTransform;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::Validate;
use crate::roots::RootVisitor;

/// The `$id` prefix of exported schemas: the normative one (`urn:subzero:protocol:1:<stem>`).
/// An exported schema is another rendering of the same contract (`cargo xtask check` holds
/// every fixture to both), so it carries the same identity, and the major version a client
/// reads from an advertised tool schema's `$id` is the contract's. Register either the
/// normative files or the exported ones in one validator, never both.
pub const EXPORTED_ID_PREFIX: &str = "urn:subzero:protocol:1:";

/// The schema of `T` as exported: draft 2020-12 in its standard vocabulary only (see
/// [`crate::schema_fix::standard_vocabulary`]), with an `$id`.
pub fn schema_of<T: JsonSchema>(stem: &str) -> Value {
    let standard: fn(&mut Schema) = crate::schema_fix::standard_vocabulary;
    let absent: fn(&mut Schema) = crate::schema_fix::absent_not_null;
    let generator = SchemaSettings::draft2020_12()
        .with_transform(RecursiveTransform(standard))
        .with_transform(RecursiveTransform(absent))
        .into_generator();
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::schema_fix::nonstandard_vocabulary;

    /// Every `*.schema.json` under `dir` (relative to the workspace root), parsed.
    fn schema_files(dir: &str) -> Vec<(String, Value)> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(dir);
        let mut files: Vec<(String, Value)> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().ends_with(".schema.json"))
            .map(|e| {
                let text = std::fs::read_to_string(e.path()).expect("readable schema");
                let doc = serde_json::from_str(&text).expect("a JSON schema");
                (e.file_name().to_string_lossy().into_owned(), doc)
            })
            .collect();
        files.sort_by(|a, b| a.0.cmp(&b.0));
        files
    }

    #[test]
    fn published_schemas_use_only_the_standard_vocabulary() {
        let mut problems = Vec::new();
        let exported = exported_schemas()
            .into_iter()
            .map(|(stem, schema)| (format!("export {stem}"), schema));
        let files = ["generated/schemas", "schema-src/v1"]
            .into_iter()
            .flat_map(|dir| {
                schema_files(dir)
                    .into_iter()
                    .map(move |(name, doc)| (format!("{dir}/{name}"), doc))
            });
        let mut seen = 0;
        for (name, schema) in exported.chain(files) {
            seen += 1;
            problems.extend(
                nonstandard_vocabulary(&schema)
                    .into_iter()
                    .map(|at| format!("{name}: {at}")),
            );
        }
        assert!(seen > 40, "looked at only {seen} schemas");
        assert!(
            problems.is_empty(),
            "non-standard keywords or formats:\n{}",
            problems.join("\n")
        );
    }

    #[test]
    fn every_exported_schema_carries_the_id_of_its_normative_file() {
        let normative: std::collections::BTreeMap<String, Value> = schema_files("schema-src/v1")
            .into_iter()
            .filter_map(|(name, doc)| {
                Some((
                    name.strip_suffix(".schema.json")?.to_string(),
                    doc["$id"].clone(),
                ))
            })
            .collect();
        let exported = exported_schemas();
        assert!(exported.len() > 20);
        for (stem, schema) in exported {
            assert_eq!(Some(&schema["$id"]), normative.get(&stem), "{stem}");
        }
    }

    #[test]
    fn unsigned_integers_keep_their_lower_bound_without_a_format() {
        let schema = schema_of::<crate::GetInput>("tool-get-input");
        let cursor = &schema["properties"]["cursor"];
        assert_eq!(cursor["minimum"], 0, "{cursor}");
        assert!(cursor.get("format").is_none(), "{cursor}");
    }
}
