//! Templates and the immutable grant snapshot frozen from one at spawn.
//!
//! Built-ins: `researcher` (`read`, `grep`, `find`, `ls`) and `coder` (those plus
//! `write`, `edit`, `bash`; write-capable). User templates come from the configuration
//! file with the same shape. At spawn the runtime resolves the template, loads its skill
//! files once, and freezes a [`GrantSnapshot`]: every field private, and a `sha256`
//! digest over the canonical JSON of all other fields, re-checked whenever a snapshot is
//! deserialized. A resume reuses the snapshot as is; nothing is ever added to it.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::digest::{Sha256Digest, canonical_json};
use crate::error_code::{Coded, ErrorCode};
use crate::limits::{LimitExceeded, Limits};

/// A template id: 1..=64 characters of `[A-Za-z0-9_.-]`.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TemplateId(String);

impl TemplateId {
    /// Parse and validate.
    pub fn parse(text: &str) -> Result<Self, TemplateError> {
        let ok = (1..=64).contains(&text.len())
            && text
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
        if ok {
            Ok(Self(text.to_owned()))
        } else {
            Err(TemplateError::InvalidId {
                shown: text.chars().take(64).collect(),
            })
        }
    }

    /// The id text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for TemplateId {
    type Error = TemplateError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::parse(&value)
    }
}

impl From<TemplateId> for String {
    fn from(id: TemplateId) -> Self {
        id.0
    }
}

impl fmt::Display for TemplateId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The worker's built-in tools, by their exact names.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum BuiltinTool {
    /// Read a file.
    Read,
    /// Search file contents.
    Grep,
    /// Find files by name.
    Find,
    /// List a directory.
    Ls,
    /// Write a file.
    Write,
    /// Edit a file in place.
    Edit,
    /// Run a shell command (with the user's authority).
    Bash,
}

impl BuiltinTool {
    /// Every built-in tool.
    pub const ALL: [BuiltinTool; 7] = [
        BuiltinTool::Read,
        BuiltinTool::Grep,
        BuiltinTool::Find,
        BuiltinTool::Ls,
        BuiltinTool::Write,
        BuiltinTool::Edit,
        BuiltinTool::Bash,
    ];

    /// The exact tool name.
    pub const fn as_str(self) -> &'static str {
        match self {
            BuiltinTool::Read => "read",
            BuiltinTool::Grep => "grep",
            BuiltinTool::Find => "find",
            BuiltinTool::Ls => "ls",
            BuiltinTool::Write => "write",
            BuiltinTool::Edit => "edit",
            BuiltinTool::Bash => "bash",
        }
    }

    /// Parse an exact tool name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == name)
    }

    /// Whether granting it makes a run write-capable.
    pub const fn writes(self) -> bool {
        matches!(
            self,
            BuiltinTool::Write | BuiltinTool::Edit | BuiltinTool::Bash
        )
    }
}

/// A skill as declared by a template: a name and a file to load once at spawn.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillSource {
    /// The skill's name.
    pub name: String,
    /// The file holding it.
    pub path: String,
}

/// An MCP server as declared by a template (the worker is its client).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerTemplate {
    /// The server's name.
    pub name: String,
    /// The command that starts it.
    pub command: String,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Environment, each value a reference `env:VAR` (never a literal secret).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The only tools of this server the child may call.
    pub allowed_tools: Vec<String>,
}

/// A template: built-in, or a user template from the configuration file (snake_case).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Template {
    /// What it is for (shown to parents in `info`).
    pub description: String,
    /// The child's instructions.
    pub instructions: String,
    /// Exact built-in tool names.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Explicit skills.
    #[serde(default)]
    pub skills: Vec<SkillSource>,
    /// Explicit MCP servers.
    #[serde(default)]
    pub mcp_servers: Vec<McpServerTemplate>,
    /// Whether runs of it count against the one-writer-per-workspace limit. Granting
    /// `write`, `edit` or `bash` makes a snapshot write-capable regardless.
    #[serde(default)]
    pub write_capable: bool,
}

