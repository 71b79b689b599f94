//! Conversions between `subzero-core`'s values and the wire types (feature `core`, which
//! the runtime enables; the worker speaks the wire types only and does without the core).
//!
//! They live here because the orphan rule allows them only next to one of the two types,
//! and the core must not know the protocol. What a caller may rely on:
//! - The closed enums (`ChildState`, `RunStatus`, `ErrorCode`, built-in tool names) convert
//!   both ways with `From`; each match is exhaustive, so a variant added on one side only
//!   is a compile error here, not a wrong string on the wire.
//! - Ids and digests convert to the wire with `From`: the core's text forms always match
//!   the wire patterns (tested below). Back to the core they are `TryFrom`: the core's own
//!   parse stays the one judge of what an id is.
//! - Values the wire bounds more tightly than the core (the grant snapshot's texts, lists
//!   and limits) convert with `TryFrom`, failing with [`OutOfContract`] naming the field.
//! - Tool limits convert both ways with `TryFrom`: the core's are `u64`, the wire's are
//!   the schema's bounded integers (`processes` a `NonZeroU64`, the others `i64`).

use std::fmt;
use std::num::NonZeroU64;

use subzero_core::digest::DigestParseError;
use subzero_core::template as core_template;
use subzero_core::{IdParseError, Sha256Digest};

use crate::v1::{common, error, grant_snapshot, template};

/// Implements `From` both ways between a core enum and its wire twin with the same
/// variant names.
macro_rules! same_enum {
    ($core:ty, $wire:ty { $($variant:ident),+ $(,)? }) => {
        impl From<$core> for $wire {
            fn from(value: $core) -> Self {
                match value {
                    $(<$core>::$variant => <$wire>::$variant),+
                }
            }
        }

        impl From<$wire> for $core {
            fn from(value: $wire) -> Self {
                match value {
                    $(<$wire>::$variant => <$core>::$variant),+
                }
            }
        }
    };
}

same_enum!(
    subzero_core::ChildState,
    common::ChildState {
        Ready,
        Running,
        Interrupted,
    }
);

same_enum!(
    subzero_core::RunStatus,
    common::RunStatus {
        Queued,
        Running,
        StopRequested,
        Stopped,
        Completed,
        BudgetExhausted,
        Failed,
        Interrupted,
    }
);

same_enum!(
    subzero_core::BudgetName,
    common::BudgetName {
        MaxTurns,
        DeadlineMs,
        ToolTimeoutMs,
        MaxOutputTokens,
        TokenBudget,
    }
);

impl From<&common::BudgetReached> for subzero_core::BudgetReached {
    fn from(value: &common::BudgetReached) -> Self {
        Self {
            budget: value.budget.into(),
            limit: value.limit.get(),
            reached: value.reached,
        }
    }
}

impl From<&subzero_core::BudgetReached> for common::BudgetReached {
    fn from(value: &subzero_core::BudgetReached) -> Self {
        Self {
            budget: value.budget.into(),
            limit: NonZeroU64::new(value.limit).unwrap_or(NonZeroU64::MIN),
            reached: value.reached,
        }
    }
}

same_enum!(
    subzero_core::Phase,
    common::Phase {
        Idle,
        Starting,
        Model,
        Tool,
        Stopping,
        RecoveryRequired,
    }
);

same_enum!(
    subzero_core::ErrorCode,
    error::ErrorCode {
        InvalidRequest,
        NotFound,
        CredentialsRequired,
        TemplateNotFound,
        UnsupportedGrant,
        LimitExceeded,
        WorkspaceBusy,
        Busy,
        RecoveryRequired,
        StaleRun,
        NotRunning,
        UnsupportedSteer,
        CheckpointIncompatible,
        WorkerIncompatible,
        ArtifactUnavailable,
        RequestConflict,
        ModelRequestFailed,
        ContextExhausted,
        RuntimeShuttingDown,
        Interrupted,
        StorageUnavailable,
        Internal,
    }
);

same_enum!(
    core_template::BuiltinTool,
    template::GrantedToolName {
        Read,
        Grep,
        Find,
        Ls,
        Write,
        Edit,
        Bash,
    }
);

impl From<common::TerminalRunStatus> for subzero_core::RunStatus {
    fn from(value: common::TerminalRunStatus) -> Self {
        match value {
            common::TerminalRunStatus::Completed => Self::Completed,
            common::TerminalRunStatus::BudgetExhausted => Self::BudgetExhausted,
            common::TerminalRunStatus::Failed => Self::Failed,
            common::TerminalRunStatus::Stopped => Self::Stopped,
            common::TerminalRunStatus::Interrupted => Self::Interrupted,
        }
    }
}

