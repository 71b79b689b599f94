//! The advertised tool list: names, descriptions, the input schemas a model reads
//! (`subzero_protocol::advertised`: the contract's, compacted) and the full output schemas
//! the protocol types produce (the same documents `cargo xtask` exports and checks against
//! `schema-src/`; hosts check results against them and do not show them to the model).

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
        object(p::advertised::advertised_input(
            input_stem,
            &p::export::schema_of::<I>(input_stem),
        )),
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

    /// What a host puts before its model for one tool: name, description and input
    /// schema as compact JSON.
    fn definition_bytes(tool: &Tool) -> usize {
        serde_json::to_vec(&serde_json::json!({
            "name": tool.name,
            "description": tool.description,
            "inputSchema": Value::Object(JsonObject::clone(&tool.input_schema)),
        }))
        .map_or(usize::MAX, |bytes| bytes.len())
    }

    /// Claude Code 2.1.332's own `Agent` tool definition in a request to its model
    /// (measured at the model server: docs/benchmarks.md).
    const CLAUDE_CODE_AGENT_TOOL_BYTES: usize = 5_309;

    #[test]
    fn the_definitions_fit_the_parents_budget() {
        let bytes = |name: &str| {
            tool_list()
                .iter()
                .find(|t| t.name == name)
                .map_or(0, definition_bytes)
        };
        let total: usize = tool_list().iter().map(definition_bytes).sum();
        assert!(
            total <= 8_000,
            "the nine definitions are {total} bytes (budget 8,000)"
        );
        let spawn_get = bytes("subzero_spawn") + bytes("subzero_get");
        assert!(
            spawn_get <= CLAUDE_CODE_AGENT_TOOL_BYTES,
            "subzero_spawn + subzero_get are {spawn_get} bytes, Claude Code's Agent tool {CLAUDE_CODE_AGENT_TOOL_BYTES}"
        );
    }
}
