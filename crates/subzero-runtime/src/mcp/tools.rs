//! The advertised tool list: names, descriptions, and the JSON Schemas the protocol
//! types produce (the same documents `cargo xtask` exports and checks against
//! `schema-src/`).

use std::sync::{Arc, OnceLock};

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use schemars::JsonSchema;
use serde_json::Value;
use subzero_protocol as p;

use super::descriptions as d;

/// The nine tool names, in the order they are listed.
pub const TOOL_NAMES: [&str; 9] = [
    "subzero_info",
    "subzero_spawn",
    "subzero_get",
    "subzero_list",
    "subzero_send",
    "subzero_stop",
    "subzero_resume",
    "subzero_output",
    "subzero_apply",
];

/// The tools as advertised by `tools/list`, built once.
pub fn tool_list() -> &'static [Tool] {
    static TOOLS: OnceLock<Vec<Tool>> = OnceLock::new();
    TOOLS.get_or_init(|| {
        vec![
            tool::<p::InfoInput, p::Info>("subzero_info", d::INFO, "tool-info-input", "info", true),
            tool::<p::SpawnInput, p::SpawnOutput>(
                "subzero_spawn",
                d::SPAWN,
                "tool-spawn-input",
                "tool-spawn-output",
                false,
            ),
            tool::<p::GetInput, p::ChildSnapshot>(
                "subzero_get",
                d::GET,
                "tool-get-input",
                "child-snapshot",
                true,
            ),
            tool::<p::ListInput, p::ListOutput>(
                "subzero_list",
                d::LIST,
                "tool-list-input",
                "tool-list-output",
                true,
            ),
            tool::<p::SendInput, p::SendOutput>(
                "subzero_send",
                d::SEND,
                "tool-send-input",
                "tool-send-output",
                false,
            ),
            tool::<p::StopInput, p::StopOutput>(
                "subzero_stop",
                d::STOP,
                "tool-stop-input",
                "tool-stop-output",
                false,
            ),
            tool::<p::ResumeInput, p::ResumeOutput>(
                "subzero_resume",
                d::RESUME,
                "tool-resume-input",
                "tool-resume-output",
                false,
            ),
            tool::<p::OutputInput, p::ArtifactChunk>(
                "subzero_output",
                d::OUTPUT,
                "tool-output-input",
                "artifact-chunk",
                true,
            ),
            tool::<p::ApplyInput, p::ApplyOutput>(
                "subzero_apply",
                d::APPLY,
                "tool-apply-input",
                "tool-apply-output",
                false,
            ),
        ]
    })
}

fn tool<I: JsonSchema, O: JsonSchema>(
    name: &'static str,
    description: &'static str,
    input_stem: &str,
    output_stem: &str,
    read_only: bool,
) -> Tool {
    let mut annotations = ToolAnnotations::new();
    annotations.read_only_hint = Some(read_only);
    annotations.destructive_hint = Some(false);
    annotations.open_world_hint = Some(false);
    Tool::new(
        name,
        description,
        object(p::export::schema_of::<I>(input_stem)),
    )
    .with_raw_output_schema(object(p::export::schema_of::<O>(output_stem)))
    .with_annotations(annotations)
}

fn object(schema: Value) -> Arc<JsonObject> {
    match schema {
        Value::Object(map) => Arc::new(map),
        // schemars always produces an object schema for a struct; an empty object
        // schema (accepting anything) is the honest fallback for anything else.
        _ => Arc::new(JsonObject::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_advertised_schema_uses_only_the_standard_vocabulary() {
        let mut problems = Vec::new();
        for tool in tool_list() {
            let schemas = std::iter::once(("input", &tool.input_schema))
                .chain(tool.output_schema.as_ref().map(|s| ("output", s)));
            for (kind, schema) in schemas {
                let schema = Value::Object(JsonObject::clone(schema));
                problems.extend(
                    p::schema_fix::nonstandard_vocabulary(&schema)
                        .into_iter()
                        .map(|at| format!("{} {kind}: {at}", tool.name)),
                );
            }
        }
        assert_eq!(tool_list().len(), TOOL_NAMES.len());
        assert!(
            problems.is_empty(),
            "non-standard keywords or formats:\n{}",
            problems.join("\n")
        );
    }
}