impl Template {
    /// The built-in `researcher`: reads only.
    pub fn researcher() -> Self {
        Template {
            description: "Reads and searches the workspace and reports findings; cannot write or run commands."
                .to_owned(),
            instructions: "You are a research assistant working in a shared workspace. Use read, grep, find and ls to answer the task. You cannot modify files or run commands. Report findings with file paths."
                .to_owned(),
            tools: names(&[BuiltinTool::Read, BuiltinTool::Grep, BuiltinTool::Find, BuiltinTool::Ls]),
            skills: Vec::new(),
            mcp_servers: Vec::new(),
            write_capable: false,
        }
    }

    /// The built-in `coder`: reads, writes, edits and runs commands.
    pub fn coder() -> Self {
        Template {
            description: "Reads, edits and writes files and runs shell commands in the workspace.".to_owned(),
            instructions: "You are a coding assistant working in a shared workspace that others may edit too. Use the tools to complete the task, keep changes minimal, and report what you changed."
                .to_owned(),
            tools: names(&BuiltinTool::ALL),
            skills: Vec::new(),
            mcp_servers: Vec::new(),
            write_capable: true,
        }
    }

    /// A built-in template by id.
    pub fn builtin(id: &str) -> Option<Self> {
        match id {
            "researcher" => Some(Self::researcher()),
            "coder" => Some(Self::coder()),
            _ => None,
        }
    }

    /// The built-in ids.
    pub const BUILTIN_IDS: [&'static str; 2] = ["researcher", "coder"];
}

fn names(tools: &[BuiltinTool]) -> Vec<String> {
    tools.iter().map(|t| t.as_str().to_owned()).collect()
}

/// The built-in templates plus the user's, resolvable by id.
#[derive(Clone, Debug, Default)]
pub struct Templates {
    user: BTreeMap<TemplateId, Template>,
}

impl Templates {
    /// The catalog; a user template may not reuse a built-in id.
    pub fn new(user: BTreeMap<TemplateId, Template>) -> Result<Self, TemplateError> {
        if let Some(id) = user
            .keys()
            .find(|id| Template::BUILTIN_IDS.contains(&id.as_str()))
        {
            return Err(TemplateError::ShadowsBuiltin { id: id.clone() });
        }
        Ok(Self { user })
    }

    /// Resolve an id: built-ins first, then user templates; unknown is
    /// `template_not_found`.
    pub fn resolve(&self, id: &str) -> Result<(TemplateId, Template), TemplateError> {
        let tid = TemplateId::parse(id).map_err(|_| TemplateError::NotFound {
            id: id.chars().take(64).collect(),
        })?;
        if let Some(t) = Template::builtin(id) {
            return Ok((tid, t));
        }
        self.user
            .get(&tid)
            .map(|t| (tid.clone(), t.clone()))
            .ok_or(TemplateError::NotFound { id: id.to_owned() })
    }

    /// Every id, built-ins first.
    pub fn ids(&self) -> Vec<String> {
        Template::BUILTIN_IDS
            .iter()
            .map(|s| (*s).to_owned())
            .chain(self.user.keys().map(|k| k.0.clone()))
            .collect()
    }
}

/// Per-run limits frozen into the snapshot.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunLimits {
    /// Model turns per run (48).
    pub max_turns: u32,
    /// Wall-clock deadline per run in ms (30 min).
    pub deadline_ms: u64,
    /// Per tool call timeout in ms (3 min).
    pub tool_timeout_ms: u64,
    /// Output tokens per model call (8192).
    pub max_output_tokens: u32,
    /// Optional total token budget per run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_budget: Option<u64>,
}

impl Default for RunLimits {
    fn default() -> Self {
        Self {
            max_turns: 48,
            deadline_ms: 1_800_000,
            tool_timeout_ms: 180_000,
            max_output_tokens: 8192,
            token_budget: None,
        }
    }
}

