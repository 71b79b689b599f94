//! `subzero_info`: what this broker serves — versions, templates, credentials (never their
//! values), limits, tool limits, the host versions tested and what Subzero enforces.

use std::sync::Arc;

use subzero_core::template::{Template, TemplateId, ToolLimits};
use subzero_protocol as p;

use super::{Command, Context};
use crate::broker::wire::{broken, positive, wire};
use crate::broker::{Broker, BrokerError};
use crate::config::Config;
use crate::secret_env::SecretEnv;
use crate::supervisor::Hello;

/// `subzero_info`.
impl Command for p::InfoInput {
    const TOOL: &'static str = "subzero_info";
    type Output = p::Info;

    async fn execute(self, broker: &Arc<Broker>, _ctx: Context) -> Result<p::Info, BrokerError> {
        let hello = broker
            .hello_for(subzero_core::template::WorkerKind::Rust)
            .await?;
        let templates = broker
            .policy
            .templates
            .ids()
            .into_iter()
            .filter_map(|id| broker.policy.templates.resolve(&id).ok())
            .map(|(id, t)| {
                let worker = broker.workers.engines.template_worker(t.worker);
                template_info(&id, &t, broker.policy.templates.tool_limits(&t), worker)
            })
            .collect::<Result<_, _>>()?;
        let credentials = broker.info_credentials()?;
        let config_problems = broker.info_config_problems()?;
        Ok(p::Info {
            config_problems: (!config_problems.is_empty())
                .then_some(p::InfoConfigProblems(config_problems)),
            control_protocol_version: Some(positive(
                hello.control_version,
                INFO,
                "controlProtocolVersion",
            )?),
            core_version: Some(wire(subzero_core::VERSION, INFO, "coreVersion")?),
            build: broker
                .policy
                .build
                .as_ref()
                .map(|b| {
                    Ok::<_, BrokerError>(p::BuildInfo {
                        commit: wire(b.commit.as_str(), INFO, "build.commit")?,
                        target: wire(b.target.as_str(), INFO, "build.target")?,
                    })
                })
                .transpose()?,
            credential_refs: p::InfoCredentialRefs(credentials),
            enforcement: Broker::info_enforcement(&hello)?,
            host_adapters: broker.info_host_adapters()?,
            limits: broker.info_limits()?,
            budgets: broker.info_budgets(),
            tool_limits: Some(tool_limits(
                &broker.policy.templates.default_tool_limits(),
                "toolLimits",
            )?),
            protocol_version: wire("1", INFO, "protocolVersion")?,
            templates: p::InfoTemplates(templates),
            version: wire(env!("CARGO_PKG_VERSION"), INFO, "version")?,
            worker: info_worker(&hello)?,
            workers: Some(p::InfoWorkers(broker.info_workers().await)),
        })
    }
}

/// `text` cut to at most `max` bytes at a character boundary.
fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The document `info` answers with, as error messages name it.
const INFO: &str = "info result";

impl Broker {
    /// `credentialRefs`: each configured credential, whether it is available, and its origins.
    fn info_credentials(&self) -> Result<Vec<p::CredentialInfo>, BrokerError> {
        self.policy
            .credential_sources
            .iter()
            .map(|c| {
                Ok(p::CredentialInfo {
                    available: c.available,
                    name: wire(c.name.as_str(), INFO, "credentialRefs.name")?,
                    origins: Some(p::CredentialInfoOrigins(
                        c.origins
                            .iter()
                            .map(|o| wire(o.as_str(), INFO, "credentialRefs.origins"))
                            .collect::<Result<Vec<_>, _>>()?,
                    )),
                    source: c.source,
                })
            })
            .collect()
    }

    /// `configProblems`: the entries the lenient configuration left out, and why.
    fn info_config_problems(&self) -> Result<Vec<p::ConfigProblem>, BrokerError> {
        self.policy
            .config_problems
            .iter()
            .map(|problem| {
                Ok(p::ConfigProblem {
                    file: wire(
                        problem.file.to_string_lossy().as_ref(),
                        INFO,
                        "configProblems.file",
                    )?,
                    key: wire(cut(&problem.key, 512), INFO, "configProblems.key")?,
                    reason: wire(cut(&problem.reason, 512), INFO, "configProblems.reason")?,
                })
            })
            .collect()
    }

