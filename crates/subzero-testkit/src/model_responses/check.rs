//! What the OpenAI Responses API would refuse in a request body, so a test can assert that
//! what the worker sent would have been accepted.

use serde_json::Value;

/// Refuses a request body the way the OpenAI Responses API does (its documented shapes and
/// the validation errors it answers with HTTP 400), so a test can assert that what the
/// worker sent would have been accepted: item types and roles, content part types per role,
/// item ids (`msg_…`, `fc_…`) when present, every `function_call` answered by a
/// `function_call_output` with its `call_id` and no output without its call, function tools
/// with a valid name and object parameters, `tool_choice`, and `max_output_tokens` ≥ 16.
pub fn check_request(body: &Value) -> Result<(), String> {
    check_parameters(body)?;
    let mut pairs = CallPairs::default();
    for (n, item) in input_of(body)?.iter().enumerate() {
        check_item(n, item, &mut pairs)?;
    }
    pairs.check_answered()?;
    check_tools(body)?;
    check_tool_choice(body)
}

/// `model` present and `max_output_tokens`, when given, at least 16.
fn check_parameters(body: &Value) -> Result<(), String> {
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if model.is_empty() {
        return Err("missing required parameter: 'model'".into());
    }
    if let Some(max) = body.get("max_output_tokens")
        && max.as_u64().is_none_or(|m| m < 16)
    {
        return Err(format!(
            "invalid 'max_output_tokens': expected an integer >= 16, got {max}"
        ));
    }
    Ok(())
}

/// The `input` items; a plain string input has none to check.
fn input_of(body: &Value) -> Result<&[Value], String> {
    match body.get("input") {
        Some(Value::String(_)) => Ok(&[]),
        Some(Value::Array(items)) => Ok(items),
        _ => Err("missing required parameter: 'input'".into()),
    }
}

/// The `function_call`s and `function_call_output`s of the input, each with its position and
/// `call_id`, to be matched once every item has been read.
#[derive(Default)]
struct CallPairs {
    calls: Vec<(usize, String)>,
    outputs: Vec<(usize, String)>,
}

impl CallPairs {
    /// Every call answered by a later output, every output answering an earlier call.
    fn check_answered(&self) -> Result<(), String> {
        for (n, call_id) in &self.calls {
            if !self.outputs.iter().any(|(m, id)| m > n && id == call_id) {
                return Err(format!("No tool output found for function call {call_id}."));
            }
        }
        for (n, call_id) in &self.outputs {
            if !self.calls.iter().any(|(m, id)| m < n && id == call_id) {
                return Err(format!(
                    "No tool call found for function call output with call_id {call_id}."
                ));
            }
        }
        Ok(())
    }
}

/// Input item `n` by its type, noting calls and outputs in `pairs`.
fn check_item(n: usize, item: &Value, pairs: &mut CallPairs) -> Result<(), String> {
    let kind = item
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("message");
    let id = item.get("id").and_then(Value::as_str);
    let at = |what: &str| format!("invalid 'input[{n}]{what}'");
    match kind {
        "message" => {
            check_id_prefix(id, "msg", &at)?;
            check_message(item, &at)
        }
        "function_call" => {
            check_id_prefix(id, "fc", &at)?;
            check_function_call(item, &at)?;
            let call_id = item["call_id"].as_str().unwrap_or_default();
            pairs.calls.push((n, call_id.to_owned()));
            Ok(())
        }
        "function_call_output" => {
            let call_id = check_function_call_output(item, &at)?;
            pairs.outputs.push((n, call_id.to_owned()));
            Ok(())
        }
        "reasoning" | "item_reference" => Ok(()),
        other => Err(format!("{}: unknown item type '{other}'", at(".type"))),
    }
}

/// An item id, when present, begins with the prefix of its item type.
fn check_id_prefix(
    id: Option<&str>,
    prefix: &str,
    at: &impl Fn(&str) -> String,
) -> Result<(), String> {
    if id.is_some_and(|id| !id.starts_with(prefix)) {
        return Err(format!(
            "{}: expected an ID that begins with '{prefix}'",
            at(".id")
        ));
    }
    Ok(())
}

