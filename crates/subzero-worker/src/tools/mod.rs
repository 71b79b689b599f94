//! The built-in tools, exactly as granted. Only granted tools are declared to the model; a call
//! to any other name is answered with a tool error and never executed.

pub mod bash;
mod beneath;
mod fs;
pub mod mcp;
mod search;

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::containment::Containment;
use crate::model::ToolSpec;
use crate::scratch::Scratch;

/// Every tool this worker implements, in declaration order.
pub const BUILTIN: &[&str] = &["read", "grep", "find", "ls", "write", "edit", "bash"];
/// Tools that change the workspace; they need a write-capable grant.
pub const WRITING: &[&str] = &["write", "edit", "bash"];

/// Largest tool result handed back to the model.
pub const MAX_RESULT_BYTES: usize = 64 * 1024;

/// What tools need from the run.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// Canonical workspace root; file tools stay below it.
    pub root: PathBuf,
    pub containment: Arc<Containment>,
    /// Private scratch directory for command output.
    pub scratch: Arc<Scratch>,
    /// How every tool process of the run confines itself before exec: its bounds, its
    /// view of the filesystem and the run's Landlock ruleset (`None` there when the kernel
    /// cannot enforce the grant and the grant does not require it).
    pub jail: crate::containment::tool::ToolJail,
}

/// A tool's answer to the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    pub text: String,
    pub is_error: bool,
}

impl ToolOutput {
    pub fn ok(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            is_error: false,
        }
    }

    pub fn error(text: impl Into<String>) -> Self {
        Self {
            text: format!("error: {}", text.into()),
            is_error: true,
        }
    }

    /// Appends what the tool printed before it ended (nothing when it printed nothing).
    pub fn with_output(mut self, output: &str) -> Self {
        if !output.is_empty() {
            self.text.push_str("\noutput so far:\n");
            self.text.push_str(output);
        }
        self
    }
}

/// The tool error for a call that passed `toolTimeoutMs`: names the tool, the timeout and
/// what became of the call (`what`), so the model can try something smaller or faster.
pub fn timed_out(name: &str, timeout: Duration, what: &str) -> ToolOutput {
    ToolOutput::error(format!(
        "{name} timed out after {} ms (toolTimeoutMs); {what}",
        timeout.as_millis()
    ))
}

/// The function declarations for the granted tools, in a fixed order.
pub fn declarations(granted: &[String]) -> Vec<ToolSpec> {
    BUILTIN
        .iter()
        .filter(|name| granted.iter().any(|g| g == *name))
        .map(|name| {
            let (description, parameters) = schema(name);
            ToolSpec {
                name: (*name).to_owned(),
                description: description.to_owned(),
                parameters,
            }
        })
        .collect()
}

fn schema(name: &str) -> (&'static str, Value) {
    let path = json!({ "type": "string", "description": "Path relative to the workspace root" });
    match name {
        "read" => (
            "Read a UTF-8 text file, optionally a byte window of it.",
            json!({ "type": "object", "required": ["path"], "properties": {
                "path": path,
                "offset": { "type": "integer", "minimum": 0, "description": "Byte offset to start at" },
                "limit": { "type": "integer", "minimum": 1, "description": "Maximum bytes to return" } } }),
        ),
        "grep" => (
            "Search file contents with a regular expression; respects .gitignore and similar files.",
            json!({ "type": "object", "required": ["pattern"], "properties": {
                "pattern": { "type": "string" },
                "path": path,
                "glob": { "type": "string", "description": "Only files matching this glob" },
                "ignoreCase": { "type": "boolean" },
                "maxMatches": { "type": "integer", "minimum": 1 } } }),
        ),
        "find" => (
            "Find files and directories whose path matches a glob; respects .gitignore.",
            json!({ "type": "object", "required": ["pattern"], "properties": {
                "pattern": { "type": "string", "description": "Glob, e.g. **/*.rs or Cargo.toml" },
                "path": path,
                "maxResults": { "type": "integer", "minimum": 1 } } }),
        ),
        "ls" => (
            "List a directory (directories end with /).",
            json!({ "type": "object", "properties": { "path": path } }),
        ),
        "write" => (
            "Create or overwrite a file with the given content.",
            json!({ "type": "object", "required": ["path", "content"], "properties": {
                "path": path, "content": { "type": "string" } } }),
        ),
        "edit" => (
            "Replace one exact, unique occurrence of oldText with newText in a file.",
            json!({ "type": "object", "required": ["path", "oldText", "newText"], "properties": {
                "path": path, "oldText": { "type": "string" }, "newText": { "type": "string" } } }),
        ),
        _ => (
            "Run a bash command in the workspace root. Output is capped; the per-tool timeout applies.",
            json!({ "type": "object", "required": ["command"], "properties": {
                "command": { "type": "string" } } }),
        ),
    }
}