/// A loaded skill: its name and the file's content at spawn.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Skill {
    /// The skill's name.
    pub name: String,
    /// The content, loaded once.
    pub content: String,
}

/// An MCP server as frozen in a snapshot.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct McpServerGrant {
    /// The server's name.
    pub name: String,
    /// The command that starts it.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Environment references, `NAME → env:VAR`.
    pub env_refs: BTreeMap<String, String>,
    /// The only tools of this server the child may call.
    pub allowed_tools: Vec<String>,
}

/// Everything in a snapshot but its digest; what the digest covers.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SnapshotBody {
    template_id: TemplateId,
    description: String,
    instructions: String,
    tools: Vec<String>,
    skills: Vec<Skill>,
    mcp_servers: Vec<McpServerGrant>,
    write_capable: bool,
    limits: RunLimits,
}

/// The immutable template/grant snapshot of one child.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(
    rename_all = "camelCase",
    try_from = "SnapshotWire",
    into = "SnapshotWire"
)]
pub struct GrantSnapshot {
    body: SnapshotBody,
    digest: Sha256Digest,
}

#[derive(Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SnapshotWire {
    #[serde(flatten)]
    body: SnapshotBody,
    digest: Sha256Digest,
}

impl TryFrom<SnapshotWire> for GrantSnapshot {
    type Error = TemplateError;
    fn try_from(wire: SnapshotWire) -> Result<Self, Self::Error> {
        let computed = digest_of(&wire.body)?;
        if computed != wire.digest {
            return Err(TemplateError::DigestMismatch {
                stored: wire.digest,
                computed,
            });
        }
        Ok(GrantSnapshot {
            body: wire.body,
            digest: wire.digest,
        })
    }
}

impl From<GrantSnapshot> for SnapshotWire {
    fn from(s: GrantSnapshot) -> Self {
        SnapshotWire {
            body: s.body,
            digest: s.digest,
        }
    }
}

fn digest_of(body: &SnapshotBody) -> Result<Sha256Digest, TemplateError> {
    let value = serde_json::to_value(body).map_err(|e| TemplateError::Encoding {
        reason: e.to_string(),
    })?;
    Ok(Sha256Digest::of(canonical_json(&value).as_bytes()))
}

impl GrantSnapshot {
    /// Freeze `template` (resolved as `id`) with its skills loaded as `skills` (same
    /// names, same order as declared). Refuses grants the worker cannot enforce
    /// exactly (`unsupported_grant`) and sizes over policy (`limit_exceeded`).
    pub fn freeze(
        id: TemplateId,
        template: &Template,
        skills: Vec<Skill>,
        run_limits: RunLimits,
        limits: &Limits,
    ) -> Result<Self, TemplateError> {
        limits.check_instructions(&template.instructions)?;
        let mut write_capable = template.write_capable;
        let mut seen = Vec::new();
        for name in &template.tools {
            let tool = BuiltinTool::parse(name).ok_or_else(|| TemplateError::UnsupportedGrant {
                what: format!("tool `{name}` is not a built-in tool (read, grep, find, ls, write, edit, bash); grant MCP tools through mcp_servers"),
            })?;
            if seen.contains(&tool) {
                return Err(TemplateError::UnsupportedGrant {
                    what: format!("tool `{name}` is granted twice"),
                });
            }
            seen.push(tool);
            write_capable |= tool.writes();
        }
        let mcp_tools: usize = template
            .mcp_servers
            .iter()
            .map(|s| s.allowed_tools.len())
            .sum();
        limits.check_granted_tools(template.tools.len() + mcp_tools)?;
        let declared: Vec<&str> = template.skills.iter().map(|s| s.name.as_str()).collect();
        let loaded: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
        if declared != loaded {
            return Err(TemplateError::UnsupportedGrant {
                what: format!("skills declared {declared:?} but loaded {loaded:?}"),
            });
        }
        let mcp_servers = template
            .mcp_servers
            .iter()
            .map(freeze_server)
            .collect::<Result<Vec<_>, _>>()?;
        let body = SnapshotBody {
            template_id: id,
            description: template.description.clone(),
            instructions: template.instructions.clone(),
            tools: template.tools.clone(),
            skills,
            mcp_servers,
            write_capable,
            limits: run_limits,
        };
        let digest = digest_of(&body)?;
        Ok(Self { body, digest })
    }

