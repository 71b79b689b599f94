//! A frozen grant snapshot to the wire, each text, list and limit checked against the
//! wire's tighter bounds.

use std::fmt;

use subzero_core::template as core_template;

use super::OutOfContract;
use crate::v1::{common, grant_snapshot, template};

/// `value` as the wire type `T`, or the field it breaks.
fn wire<T, V>(value: V, field: impl FnOnce() -> String) -> Result<T, OutOfContract>
where
    T: TryFrom<V>,
    T::Error: fmt::Display,
{
    T::try_from(value).map_err(|e| OutOfContract::new(field(), e))
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
            // Absent exactly when the core snapshot was frozen without it (digest kept).
            network: snapshot
                .has_network_grant()
                .then(|| network_grant(&snapshot.network()))
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
            setup: snapshot
                .setup()
                .map(|setup| wire(setup, || "setup".into()))
                .transpose()?,
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

/// A network grant on the wire (also `subzero_info`'s per-template grant).
pub fn network_grant(
    grant: &core_template::NetworkGrant,
) -> Result<grant_snapshot::NetworkGrant, OutOfContract> {
    use core_template::NetworkGrant as G;
    let (mode, hosts) = match grant {
        G::None => (template::NetworkMode::None, None),
        G::Open => (template::NetworkMode::Open, None),
        G::Allowlist { hosts } => {
            let hosts = hosts
                .iter()
                .enumerate()
                .map(|(i, h)| wire(h.to_string(), || format!("network.hosts[{i}]")))
                .collect::<Result<Vec<_>, _>>()?;
            (
                template::NetworkMode::Allowlist,
                Some(grant_snapshot::NetworkGrantHosts(hosts)),
            )
        }
    };
    Ok(grant_snapshot::NetworkGrant { hosts, mode })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use subzero_core::Limits;
    use subzero_core::template::{
        GrantSnapshot, RunLimits, Skill, Template, TemplateId, ToolLimits,
    };

    use super::*;

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
