//! The immutable grant snapshot frozen from a template at spawn, and the per-run limits,
//! tool limits, skills and MCP server grants it carries.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{
    BuiltinTool, McpServerTemplate, NetworkGrant, Template, TemplateError, TemplateId, ToolLimits,
    WorkerKind,
};
use crate::digest::{Sha256Digest, canonical_json};
use crate::limits::Limits;

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

/// What a child's tool processes may write.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum FilesystemAccess {
    /// Nothing: every write fails (`EACCES` where the kernel enforces it).
    #[serde(rename = "read-only")]
    ReadOnly,
    /// The workspace, the worker's scratch space and the grant's writable paths only.
    #[serde(rename = "workspace")]
    Workspace,
}

impl FilesystemAccess {
    /// The name on the wire and in receipts.
    pub const fn as_str(self) -> &'static str {
        match self {
            FilesystemAccess::ReadOnly => "read-only",
            FilesystemAccess::Workspace => "workspace",
        }
    }
}

/// The filesystem grant frozen into a snapshot: what the worker asks the kernel (Landlock)
/// to enforce on every tool process of the child.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FilesystemGrant {
    /// What tool processes may write.
    pub access: FilesystemAccess,
    /// Absolute paths writable besides the workspace and the scratch space.
    pub writable_paths: Vec<String>,
    /// The child must not run unless the kernel enforces `access`.
    pub require_enforcement: bool,
}

/// Most paths a template may list in `writable_paths`.
pub const WRITABLE_PATHS_MAX: usize = 16;

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
    /// Absent in snapshots frozen before filesystem grants existed (which keeps their
    /// digests): then [`GrantSnapshot::filesystem`] derives it from `write_capable`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    filesystem: Option<FilesystemGrant>,
    /// Absent in snapshots frozen before network grants existed (which keeps their
    /// digests): then [`GrantSnapshot::network`] is `open`, as they were spawned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    network: Option<NetworkGrant>,
    limits: RunLimits,
    /// Absent in snapshots frozen before tool limits existed (which keeps their digests):
    /// then [`GrantSnapshot::tool_limits`] is [`ToolLimits::SHIPPED`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tool_limits: Option<ToolLimits>,
    /// Absent for `auto` (and in every snapshot frozen before compaction existed, which
    /// keeps their digests); only `off` is stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    compaction: Option<CompactionMode>,
    /// Absent for the Rust worker (and in every snapshot frozen before workers were chosen,
    /// which keeps their digests); only `pi` is stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    worker: Option<WorkerKind>,
    /// The template's setup command; absent when it has none (and in every snapshot frozen
    /// before setup commands existed, which keeps their digests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    setup: Option<String>,
}

/// Whether a child compacts its transcript when it outgrows its model's context window
/// (the spawn's `compaction`, frozen into the snapshot).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactionMode {
    /// Compact past the threshold of a known window and once after an overflow refusal.
    Auto,
    /// Never on its own: the run ends `context_exhausted`.
    Off,
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

/// Most bytes of a setup command.
pub const SETUP_MAX_BYTES: usize = 4096;