    /// `enforcement`: what this machine enforces, with the worker's process and
    /// filesystem support and receipts.
    fn info_enforcement(hello: &Hello) -> Result<p::Enforcement, BrokerError> {
        let mut enforcement = enforcement()?;
        // Process groups alone do not hold a tree whose processes leave their group.
        enforcement.process_tree_containment = hello
            .process
            .as_ref()
            .is_none_or(|p| p.mode != p::ProcessContainmentMode::ProcessGroup);
        enforcement
            .containment
            .get_or_insert_with(Default::default)
            .process = hello.process.clone();
        let (filesystem, landlock) = Self::filesystem_support(hello)?;
        enforcement.landlock = landlock;
        let support = enforcement.containment.get_or_insert_with(Default::default);
        support.filesystem = Some(filesystem);
        Self::support_receipts(hello, support);
        Ok(enforcement)
    }

    /// `hostAdapters`: the hosts and the versions they were tested with.
    fn info_host_adapters(&self) -> Result<p::InfoHostAdapters, BrokerError> {
        Ok(p::InfoHostAdapters(
            self.policy
                .host_adapters
                .iter()
                .map(|h| {
                    Ok(p::HostAdapter {
                        host: wire(h.host.as_str(), INFO, "hostAdapters.host")?,
                        tested_version: wire(
                            h.version.as_str(),
                            INFO,
                            "hostAdapters.testedVersion",
                        )?,
                    })
                })
                .collect::<Result<_, BrokerError>>()?,
        ))
    }

    /// The budgets `subzero_info` reports: the defaults and the maxima of a spawn's `budget`.
    fn info_budgets(&self) -> p::Budgets {
        let d = &self.policy.budgets.defaults;
        let m = &self.policy.budgets.maxima;
        p::Budgets {
            defaults: run_budget(
                u64::from(d.max_turns),
                d.deadline_ms,
                d.tool_timeout_ms,
                u64::from(d.max_output_tokens),
                d.token_budget,
            ),
            // Every maximum is named: with none configured for tokens, the protocol's bound.
            maxima: run_budget(
                u64::from(m.max_turns),
                m.deadline_ms,
                m.tool_timeout_ms,
                u64::from(m.max_output_tokens),
                Some(m.token_budget.unwrap_or(TOKEN_BUDGET_BOUND)),
            ),
        }
    }

    /// The limits `subzero_info` reports.
    fn info_limits(&self) -> Result<p::Limits, BrokerError> {
        let limit = |value: u32, field: &str| positive(value, INFO, field);
        Ok(p::Limits {
            active_workers_per_workspace: limit(
                self.workers.worker_slots,
                "limits.activeWorkersPerWorkspace",
            )?,
            event_payload_bytes: limit(
                self.policy.limits.event_payload_bytes,
                "limits.eventPayloadBytes",
            )?,
            event_retention: positive(
                self.store.options().event_retention,
                INFO,
                "limits.eventRetention",
            )?,
            compact_at_percent: std::num::NonZeroU64::new(p::defaults::COMPACT_AT_PERCENT)
                .map(p::LimitsCompactAtPercent::from),
            context_window: self
                .policy
                .context_window
                .map(|w| p::ContextWindow::from(i64::from(w))),
            event_retention_bytes: Some(positive(
                self.store.options().event_retention_bytes,
                INFO,
                "limits.eventRetentionBytes",
            )?),
            queued_followups: Some(positive(
                self.store.options().queued_followups,
                INFO,
                "limits.queuedFollowups",
            )?),
            granted_tools: limit(self.policy.limits.granted_tools, "limits.grantedTools")?,
            model_idle_timeout_ms: Some(limit(
                self.policy.limits.model_idle_timeout_ms,
                "limits.modelIdleTimeoutMs",
            )?),
            model_response_bytes: Some(limit(
                self.policy.limits.model_response_bytes,
                "limits.modelResponseBytes",
            )?),
            output_length_max: limit(
                self.policy.limits.output_chunk_bytes,
                "limits.outputLengthMax",
            )?,
            prompt_bytes: limit(self.policy.limits.prompt_bytes, "limits.promptBytes")?,
            tool_argument_bytes: Some(limit(
                self.policy.limits.tool_argument_bytes,
                "limits.toolArgumentBytes",
            )?),
            wait_ms_max: u64::from(self.policy.limits.get_wait_ms),
            write_runs_per_workspace: limit(
                self.workers.writer_slots,
                "limits.writeRunsPerWorkspace",
            )?,
        })
    }
}