    /// The template it was frozen from.
    pub fn template_id(&self) -> &TemplateId {
        &self.body.template_id
    }
    /// The description.
    pub fn description(&self) -> &str {
        &self.body.description
    }
    /// The child's instructions.
    pub fn instructions(&self) -> &str {
        &self.body.instructions
    }
    /// Exact built-in tool names.
    pub fn tools(&self) -> &[String] {
        &self.body.tools
    }
    /// Loaded skills.
    pub fn skills(&self) -> &[Skill] {
        &self.body.skills
    }
    /// MCP servers and their allowed tools.
    pub fn mcp_servers(&self) -> &[McpServerGrant] {
        &self.body.mcp_servers
    }
    /// Whether runs count against the one-writer-per-workspace limit.
    pub fn write_capable(&self) -> bool {
        self.body.write_capable
    }
    /// Per-run limits.
    pub fn limits(&self) -> &RunLimits {
        &self.body.limits
    }
    /// The digest of the canonical JSON of every other field.
    pub fn digest(&self) -> Sha256Digest {
        self.digest
    }
}

fn freeze_server(s: &McpServerTemplate) -> Result<McpServerGrant, TemplateError> {
    if let Some((name, value)) = s.env.iter().find(|(_, v)| !is_env_ref(v)) {
        let _ = value;
        return Err(TemplateError::UnsupportedGrant {
            what: format!(
                "MCP server `{}` env `{name}` must be a reference `env:VAR`, not a literal value",
                s.name
            ),
        });
    }
    if s.allowed_tools.is_empty() {
        return Err(TemplateError::UnsupportedGrant {
            what: format!(
                "MCP server `{}` allows no tools; list them in allowed_tools",
                s.name
            ),
        });
    }
    Ok(McpServerGrant {
        name: s.name.clone(),
        command: s.command.clone(),
        args: s.args.clone(),
        env_refs: s.env.clone(),
        allowed_tools: s.allowed_tools.clone(),
    })
}

fn is_env_ref(value: &str) -> bool {
    value
        .strip_prefix("env:")
        .is_some_and(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
}

/// Why a template could not be resolved or frozen, or a snapshot not loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// No such template.
    #[error(
        "template_not_found: no built-in or configured template `{id}`; built-ins are researcher and coder, user templates come from the config file"
    )]
    NotFound {
        /// The id asked for.
        id: String,
    },
    /// A malformed template id.
    #[error(
        "invalid_request: template id `{shown}` must be 1..=64 characters of A-Z a-z 0-9 _ - ."
    )]
    InvalidId {
        /// The id, shortened.
        shown: String,
    },
    /// A user template reuses a built-in id.
    #[error(
        "invalid_request: user template `{id}` reuses a built-in id; rename it in the config file"
    )]
    ShadowsBuiltin {
        /// The id.
        id: TemplateId,
    },
    /// The grant cannot be enforced exactly.
    #[error("unsupported_grant: {what}; fix the template, nothing was spawned")]
    UnsupportedGrant {
        /// What cannot be granted.
        what: String,
    },
    /// A size or count over policy.
    #[error(transparent)]
    Limit(#[from] LimitExceeded),
    /// A stored snapshot does not match its digest.
    #[error(
        "internal: stored grant snapshot has digest {stored} but its content hashes to {computed}; it was altered and is not used"
    )]
    DigestMismatch {
        /// The digest stored with it.
        stored: Sha256Digest,
        /// The digest of its content.
        computed: Sha256Digest,
    },
    /// The snapshot could not be encoded.
    #[error("internal: grant snapshot could not be encoded: {reason}")]
    Encoding {
        /// Why.
        reason: String,
    },
}

