//! What the configuration allows and provides: templates, credentials and the secrets the
//! broker captured, limits and budgets, and the entries it left out. Read once, at start.

use std::path::{Path, PathBuf};

use secrecy::{ExposeSecret, SecretString};
use subzero_core::template::{TemplateId, Templates};
use subzero_core::{ErrorCode, Limits};
use subzero_protocol as p;

use super::commands::info::{CredentialSource, credential_sources};
use super::{BrokerError, BrokerOptions, TestedHost, live};
use crate::config::{Config, ConfigProblem};
use crate::credentials::CredentialResolver;
use crate::secret_env::SecretEnv;

/// The broker's configuration, as it serves it.
#[derive(Debug)]
pub(super) struct Policy {
    pub(super) templates: Templates,
    pub(super) credentials: CredentialResolver,
    pub(super) credential_sources: Vec<CredentialSource>,
    pub(super) secrets: SecretEnv,
    config_path: PathBuf,
    pub(super) host_adapters: Vec<TestedHost>,
    pub(super) build: Option<super::BuildFacts>,
    pub(super) limits: Limits,
    /// `[limits] context_window`: the window of a model whose spawn or resume names none.
    pub(super) context_window: Option<u32>,
    /// Per-run budgets of a spawn: defaults and maxima (`[budgets]`).
    pub(super) budgets: subzero_core::Budgets,
    /// Configuration entries left out at start (`subzero_info.configProblems`).
    pub(super) config_problems: Vec<ConfigProblem>,
}

impl Policy {
    /// The policy of `config` (read from `options.config_path`), with the entries the
    /// lenient load left out in `problems` and those it leaves out itself added.
    pub(super) fn new(
        config: &Config,
        options: &BrokerOptions,
        mut problems: Vec<ConfigProblem>,
    ) -> Result<Policy, BrokerError> {
        let credentials = credential_resolver(config, options)?;
        let limits = limits_from(config);
        let templates = user_templates(config, &limits, &options.config_path, &mut problems)?;
        for problem in &problems {
            tracing::warn!(file = %problem.file.display(), key = %problem.key, reason = %problem.reason, "configuration entry left out");
        }
        Ok(Policy {
            templates,
            credentials,
            credential_sources: credential_sources(config, &options.secrets),
            secrets: options.secrets.clone(),
            config_path: options.config_path.clone(),
            host_adapters: options.host_adapters.clone(),
            build: options.build.clone(),
            limits,
            context_window: config.limits.context_window,
            budgets: config
                .budgets
                .budgets()
                .map_err(|why| BrokerError::internal(format!("[budgets]: {why}")))?,
            config_problems: problems,
        })
    }

    /// The model a spawn or resume names, with its key resolved.
    pub(super) fn credential(&self, model: &p::ModelRef) -> Result<live::ModelKey, BrokerError> {
        let api = model.api_or_default();
        let name = model.credential_ref.as_str();
        if let Some(problem) = self.config_problem("credentials", name) {
            return Err(BrokerError::new(
                ErrorCode::CredentialsRequired,
                format!(
                    "credentialRef {name:?} is configured but broken, so this broker left it out: {}; fix the file and restart the MCP server (subzero doctor lists every problem)",
                    problem.describe()
                ),
            ));
        }
        let key: SecretString = self
            .credentials
            .resolve(model.credential_ref.as_str(), model.url.as_str())?;
        Ok(live::ModelKey {
            url: model.url.to_string(),
            model: model.model.to_string(),
            api,
            output_tokens_param: model.output_tokens_param,
            context_window: model
                .context_window
                .as_ref()
                .and_then(|w| u32::try_from(w.0).ok())
                .or(self.context_window),
            credential_ref: model.credential_ref.to_string(),
            key,
        })
    }

    /// The configuration file.
    pub(super) fn config_path(&self) -> &Path {
        &self.config_path
    }