/// A configured credential as `subzero_info` shows it: never its value.
#[derive(Debug)]
pub(in crate::broker) struct CredentialSource {
    name: String,
    source: p::CredentialInfoSource,
    available: bool,
    /// The origins it may be sent to, normalized (`scheme://host:port`).
    origins: Vec<String>,
}

/// Names, sources, availability and origins of the configured credentials.
pub(in crate::broker) fn credential_sources(
    config: &Config,
    secrets: &SecretEnv,
) -> Vec<CredentialSource> {
    use p::CredentialInfoSource::{Env, File};
    config
        .credentials
        .iter()
        .map(|(name, entry)| {
            let (source, available) = match (&entry.env, &entry.file) {
                (Some(var), _) => (Env, secrets.is_set(var)),
                (None, Some(path)) => (File, std::fs::metadata(path).is_ok_and(|m| m.is_file())),
                (None, None) => (Env, false),
            };
            let origins = entry
                .origins
                .iter()
                .filter_map(|o| crate::credentials::Origin::parse_configured(o).ok())
                .map(|o| o.as_str().to_owned())
                .collect();
            CredentialSource {
                name: name.clone(),
                source,
                available,
                origins,
            }
        })
        .collect()
}

/// `limits` as `subzero_info` shows them at `field`.
fn tool_limits(limits: &ToolLimits, field: &str) -> Result<p::ToolLimits, BrokerError> {
    p::ToolLimits::try_from(limits).map_err(|e| broken(INFO, field, e))
}

fn template_info(
    id: &TemplateId,
    t: &Template,
    resolved: ToolLimits,
    worker: Option<p::WorkerName>,
) -> Result<p::TemplateInfo, BrokerError> {
    let at = |field: &str| format!("templates[{id}].{field}");
    let tools = t
        .tools
        .iter()
        .map(|name| wire(name.as_str(), INFO, &at("tools")))
        .collect::<Result<_, _>>()?;
    let skills = t
        .skills
        .iter()
        .map(|s| wire(s.name.as_str(), INFO, &at("skills")))
        .collect::<Result<_, _>>()?;
    let mcp_servers = t
        .mcp_servers
        .iter()
        .map(|s| {
            let allowed_tools = s
                .allowed_tools
                .iter()
                .map(|tool| wire(tool.as_str(), INFO, &at("mcpServers.allowedTools")))
                .collect::<Result<_, _>>()?;
            Ok(p::McpServerInfo {
                allowed_tools: p::McpServerInfoAllowedTools(allowed_tools),
                name: wire(s.name.as_str(), INFO, &at("mcpServers.name"))?,
            })
        })
        .collect::<Result<_, BrokerError>>()?;
    Ok(p::TemplateInfo {
        worker,
        builtin: Template::BUILTIN_IDS.contains(&id.as_str()),
        description: wire(t.description.as_str(), INFO, &at("description"))?,
        mcp_servers: p::TemplateInfoMcpServers(mcp_servers),
        skills: p::TemplateInfoSkills(skills),
        template_id: wire(id.as_str(), INFO, &at("templateId"))?,
        tools: p::TemplateInfoTools(tools),
        tool_limits: Some(tool_limits(&resolved, &at("toolLimits"))?),
        // A grant the template cannot freeze is the spawn's error to tell; here it is left out.
        network: subzero_core::template::NetworkGrant::freeze_for(t.worker, t.network.as_ref())
            .ok()
            .and_then(|g| subzero_protocol::convert::network_grant(&g).ok()),
        write_capable: t.write_capable
            || t.tools
                .iter()
                .any(|n| matches!(n.as_str(), "write" | "edit" | "bash")),
    })
}