/// A run status that is not terminal where the wire wants a terminal one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotTerminal(pub subzero_core::RunStatus);

impl fmt::Display for NotTerminal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "run status `{}` is not terminal", self.0)
    }
}

impl std::error::Error for NotTerminal {}

impl TryFrom<subzero_core::RunStatus> for common::TerminalRunStatus {
    type Error = NotTerminal;
    fn try_from(value: subzero_core::RunStatus) -> Result<Self, NotTerminal> {
        use subzero_core::RunStatus as S;
        match value {
            S::Completed => Ok(Self::Completed),
            S::BudgetExhausted => Ok(Self::BudgetExhausted),
            S::Failed => Ok(Self::Failed),
            S::Stopped => Ok(Self::Stopped),
            S::Interrupted => Ok(Self::Interrupted),
            S::Queued | S::Running | S::StopRequested => Err(NotTerminal(value)),
        }
    }
}

/// Implements `From<core id>` for a wire id (the core's text form always matches the
/// wire pattern) and `TryFrom<&wire id>` for the core id (the core's parse decides).
macro_rules! id_conversions {
    ($core:ident => $wire:ident) => {
        impl From<subzero_core::$core> for common::$wire {
            fn from(id: subzero_core::$core) -> Self {
                match common::$wire::try_from(id.to_string()) {
                    Ok(wire) => wire,
                    Err(e) => unreachable!(
                        "a core {} is its prefix and a 26-character ULID, which the wire pattern accepts: {e}",
                        stringify!($core)
                    ),
                }
            }
        }

        impl TryFrom<&common::$wire> for subzero_core::$core {
            type Error = IdParseError;
            fn try_from(id: &common::$wire) -> Result<Self, IdParseError> {
                subzero_core::$core::parse(id.as_str())
            }
        }
    };
}

id_conversions!(ChildId => ChildId);
id_conversions!(RunId => RunId);
id_conversions!(ArtifactId => ArtifactId);

impl From<Sha256Digest> for grant_snapshot::Digest {
    fn from(digest: Sha256Digest) -> Self {
        match grant_snapshot::Digest::try_from(digest.to_string()) {
            Ok(wire) => wire,
            Err(e) => unreachable!(
                "a core digest is `sha256:` and 64 lowercase hex digits, which the wire pattern accepts: {e}"
            ),
        }
    }
}

impl TryFrom<&grant_snapshot::Digest> for Sha256Digest {
    type Error = DigestParseError;
    fn try_from(digest: &grant_snapshot::Digest) -> Result<Self, DigestParseError> {
        Sha256Digest::parse(digest.as_str())
    }
}

/// A core value the wire bounds more tightly, named by its JSON path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutOfContract {
    field: String,
    problem: String,
}

impl OutOfContract {
    /// `field` (a JSON path such as `mcpServers[0].command`) is refused for `problem`.
    pub fn new(field: impl Into<String>, problem: impl fmt::Display) -> Self {
        Self {
            field: field.into(),
            problem: problem.to_string(),
        }
    }

    /// The JSON path of the refused value.
    pub fn field(&self) -> &str {
        &self.field
    }
}

impl fmt::Display for OutOfContract {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.problem)
    }
}

impl std::error::Error for OutOfContract {}

/// `value` as the wire type `T`, or the field it breaks.
fn wire<T, V>(value: V, field: impl FnOnce() -> String) -> Result<T, OutOfContract>
where
    T: TryFrom<V>,
    T::Error: fmt::Display,
{
    T::try_from(value).map_err(|e| OutOfContract::new(field(), e))
}

fn positive(value: u64, field: &str) -> Result<NonZeroU64, OutOfContract> {
    NonZeroU64::new(value).ok_or_else(|| OutOfContract::new(field, "must be at least 1"))
}

impl TryFrom<&core_template::RunLimits> for grant_snapshot::RunLimits {
    type Error = OutOfContract;
    fn try_from(limits: &core_template::RunLimits) -> Result<Self, OutOfContract> {
        Ok(Self {
            deadline_ms: positive(limits.deadline_ms, "limits.deadlineMs")?,
            max_output_tokens: positive(
                u64::from(limits.max_output_tokens),
                "limits.maxOutputTokens",
            )?,
            max_turns: positive(u64::from(limits.max_turns), "limits.maxTurns")?,
            token_budget: limits
                .token_budget
                .map(|budget| positive(budget, "limits.tokenBudget"))
                .transpose()?,
            tool_timeout_ms: positive(limits.tool_timeout_ms, "limits.toolTimeoutMs")?,
        })
    }
}

