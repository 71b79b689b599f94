//! Schema transforms the generated code attaches where schemars 1 and typify disagree.

use schemars::Schema;

/// Adds `keys` to the schema's `required`. typify reads a required, nullable property as
/// `Option<T>` with `Option::deserialize` (the key must be present, `null` allowed);
/// schemars would otherwise advertise it as optional.
pub fn require_keys(schema: &mut Schema, keys: &[&str]) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    let required = object
        .entry("required")
        .or_insert_with(|| serde_json::Value::Array(Vec::new()));
    if let Some(list) = required.as_array_mut() {
        for key in keys {
            let key = serde_json::Value::String((*key).to_string());
            if !list.contains(&key) {
                list.push(key);
            }
        }
    }
}