/// The template's setup command, checked: 1..=[`SETUP_MAX_BYTES`] bytes, no NUL (it is one
/// argument of `bash -c`), and a template that may write (a setup that cannot write its
/// checkout could do nothing).
fn freeze_setup(template: &Template) -> Result<Option<String>, TemplateError> {
    let Some(setup) = &template.setup else {
        return Ok(None);
    };
    let problem = if setup.trim().is_empty() {
        Some("setup is empty; remove it or name a command".to_owned())
    } else if setup.len() > SETUP_MAX_BYTES {
        Some(format!(
            "setup is {} bytes; at most {SETUP_MAX_BYTES}: put a longer one in a script",
            setup.len()
        ))
    } else if setup.contains('\0') {
        Some("setup contains a NUL byte".to_owned())
    } else if template.read_only {
        Some("setup cannot run in a read_only template: its command could not write".to_owned())
    } else {
        None
    };
    match problem {
        Some(what) => Err(TemplateError::UnsupportedGrant { what }),
        None => Ok(Some(setup.clone())),
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
    /// names, same order as declared) and its resolved `tool_limits`
    /// ([`super::Templates::tool_limits`]). Refuses grants the worker cannot enforce
    /// exactly (`unsupported_grant`), sizes over policy (`limit_exceeded`) and a tool
    /// limit outside its range (`invalid_request`).
    pub fn freeze(
        id: TemplateId,
        template: &Template,
        skills: Vec<Skill>,
        run_limits: RunLimits,
        tool_limits: ToolLimits,
        limits: &Limits,
    ) -> Result<Self, TemplateError> {
        limits.check_instructions(&template.instructions)?;
        tool_limits
            .check()
            .map_err(|bound| TemplateError::ToolLimit {
                at: format!("template `{id}` tool_limits."),
                bound,
            })?;
        let mut write_capable = template.write_capable;
        if template.read_only && template.write_capable {
            return Err(TemplateError::UnsupportedGrant {
                what: "a template cannot be both read_only and write_capable".to_owned(),
            });
        }
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
            if template.read_only && tool != BuiltinTool::Bash && tool.writes() {
                return Err(TemplateError::UnsupportedGrant {
                    what: format!(
                        "tool `{name}` writes files and the template is read_only; drop one of them"
                    ),
                });
            }
            // A read-only template's `bash` cannot write: the kernel stops it.
            write_capable |= tool.writes() && !template.read_only;
        }
        let filesystem = freeze_filesystem(template, write_capable)?;
        check_counts(template, &skills, limits)?;
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
            filesystem: Some(filesystem),
            network: Some(NetworkGrant::freeze_for(
                template.worker,
                template.network.as_ref(),
            )?),
            limits: run_limits,
            tool_limits: Some(tool_limits),
            compaction: None,
            worker: (!template.worker.is_default()).then_some(template.worker),
            setup: freeze_setup(template)?,
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
    /// The filesystem grant; for a snapshot frozen before grants had one, `read-only`
    /// unless write-capable, no writable paths, enforcement not required.
    pub fn filesystem(&self) -> FilesystemGrant {
        self.body
            .filesystem
            .clone()
            .unwrap_or_else(|| FilesystemGrant {
                access: if self.body.write_capable {
                    FilesystemAccess::Workspace
                } else {
                    FilesystemAccess::ReadOnly
                },
                writable_paths: Vec::new(),
                require_enforcement: false,
            })
    }
    /// Whether the snapshot carries its filesystem grant (not derived for an old one).
    pub fn has_filesystem_grant(&self) -> bool {
        self.body.filesystem.is_some()
    }
    /// The network grant of the tool processes; `open` for a snapshot frozen before
    /// network grants existed.
    pub fn network(&self) -> NetworkGrant {
        self.body.network.clone().unwrap_or(NetworkGrant::Open)
    }
    /// Whether the snapshot carries its network grant (not `open` standing in for an old
    /// snapshot's).
    pub fn has_network_grant(&self) -> bool {
        self.body.network.is_some()
    }
    /// Per-run limits.
    pub fn limits(&self) -> &RunLimits {
        &self.body.limits
    }
    /// The kernel bounds on the child's tool processes; for a snapshot frozen before tool
    /// limits existed, [`ToolLimits::SHIPPED`].
    pub fn tool_limits(&self) -> ToolLimits {
        self.body.tool_limits.unwrap_or(ToolLimits::SHIPPED)
    }
    /// Whether the snapshot carries its tool limits (not the shipped ones standing in for
    /// an old snapshot's).
    pub fn has_tool_limits(&self) -> bool {
        self.body.tool_limits.is_some()
    }
    /// The child's compaction mode (`auto` unless it was spawned with `off`).
    pub fn compaction(&self) -> CompactionMode {
        self.body.compaction.unwrap_or(CompactionMode::Auto)
    }
    /// The snapshot with compaction mode `mode`, its digest computed again (`auto` is
    /// stored as absent, so an `auto` snapshot keeps the digest it had).
    pub fn with_compaction(mut self, mode: CompactionMode) -> Result<Self, TemplateError> {
        self.body.compaction = (mode == CompactionMode::Off).then_some(mode);
        self.digest = digest_of(&self.body)?;
        Ok(self)
    }
    /// The worker that runs the child (the Rust worker unless the template chose `pi`).
    pub fn worker(&self) -> WorkerKind {
        self.body.worker.unwrap_or_default()
    }

    /// The command run once in an isolated child's checkout before its first run.
    pub fn setup(&self) -> Option<&str> {
        self.body.setup.as_deref()
    }
    /// The digest of the canonical JSON of every other field.
    pub fn digest(&self) -> Sha256Digest {
        self.digest
    }
}

/// The granted tools within policy, and the skills loaded as declared.
fn check_counts(
    template: &Template,
    skills: &[Skill],
    limits: &Limits,
) -> Result<(), TemplateError> {
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
    Ok(())
}

/// The filesystem grant of `template`, whose frozen write-capability is `write_capable`.
fn freeze_filesystem(
    template: &Template,
    write_capable: bool,
) -> Result<FilesystemGrant, TemplateError> {
    if !template.writable_paths.is_empty() && !write_capable {
        return Err(TemplateError::UnsupportedGrant {
            what: "writable_paths needs a write-capable template (grant write, edit or bash, or set write_capable = true; not read_only)".to_owned(),
        });
    }
    if template.writable_paths.len() > WRITABLE_PATHS_MAX {
        return Err(TemplateError::UnsupportedGrant {
            what: format!(
                "writable_paths lists {} paths; at most {WRITABLE_PATHS_MAX}",
                template.writable_paths.len()
            ),
        });
    }
    if let Some(path) = template
        .writable_paths
        .iter()
        .find(|p| !p.starts_with('/') || p.len() > 4096)
    {
        return Err(TemplateError::UnsupportedGrant {
            what: format!(
                "writable path `{}` is not an absolute path",
                path.chars().take(256).collect::<String>()
            ),
        });
    }
    Ok(FilesystemGrant {
        access: if write_capable {
            FilesystemAccess::Workspace
        } else {
            FilesystemAccess::ReadOnly
        },
        writable_paths: template.writable_paths.clone(),
        require_enforcement: template.require_enforcement,
    })
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