/// `value` as a wire integer of type `T` (an `i64` newtype), or the field it breaks.
fn wire_i64<T: From<i64>>(value: u64, field: &str) -> Result<T, OutOfContract> {
    i64::try_from(value)
        .map(T::from)
        .map_err(|_| OutOfContract::new(field, "is past the largest integer the wire carries"))
}

/// A wire `i64` as the core's `u64`, or the field it breaks (a negative value).
fn core_u64(value: i64, field: &str) -> Result<u64, OutOfContract> {
    u64::try_from(value).map_err(|_| OutOfContract::new(field, "must not be negative"))
}

/// The core's resolved tool limits as the snapshot's (and `subzero_info`'s) `toolLimits`.
/// Each field keeps its value; its range is the wire type's `Validate` (and the core's
/// `ToolLimits::check`) to judge.
impl TryFrom<&core_template::ToolLimits> for grant_snapshot::ToolLimits {
    type Error = OutOfContract;
    fn try_from(limits: &core_template::ToolLimits) -> Result<Self, OutOfContract> {
        Ok(Self {
            file_size_bytes: wire_i64(limits.file_size_bytes, "toolLimits.fileSizeBytes")?,
            memory_bytes: wire_i64(limits.memory_bytes, "toolLimits.memoryBytes")?,
            open_files: wire_i64(limits.open_files, "toolLimits.openFiles")?,
            processes: positive(limits.processes, "toolLimits.processes")?.into(),
        })
    }
}

/// The wire's `toolLimits` as the core's.
impl TryFrom<&grant_snapshot::ToolLimits> for core_template::ToolLimits {
    type Error = OutOfContract;
    fn try_from(limits: &grant_snapshot::ToolLimits) -> Result<Self, OutOfContract> {
        Ok(Self {
            processes: limits.processes.0.get(),
            memory_bytes: core_u64(limits.memory_bytes.0, "toolLimits.memoryBytes")?,
            file_size_bytes: core_u64(limits.file_size_bytes.0, "toolLimits.fileSizeBytes")?,
            open_files: core_u64(limits.open_files.0, "toolLimits.openFiles")?,
        })
    }
}

fn mcp_server(
    index: usize,
    server: &core_template::McpServerGrant,
) -> Result<grant_snapshot::McpServerSnapshot, OutOfContract> {
    let at = |field: &str| format!("mcpServers[{index}].{field}");
    let allowed_tools = server
        .allowed_tools
        .iter()
        .enumerate()
        .map(|(i, tool)| wire(tool.as_str(), || at(&format!("allowedTools[{i}]"))))
        .collect::<Result<_, _>>()?;
    let args = server
        .args
        .iter()
        .enumerate()
        .map(|(i, arg)| wire(arg.as_str(), || at(&format!("args[{i}]"))))
        .collect::<Result<_, _>>()?;
    let env_refs = server
        .env_refs
        .iter()
        .map(|(name, reference)| {
            let value = wire(reference.as_str(), || at(&format!("envRefs.{name}")))?;
            Ok((name.clone(), value))
        })
        .collect::<Result<_, OutOfContract>>()?;
    Ok(grant_snapshot::McpServerSnapshot {
        allowed_tools: grant_snapshot::McpServerSnapshotAllowedTools(allowed_tools),
        args: grant_snapshot::McpServerSnapshotArgs(args),
        command: wire(server.command.as_str(), || at("command"))?,
        env_refs,
        name: wire(server.name.as_str(), || at("name"))?,
    })
}