impl Coded for TemplateError {
    fn code(&self) -> ErrorCode {
        match self {
            TemplateError::NotFound { .. } => ErrorCode::TemplateNotFound,
            TemplateError::InvalidId { .. } | TemplateError::ShadowsBuiltin { .. } => {
                ErrorCode::InvalidRequest
            }
            TemplateError::UnsupportedGrant { .. } => ErrorCode::UnsupportedGrant,
            TemplateError::Limit(e) => e.code(),
            TemplateError::DigestMismatch { .. } | TemplateError::Encoding { .. } => {
                ErrorCode::Internal
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn freeze(id: &str, t: &Template) -> Result<GrantSnapshot, TemplateError> {
        GrantSnapshot::freeze(
            TemplateId::parse(id)?,
            t,
            Vec::new(),
            RunLimits::default(),
            &Limits::default(),
        )
    }

    #[test]
    fn builtins_grant_exact_tools() {
        let r = freeze("researcher", &Template::researcher()).unwrap();
        assert_eq!(r.tools(), ["read", "grep", "find", "ls"]);
        assert!(!r.write_capable());
        let c = freeze("coder", &Template::coder()).unwrap();
        assert_eq!(
            c.tools(),
            ["read", "grep", "find", "ls", "write", "edit", "bash"]
        );
        assert!(c.write_capable());
    }

    #[test]
    fn the_snapshot_digest_covers_every_field_and_survives_a_round_trip() {
        let s = freeze("researcher", &Template::researcher()).unwrap();
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["digest"], s.digest().to_string());
        assert_eq!(json["templateId"], "researcher");
        let back: GrantSnapshot = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(back, s);
        let mut tampered = json;
        tampered["instructions"] = "do something else".into();
        let err = serde_json::from_value::<GrantSnapshot>(tampered).unwrap_err();
        assert!(err.to_string().contains("altered"), "{err}");
    }

    #[test]
    fn unknown_tools_and_literal_secrets_are_unsupported_grants() {
        let mut t = Template::researcher();
        t.tools.push("web_fetch".into());
        assert_eq!(
            freeze("x", &t).unwrap_err().code(),
            ErrorCode::UnsupportedGrant
        );
        let mut t = Template::researcher();
        t.mcp_servers.push(McpServerTemplate {
            name: "gh".into(),
            command: "gh-mcp".into(),
            args: vec![],
            env: BTreeMap::from([("TOKEN".into(), "ghp_literal".into())]),
            allowed_tools: vec!["search".into()],
        });
        assert_eq!(
            freeze("x", &t).unwrap_err().code(),
            ErrorCode::UnsupportedGrant
        );
    }

    #[test]
    fn too_many_tools_is_limit_exceeded() {
        let mut t = Template::researcher();
        t.mcp_servers.push(McpServerTemplate {
            name: "big".into(),
            command: "big".into(),
            args: vec![],
            env: BTreeMap::new(),
            allowed_tools: (0..61).map(|i| format!("t{i}")).collect(),
        });
        assert_eq!(
            freeze("x", &t).unwrap_err().code(),
            ErrorCode::LimitExceeded
        );
    }

    #[test]
    fn unknown_templates_and_shadowing_are_refused() {
        let templates = Templates::default();
        assert_eq!(
            templates.resolve("nope").unwrap_err().code(),
            ErrorCode::TemplateNotFound
        );
        assert!(templates.resolve("coder").is_ok());
        let shadow =
            BTreeMap::from([(TemplateId::parse("coder").unwrap(), Template::researcher())]);
        assert_eq!(
            Templates::new(shadow).unwrap_err().code(),
            ErrorCode::InvalidRequest
        );
    }
}