/// A known role, and content that is a string or a list of parts that role may send.
fn check_message(item: &Value, at: &impl Fn(&str) -> String) -> Result<(), String> {
    let role = item.get("role").and_then(Value::as_str).unwrap_or_default();
    let allowed: &[&str] = match role {
        "user" | "system" | "developer" => &["input_text", "input_image", "input_file"],
        "assistant" => &["output_text", "refusal"],
        other => return Err(format!("{}: unknown role '{other}'", at(".role"))),
    };
    match item.get("content") {
        Some(Value::String(_)) => Ok(()),
        Some(Value::Array(parts)) => parts
            .iter()
            .enumerate()
            .try_for_each(|(p, part)| check_content_part(p, part, role, allowed, at)),
        _ => Err(format!("{}: missing content", at(".content"))),
    }
}

/// Content part `p` of a `role` message: a type in `allowed`, and string text for text parts.
fn check_content_part(
    p: usize,
    part: &Value,
    role: &str,
    allowed: &[&str],
    at: &impl Fn(&str) -> String,
) -> Result<(), String> {
    let kind = part.get("type").and_then(Value::as_str).unwrap_or_default();
    if !allowed.contains(&kind) {
        return Err(format!(
            "{}: '{kind}' is not one of {allowed:?} for role '{role}'",
            at(&format!(".content[{p}].type"))
        ));
    }
    if kind.ends_with("text") && !part.get("text").is_some_and(Value::is_string) {
        return Err(format!(
            "{}: text must be a string",
            at(&format!(".content[{p}].text"))
        ));
    }
    Ok(())
}

/// `call_id`, `name` and `arguments` all strings.
fn check_function_call(item: &Value, at: &impl Fn(&str) -> String) -> Result<(), String> {
    for field in ["call_id", "name", "arguments"] {
        if !item.get(field).is_some_and(Value::is_string) {
            return Err(format!(
                "{}: missing or not a string",
                at(&format!(".{field}"))
            ));
        }
    }
    Ok(())
}

/// An output that is a string or a content list; gives the `call_id` it answers.
fn check_function_call_output<'a>(
    item: &'a Value,
    at: &impl Fn(&str) -> String,
) -> Result<&'a str, String> {
    let call_id = item
        .get("call_id")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if !item
        .get("output")
        .is_some_and(|o| o.is_string() || o.is_array())
    {
        return Err(format!(
            "{}: output must be a string or content list",
            at(".output")
        ));
    }
    Ok(call_id)
}

/// Every function tool with a valid name and object (or null) parameters; other tool types
/// are not checked.
fn check_tools(body: &Value) -> Result<(), String> {
    let tools = body
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten();
    for (n, tool) in tools.enumerate() {
        if tool.get("type").and_then(Value::as_str) == Some("function") {
            check_function_tool(n, tool)?;
        }
    }
    Ok(())
}

fn check_function_tool(n: usize, tool: &Value) -> Result<(), String> {
    let name = tool.get("name").and_then(Value::as_str).unwrap_or_default();
    let valid = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !valid {
        return Err(format!(
            "invalid 'tools[{n}].name': '{name}' does not match '^[a-zA-Z0-9_-]{{1,64}}$'"
        ));
    }
    if tool
        .get("parameters")
        .is_some_and(|p| !p.is_object() && !p.is_null())
    {
        return Err(format!(
            "invalid 'tools[{n}].parameters': expected an object"
        ));
    }
    Ok(())
}

/// `tool_choice`, when given, one of the named modes or an object.
fn check_tool_choice(body: &Value) -> Result<(), String> {
    match body.get("tool_choice") {
        None => Ok(()),
        Some(Value::String(choice)) if ["none", "auto", "required"].contains(&choice.as_str()) => {
            Ok(())
        }
        Some(Value::Object(_)) => Ok(()),
        Some(other) => Err(format!("invalid 'tool_choice': {other}")),
    }
}