/// What Subzero enforces and what it does not, as `info` states it.
const ENFORCEMENT_NOTES: [&str; 4] = [
    "The workspace is not a sandbox: tools run with the launching user's OS authority.",
    "bash and MCP servers read anything the user can; they reach only the network of their template's grant (templates[].network: none, an allowlist through a proxy, or open) where containment.network has a namespace; their writes are confined only where containment.filesystem names a Landlock ABI (read-only children: none; write-capable: workspace, scratch, writable_paths).",
    "Only Subzero's own write-capable runs are serialized; the host and other programs can still edit files.",
    "Keys are redacted by exact value; a transformed key (e.g. base64) is not recognised.",
];

fn enforcement() -> Result<p::Enforcement, BrokerError> {
    let notes = ENFORCEMENT_NOTES
        .into_iter()
        .map(|note| wire(note, INFO, "enforcement.notes"))
        .collect::<Result<_, _>>()?;
    Ok(p::Enforcement {
        // Filled by `info` from the worker's hello.
        containment: None,
        landlock: None,
        notes: p::EnforcementNotes(notes),
        process_tree_containment: true,
        sandbox: false,
    })
}

/// The most `RunBudget.tokenBudget` can say (the schema's bound): the token maximum a spawn
/// meets when `[budgets.max]` configures none.
const TOKEN_BUDGET_BOUND: u64 = 2_000_000_000;

/// A `RunBudget` of these values (a zero, which `[budgets]` refuses at load, is left out).
fn run_budget(
    max_turns: u64,
    deadline_ms: u64,
    tool_timeout_ms: u64,
    max_output_tokens: u64,
    token_budget: Option<u64>,
) -> p::RunBudget {
    use std::num::NonZeroU64;
    p::RunBudget {
        max_turns: NonZeroU64::new(max_turns).map(Into::into),
        deadline_ms: NonZeroU64::new(deadline_ms).map(Into::into),
        tool_timeout_ms: NonZeroU64::new(tool_timeout_ms).map(Into::into),
        max_output_tokens: NonZeroU64::new(max_output_tokens).map(Into::into),
        token_budget: token_budget.and_then(NonZeroU64::new).map(Into::into),
    }
}

/// `worker`: the worker's name, protocols, steering, transcript and version.
fn info_worker(hello: &Hello) -> Result<p::WorkerInfo, BrokerError> {
    Ok(p::WorkerInfo {
        name: wire(hello.name.as_str(), INFO, "worker.name")?,
        protocols: p::WorkerInfoProtocols(
            hello
                .protocols
                .iter()
                .map(|api| wire(api.as_str(), INFO, "worker.protocols"))
                .collect::<Result<_, _>>()?,
        ),
        steering: hello.steering,
        transcript_version: positive(hello.transcript_version, INFO, "worker.transcriptVersion")?,
        version: wire(hello.version.as_str(), INFO, "worker.version")?,
    })
}

#[cfg(test)]
mod tests {
    use subzero_protocol::Validate;

    use super::*;

    #[test]
    fn the_token_budget_bound_is_the_protocols() {
        let budget = |tokens: u64| {
            serde_json::from_str::<p::RunBudget>(&format!(r#"{{"tokenBudget": {tokens}}}"#))
                .map_err(|e| e.to_string())
                .and_then(|b| b.validate().map_err(|e| e.to_string()))
        };
        assert!(budget(TOKEN_BUDGET_BOUND).is_ok());
        assert!(budget(TOKEN_BUDGET_BOUND + 1).is_err());
    }
}
