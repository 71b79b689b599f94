//! Templates and the immutable grant snapshot frozen from one at spawn.
//!
//! Built-ins: `researcher` (`read`, `grep`, `find`, `ls`) and `coder` (those plus
//! `write`, `edit`, `bash`; write-capable). User templates come from the configuration
//! file with the same shape. At spawn the runtime resolves the template, loads its skill
//! files once, and freezes a [`GrantSnapshot`]: every field private, and a `sha256`
//! digest over the canonical JSON of all other fields, re-checked whenever a snapshot is
//! deserialized. A resume reuses the snapshot as is; nothing is ever added to it.
//!
//! Tool limits (kernel bounds on a child's tool processes, [`ToolLimits`]) resolve per key:
//! the template's `tool_limits`, else the configuration's `[tool_limits]` (held by
//! [`Templates`]), else [`ToolLimits::SHIPPED`].

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::digest::Sha256Digest;
use crate::error_code::{Coded, Described, ErrorCode};
use crate::limits::LimitExceeded;

mod network;
mod snapshot;
mod tool_limits;
mod worker;

pub use network::{
    ALLOWLIST_MAX, Allowlist, HostRule, NetworkConfig, NetworkGrant, NetworkMode, Refusal,
    is_public,
};
pub use snapshot::{
    CompactionMode, FilesystemAccess, FilesystemGrant, GrantSnapshot, McpServerGrant, RunLimits,
    Skill,
};
pub use tool_limits::{ToolLimitKey, ToolLimitOutOfRange, ToolLimits, ToolLimitsConfig};
pub use worker::{Isolation, WorkerKind};

/// A template id: the wire's `TemplateId` (`schema-src/v1/common.schema.json`),
/// `^[a-z0-9][a-z0-9_-]{0,63}$` — lowercase ASCII letters, digits, `_` and `-`, starting
/// with a letter or digit. The same rule holds for the config file's `[templates.<id>]`,
/// so every id a template can have is one the wire can carry.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TemplateId(String);