impl TryFrom<&core_template::GrantSnapshot> for grant_snapshot::GrantSnapshot {
    type Error = OutOfContract;
    fn try_from(snapshot: &core_template::GrantSnapshot) -> Result<Self, OutOfContract> {
        let tools = snapshot
            .tools()
            .iter()
            .enumerate()
            .map(|(i, name)| {
                core_template::BuiltinTool::parse(name)
                    .map(template::GrantedToolName::from)
                    .ok_or_else(|| {
                        OutOfContract::new(format!("tools[{i}]"), "is not a built-in tool")
                    })
            })
            .collect::<Result<_, _>>()?;
        let skills = snapshot
            .skills()
            .iter()
            .enumerate()
            .map(|(i, skill)| {
                Ok(grant_snapshot::SkillSnapshot {
                    content: wire(skill.content.as_str(), || format!("skills[{i}].content"))?,
                    name: wire(skill.name.as_str(), || format!("skills[{i}].name"))?,
                })
            })
            .collect::<Result<_, OutOfContract>>()?;
        let mcp_servers = snapshot
            .mcp_servers()
            .iter()
            .enumerate()
            .map(|(i, server)| mcp_server(i, server))
            .collect::<Result<_, _>>()?;
        Ok(Self {
            description: wire(snapshot.description(), || "description".into())?,
            digest: snapshot.digest().into(),
            instructions: wire(snapshot.instructions(), || "instructions".into())?,
            limits: snapshot.limits().try_into()?,
            mcp_servers: grant_snapshot::GrantSnapshotMcpServers(mcp_servers),
            skills: grant_snapshot::GrantSnapshotSkills(skills),
            template_id: wire(snapshot.template_id().as_str(), || "templateId".into())?,
            tools: grant_snapshot::GrantSnapshotTools(tools),
            write_capable: snapshot.write_capable(),
            filesystem: snapshot
                .has_filesystem_grant()
                .then(|| filesystem_grant(&snapshot.filesystem()))
                .transpose()?,
            // Absent exactly when the core snapshot was frozen without it, so the wire
            // form hashes to the same digest.
            tool_limits: snapshot
                .has_tool_limits()
                .then(|| grant_snapshot::ToolLimits::try_from(&snapshot.tool_limits()))
                .transpose()?,
            // Only `off` is stored (an `auto` snapshot keeps the digest it had).
            compaction: match snapshot.compaction() {
                core_template::CompactionMode::Auto => None,
                core_template::CompactionMode::Off => Some(common::Compaction::Off),
            },
            // Only `pi` is stored (a Rust snapshot keeps the digest it had).
            worker: match snapshot.worker() {
                core_template::WorkerKind::Rust => None,
                core_template::WorkerKind::Pi => Some(common::WorkerName::Pi),
            },
        })
    }
}