    /// The problem that left `[section.name]` out of the configuration, if one did.
    pub(super) fn config_problem(&self, section: &str, name: &str) -> Option<&ConfigProblem> {
        let key = format!("{section}.{name}");
        self.config_problems.iter().find(|p| p.key == key)
    }
}

/// The credentials the configuration names, their secrets read from those the broker
/// captured at start (never from its live environment).
fn credential_resolver(
    config: &Config,
    options: &BrokerOptions,
) -> Result<CredentialResolver, BrokerError> {
    let secrets = options.secrets.clone();
    Ok(CredentialResolver::with_env(
        config,
        &options.config_path,
        move |name| secrets.get(name).map(|v| v.expose_secret().into()),
    )?)
}

/// The configured templates, checked at load: a template whose instructions are over
/// the policy is refused now (`limit_exceeded`), not at every spawn of it.
/// The configuration's templates the broker can serve. One that the core refuses, whose
/// instructions are too long or whose skill file cannot be read is left out and reported
/// in `problems`, like an entry the file check left out.
fn user_templates(
    config: &Config,
    limits: &Limits,
    config_path: &Path,
    problems: &mut Vec<ConfigProblem>,
) -> Result<Templates, BrokerError> {
    let base = config_path.parent().unwrap_or(Path::new("/"));
    let mut user = std::collections::BTreeMap::new();
    for (name, raw) in &config.templates {
        let refused = |e: BrokerError| (e.code(), e.message().to_owned());
        let checked = TemplateId::parse(name)
            .map_err(|e| (ErrorCode::InvalidRequest, e.to_string()))
            .and_then(|id| {
                limits
                    .check_instructions(&raw.instructions)
                    .map_err(|e| refused(BrokerError::from(e)))?;
                let alone = std::collections::BTreeMap::from([(id.clone(), raw.clone())]);
                Templates::new(alone).map_err(|e| refused(BrokerError::from(e)))?;
                unreadable_skill(raw, base)
                    .map_or(Ok(id), |why| Err((ErrorCode::UnsupportedGrant, why)))
            });
        match checked {
            Ok(id) => {
                user.insert(id, raw.clone());
            }
            Err((code, reason)) => {
                problems.push(ConfigProblem {
                    file: config_path.to_path_buf(),
                    key: format!("templates.{name}"),
                    reason,
                    code,
                });
            }
        }
    }
    Templates::new(user)
        .and_then(|templates| templates.with_tool_limits(config.tool_limits))
        .map_err(|e| BrokerError::invalid("templates", format!("configuration templates: {e}")))
}

/// Why one of `template`'s skill files cannot be read, if one cannot.
fn unreadable_skill(template: &subzero_core::template::Template, base: &Path) -> Option<String> {
    template.skills.iter().find_map(|skill| {
        let path = Path::new(&skill.path);
        let full = if path.is_absolute() {
            path.to_path_buf()
        } else {
            base.join(path)
        };
        std::fs::File::open(&full).err().map(|e| {
            format!(
                "skill `{}` cannot be read from {}: {e}",
                skill.name,
                full.display()
            )
        })
    })
}

fn limits_from(config: &Config) -> Limits {
    let mut limits = Limits::SEED;
    limits.prompt_bytes = u32::try_from(config.limits.prompt_bytes).unwrap_or(u32::MAX);
    limits.active_workers_per_workspace = config.limits.active_workers_per_workspace;
    limits.write_runs_per_workspace = config.limits.write_runs_per_workspace;
    limits.event_retention = u32::try_from(config.limits.event_retention).unwrap_or(u32::MAX);
    limits.queued_followups = config.limits.queued_followups;
    let narrow = |value: u64| u32::try_from(value).unwrap_or(u32::MAX);
    limits.model_response_bytes = narrow(config.limits.model_response_bytes);
    limits.tool_argument_bytes = narrow(config.limits.tool_argument_bytes);
    limits.model_idle_timeout_ms = narrow(config.limits.model_idle_timeout_ms);
    limits
}