impl TemplateId {
    /// Parse and validate.
    pub fn parse(text: &str) -> Result<Self, TemplateError> {
        let lower_or_digit = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
        let ok = (1..=64).contains(&text.len())
            && text.bytes().next().is_some_and(lower_or_digit)
            && text
                .bytes()
                .all(|b| lower_or_digit(b) || matches!(b, b'_' | b'-'));
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
    /// Whether the child's tool processes get a kernel-enforced read-only filesystem. It
    /// lets a template grant `bash` without being write-capable; `write` and `edit` cannot be
    /// granted with it. A template that grants no writing tool and is not write-capable is
    /// read-only without it.
    #[serde(default)]
    pub read_only: bool,
    /// Absolute paths a write-capable child's tool processes may write besides the
    /// workspace and the worker's scratch space.
    #[serde(default)]
    pub writable_paths: Vec<String>,
    /// Whether the child must not run unless the kernel enforces its filesystem grant
    /// (`unsupported_grant` at spawn and resume where it cannot).
    #[serde(default)]
    pub require_enforcement: bool,
    /// The network the child's tool processes may reach (`none` when it says nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkConfig>,
    /// Kernel bounds on the child's tool processes; a key left out comes from
    /// `[tool_limits]`, else [`ToolLimits::SHIPPED`].
    #[serde(default, skip_serializing_if = "ToolLimitsConfig::is_empty")]
    pub tool_limits: ToolLimitsConfig,
    /// The worker that runs its children (`rust` unless it says `pi`).
    #[serde(default, skip_serializing_if = "WorkerKind::is_default")]
    pub worker: WorkerKind,
    /// Where its children write when a spawn does not say (`shared` unless `checkout`).
    #[serde(default, skip_serializing_if = "Isolation::is_default")]
    pub isolation: Isolation,
    /// A shell command run once in an isolated child's checkout before its first run
    /// (e.g. `npm ci`), in the child's sandbox and bounded like a `bash` call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup: Option<String>,
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
            read_only: false,
            writable_paths: Vec::new(),
            require_enforcement: false,
            network: None,
            tool_limits: ToolLimitsConfig::default(),
            worker: WorkerKind::Rust,
            isolation: Isolation::Shared,
            setup: None,
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
            read_only: false,
            writable_paths: Vec::new(),
            require_enforcement: false,
            network: None,
            tool_limits: ToolLimitsConfig::default(),
            worker: WorkerKind::Rust,
            isolation: Isolation::Shared,
            setup: None,
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

/// The built-in templates plus the user's, resolvable by id, and the `[tool_limits]`
/// defaults every one of them resolves its tool limits over.
#[derive(Clone, Debug, Default)]
pub struct Templates {
    user: BTreeMap<TemplateId, Template>,
    tool_limits: ToolLimitsConfig,
}

impl Templates {
    /// The catalog; a user template may not reuse a built-in id, nor set a tool limit
    /// outside its range.
    pub fn new(user: BTreeMap<TemplateId, Template>) -> Result<Self, TemplateError> {
        if let Some(id) = user
            .keys()
            .find(|id| Template::BUILTIN_IDS.contains(&id.as_str()))
        {
            return Err(TemplateError::ShadowsBuiltin { id: id.clone() });
        }
        for (id, template) in &user {
            template
                .tool_limits
                .check()
                .map_err(|bound| TemplateError::ToolLimit {
                    at: format!("[templates.{id}] tool_limits."),
                    bound,
                })?;
        }
        Ok(Self {
            user,
            tool_limits: ToolLimitsConfig::default(),
        })
    }

    /// The catalog with `defaults` (`[tool_limits]`) under every template's own
    /// `tool_limits`, the built-ins' included.
    pub fn with_tool_limits(self, defaults: ToolLimitsConfig) -> Result<Self, TemplateError> {
        defaults.check().map_err(|bound| TemplateError::ToolLimit {
            at: "[tool_limits] ".to_owned(),
            bound,
        })?;
        Ok(Self {
            tool_limits: defaults,
            ..self
        })
    }

    /// The tool limits of a template that sets none: `[tool_limits]` over the shipped ones.
    pub fn default_tool_limits(&self) -> ToolLimits {
        self.tool_limits.over(ToolLimits::SHIPPED)
    }

    /// The tool limits `template` (resolved from this catalog) is frozen with: its own keys,
    /// else `[tool_limits]`, else the shipped values.
    pub fn tool_limits(&self, template: &Template) -> ToolLimits {
        template.tool_limits.over(self.default_tool_limits())
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

/// Why a template could not be resolved or frozen, or a snapshot not loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemplateError {
    /// No such template.
    NotFound {
        /// The id asked for.
        id: String,
    },
    /// A malformed template id.
    InvalidId {
        /// The id, shortened.
        shown: String,
    },
    /// A user template reuses a built-in id.
    ShadowsBuiltin {
        /// The id.
        id: TemplateId,
    },
    /// The grant cannot be enforced exactly.
    UnsupportedGrant {
        /// What cannot be granted.
        what: String,
    },
    /// A tool limit outside its range.
    ToolLimit {
        /// Where it is set, as the message's prefix (`[tool_limits] `,
        /// `[templates.<id>] tool_limits.`).
        at: String,
        /// The key, its value and its range.
        bound: ToolLimitOutOfRange,
    },
    /// A size or count over policy.
    Limit(LimitExceeded),
    /// A stored snapshot does not match its digest.
    DigestMismatch {
        /// The digest stored with it.
        stored: Sha256Digest,
        /// The digest of its content.
        computed: Sha256Digest,
    },
    /// The snapshot could not be encoded.
    Encoding {
        /// Why.
        reason: String,
    },
}

impl Described for TemplateError {
    fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TemplateError::NotFound { id } => write!(
                f,
                "no built-in or configured template `{id}`; built-ins are researcher and coder, user templates come from the config file"
            ),
            TemplateError::InvalidId { shown } => write!(
                f,
                "template id `{shown}` is not a TemplateId: it must be 1..=64 characters of a-z 0-9 _ -, starting with a-z or 0-9 (pattern ^[a-z0-9][a-z0-9_-]{{0,63}}$); rename it"
            ),
            TemplateError::ShadowsBuiltin { id } => write!(
                f,
                "user template `{id}` reuses a built-in id; rename it in the config file"
            ),
            TemplateError::UnsupportedGrant { what } => {
                write!(f, "{what}; fix the template, nothing was spawned")
            }
            TemplateError::ToolLimit { at, bound } => {
                write!(f, "{at}{bound}; fix the configuration file")
            }
            TemplateError::Limit(e) => e.describe(f),
            TemplateError::DigestMismatch { stored, computed } => write!(
                f,
                "stored grant snapshot has digest {stored} but its content hashes to {computed}; it was altered and is not used"
            ),
            TemplateError::Encoding { reason } => {
                write!(f, "grant snapshot could not be encoded: {reason}")
            }
        }
    }
}

crate::coded_display!(TemplateError);

impl std::error::Error for TemplateError {}

impl From<LimitExceeded> for TemplateError {
    fn from(e: LimitExceeded) -> Self {
        TemplateError::Limit(e)
    }
}

impl Coded for TemplateError {
    fn code(&self) -> ErrorCode {
        match self {
            TemplateError::NotFound { .. } => ErrorCode::TemplateNotFound,
            TemplateError::InvalidId { .. }
            | TemplateError::ShadowsBuiltin { .. }
            | TemplateError::ToolLimit { .. } => ErrorCode::InvalidRequest,
            TemplateError::UnsupportedGrant { .. } => ErrorCode::UnsupportedGrant,
            TemplateError::Limit(e) => e.code(),
            TemplateError::DigestMismatch { .. } | TemplateError::Encoding { .. } => {
                ErrorCode::Internal
            }
        }
    }
}

#[cfg(test)]
mod tests;