fn filesystem_grant(
    grant: &core_template::FilesystemGrant,
) -> Result<grant_snapshot::FilesystemGrant, OutOfContract> {
    let writable_paths = grant
        .writable_paths
        .iter()
        .enumerate()
        .map(|(i, path)| wire(path.as_str(), || format!("filesystem.writablePaths[{i}]")))
        .collect::<Result<_, _>>()?;
    Ok(grant_snapshot::FilesystemGrant {
        access: match grant.access {
            core_template::FilesystemAccess::ReadOnly => template::FilesystemAccess::ReadOnly,
            core_template::FilesystemAccess::Workspace => template::FilesystemAccess::Workspace,
        },
        require_enforcement: grant.require_enforcement,
        writable_paths: grant_snapshot::FilesystemGrantWritablePaths(writable_paths),
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use subzero_core::template::{
        GrantSnapshot, RunLimits, Skill, Template, TemplateId, ToolLimits,
    };
    use subzero_core::{ArtifactId, ChildId, ChildState, ErrorCode, Limits, RunId, RunStatus};

    use super::*;

    /// Every core value of `$core` crosses to the wire and back unchanged, and is spelled
    /// on the wire as the core spells it.
    fn same_spelling<C, W>(all: &[C], core_text: impl Fn(C) -> String)
    where
        C: Copy + PartialEq + fmt::Debug + From<W>,
        W: From<C> + serde::Serialize,
    {
        for value in all {
            let wire = W::from(*value);
            let spelled = serde_json::to_value(&wire).unwrap_or_default();
            assert_eq!(spelled, core_text(*value), "{value:?}");
            assert_eq!(C::from(wire), *value);
        }
    }

    #[test]
    fn every_core_state_status_code_and_tool_has_the_same_wire_spelling() {
        same_spelling::<_, common::ChildState>(ChildState::ALL, |s| s.as_str().into());
        same_spelling::<_, common::RunStatus>(RunStatus::ALL, |s| s.as_str().into());
        same_spelling::<_, error::ErrorCode>(&ErrorCode::ALL, |c| c.as_str().into());
        same_spelling::<_, template::GrantedToolName>(&core_template::BuiltinTool::ALL, |t| {
            t.as_str().into()
        });
    }

    #[test]
    fn only_terminal_statuses_become_terminal_run_statuses() {
        for status in RunStatus::ALL {
            let terminal = common::TerminalRunStatus::try_from(*status);
            assert_eq!(terminal.is_ok(), status.is_terminal(), "{status:?}");
            if let Ok(t) = terminal {
                assert_eq!(RunStatus::from(t), *status);
            }
        }
    }

    #[test]
    fn ids_of_every_ulid_cross_to_the_wire_and_back() {
        let fresh = ChildId::generate().to_string();
        let fresh = fresh.trim_start_matches(ChildId::PREFIX);
        for ulid in [
            "00000000000000000000000000",
            "7ZZZZZZZZZZZZZZZZZZZZZZZZZ",
            fresh,
        ] {
            let child = ChildId::parse(&format!("ch_{ulid}"))
                .expect("the smallest, largest and a fresh ULID");
            let run = RunId::parse(&format!("run_{ulid}")).expect("run id");
            let artifact = ArtifactId::parse(&format!("art_{ulid}")).expect("artifact id");
            let wire_child = common::ChildId::from(child);
            assert_eq!(wire_child.as_str(), child.to_string());
            assert_eq!(ChildId::try_from(&wire_child), Ok(child));
            assert_eq!(RunId::try_from(&common::RunId::from(run)), Ok(run));
            assert_eq!(
                ArtifactId::try_from(&common::ArtifactId::from(artifact)),
                Ok(artifact)
            );
        }
    }

    #[test]
    fn digests_cross_to_the_wire_and_back() {
        let digest = Sha256Digest::of(b"leaf");
        let wire = grant_snapshot::Digest::from(digest);
        assert_eq!(wire.as_str(), digest.to_string());
        assert_eq!(Sha256Digest::try_from(&wire).ok(), Some(digest));
    }

    fn frozen(template: &Template, skills: Vec<Skill>) -> GrantSnapshot {
        let id = TemplateId::parse("probe").expect("valid");
        let limits = RunLimits {
            token_budget: Some(50_000),
            ..RunLimits::default()
        };
        let tool_limits = ToolLimits {
            open_files: 1024,
            ..ToolLimits::SHIPPED
        };
        GrantSnapshot::freeze(id, template, skills, limits, tool_limits, &Limits::SEED)
            .expect("valid")
    }

    #[test]
    fn a_grant_snapshot_converts_to_what_its_serde_form_parses_as() {
        let mut with_everything = Template::coder();
        with_everything.skills = vec![core_template::SkillSource {
            name: "style".into(),
            path: "style.md".into(),
        }];
        with_everything.mcp_servers = vec![core_template::McpServerTemplate {
            name: "docs".into(),
            command: "/usr/bin/docs-server".into(),
            args: vec!["--stdio".into(), String::new()],
            env: BTreeMap::from([("TOKEN".into(), "env:DOCS_TOKEN".into())]),
            allowed_tools: vec!["search".into(), "fetch".into()],
        }];
        let skills = vec![Skill {
            name: "style".into(),
            content: "Be brief.".into(),
        }];
        for snapshot in [
            frozen(&Template::researcher(), Vec::new()),
            frozen(&with_everything, skills),
        ] {
            let converted = grant_snapshot::GrantSnapshot::try_from(&snapshot).expect("valid");
            let parsed: grant_snapshot::GrantSnapshot = serde_json::to_value(&snapshot)
                .and_then(serde_json::from_value)
                .expect("valid");
            assert_eq!(converted, parsed);
        }
    }

    #[test]
    fn tool_limits_cross_to_the_wire_and_back_and_validate_there() {
        use crate::Validate;
        let snapshot = frozen(&Template::coder(), Vec::new());
        let wire = grant_snapshot::GrantSnapshot::try_from(&snapshot).expect("valid");
        let limits = wire
            .tool_limits
            .as_ref()
            .expect("every new snapshot carries them");
        assert_eq!(limits.open_files.0, 1024);
        assert_eq!(limits.memory_bytes.0, 4_294_967_296);
        assert_eq!(
            ToolLimits::try_from(limits).ok(),
            Some(snapshot.tool_limits())
        );
        assert!(wire.validate().is_ok());
        let zero = ToolLimits {
            open_files: 0,
            ..ToolLimits::SHIPPED
        };
        let out = grant_snapshot::ToolLimits::try_from(&zero).expect("converts");
        let err = out.validate().expect_err("under the wire minimum");
        assert!(err.to_string().contains("openFiles"), "{err}");
        let no_tasks = ToolLimits {
            processes: 0,
            ..ToolLimits::SHIPPED
        };
        assert_eq!(
            grant_snapshot::ToolLimits::try_from(&no_tasks)
                .err()
                .map(|e| e.field().to_owned()),
            Some("toolLimits.processes".to_owned())
        );
    }

    #[test]
    fn a_snapshot_field_the_wire_refuses_is_named() {
        let mut template = Template::researcher();
        template.mcp_servers = vec![core_template::McpServerTemplate {
            name: "docs".into(),
            command: String::new(),
            args: Vec::new(),
            env: BTreeMap::new(),
            allowed_tools: vec!["search".into()],
        }];
        let refused = grant_snapshot::GrantSnapshot::try_from(&frozen(&template, Vec::new()));
        assert_eq!(
            refused.err().map(|e| e.field().to_owned()),
            Some("mcpServers[0].command".to_owned())
        );
    }
}