/// Runs a granted tool within `timeout` (`toolTimeoutMs`). The caller has already checked
/// the grant. Past the timeout the call is a tool error ([`timed_out`]): `bash` has its
/// process tree killed; a file tool's thread cannot be stopped, so its result is dropped.
pub async fn execute(
    ctx: &ToolContext,
    name: &str,
    arguments: &str,
    timeout: Duration,
) -> ToolOutput {
    let arguments = if arguments.trim().is_empty() {
        "{}"
    } else {
        arguments
    };
    match name {
        "bash" => match parse(arguments) {
            Ok(args) => bash::run(ctx, args, timeout).await,
            Err(out) => out,
        },
        "read" | "grep" | "find" | "ls" | "write" | "edit" => {
            let ctx = ctx.clone();
            let owned = name.to_owned();
            let arguments = arguments.to_owned();
            let work = tokio::task::spawn_blocking(move || blocking(&ctx, &owned, &arguments));
            match tokio::time::timeout(timeout, work).await {
                Ok(done) => done.unwrap_or_else(|_| ToolOutput::error("the tool crashed")),
                Err(_) => timed_out(name, timeout, "its result was dropped"),
            }
        }
        other => ToolOutput::error(format!("unknown tool {other}")),
    }
}

fn blocking(ctx: &ToolContext, name: &str, arguments: &str) -> ToolOutput {
    let result = match name {
        "read" => parse(arguments).and_then(|a| fs::read(ctx, a)),
        "write" => parse(arguments).and_then(|a| fs::write(ctx, a)),
        "edit" => parse(arguments).and_then(|a| fs::edit(ctx, a)),
        "ls" => parse(arguments).and_then(|a| fs::ls(ctx, a)),
        "grep" => parse(arguments).and_then(|a| search::grep(ctx, a)),
        _ => parse(arguments).and_then(|a| search::find(ctx, a)),
    };
    result.unwrap_or_else(|e| e)
}

fn parse<T: DeserializeOwned>(arguments: &str) -> Result<T, ToolOutput> {
    serde_json::from_str(arguments)
        .map_err(|e| ToolOutput::error(format!("invalid arguments: {e}")))
}

/// Resolves `path` below the workspace root, following symlinks of the part that exists.
/// For the reading tools only: `write` and `edit` open through `beneath`, because a check
/// here and a later open look the path up twice (and a dangling link passes this check).
pub(crate) fn resolve(root: &Path, path: &str) -> Result<PathBuf, ToolOutput> {
    let joined = root.join(path);
    let mut normalized = PathBuf::new();
    for part in joined.components() {
        match part {
            Component::ParentDir => {
                normalized.pop();
            }
            Component::CurDir => {}
            other => normalized.push(other),
        }
    }
    let mut existing = normalized.clone();
    let mut missing = Vec::new();
    while !existing.exists() {
        match (existing.file_name(), existing.parent()) {
            (Some(name), Some(parent)) => {
                missing.push(name.to_owned());
                existing = parent.to_owned();
            }
            _ => break,
        }
    }
    let mut resolved = existing
        .canonicalize()
        .map_err(|e| ToolOutput::error(format!("cannot resolve {path}: {e}")))?;
    for name in missing.into_iter().rev() {
        resolved.push(name);
    }
    if !resolved.starts_with(root) {
        return Err(ToolOutput::error(format!(
            "{path} is outside the workspace"
        )));
    }
    Ok(resolved)
}

/// The path as shown to the model: relative to the root.
pub(crate) fn display(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    let shown = rel.to_string_lossy();
    if shown.is_empty() {
        ".".to_owned()
    } else {
        shown.into_owned()
    }
}

/// Cuts `text` to `max` bytes at a char boundary, saying so.
pub(crate) fn cap(mut text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let total = text.len();
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    text.truncate(cut);
    text.push_str(&format!(
        "\n[output truncated: {cut} of {total} bytes shown]"
    ));
    text
}

/// Text files only: a NUL byte in the first 8 KiB means binary.
pub(crate) fn looks_binary(bytes: &[u8]) -> bool {
    bytes.iter().take(8192).any(|b| *b == 0)
}
