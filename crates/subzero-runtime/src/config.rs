//! The configuration file (TOML, snake_case): credentials, user templates, limits.
//!
//! The raw shape stays close to `docs/protocol.md`; unknown keys are rejected so a
//! typo is reported instead of silently ignored. A missing file is an empty config.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use subzero_core::template::{Template, TemplateError, TemplateId};

use crate::credentials::Origin;
use crate::error::{RuntimeError, RuntimeResult};

/// The whole configuration file.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `[credentials.NAME]` tables.
    #[serde(default)]
    pub credentials: BTreeMap<String, CredentialEntry>,
    /// `[templates.ID]` tables, in the core's template shape (the broker resolves ids
    /// and freezes grants).
    #[serde(default)]
    pub templates: BTreeMap<String, subzero_core::template::Template>,
    /// `[limits]`.
    #[serde(default)]
    pub limits: LimitsConfig,
    /// `[containment]`.
    #[serde(default)]
    pub containment: ContainmentConfig,
}

/// `[containment]`: how workers and their tool processes are contained.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ContainmentConfig {
    /// Process-tree containment.
    pub process: ProcessContainmentConfig,
    /// Filesystem enforcement (Landlock) of tool processes.
    pub filesystem: FilesystemContainmentConfig,
}

/// `[containment] filesystem`: Landlock where the kernel has it, or never (as on a kernel
/// without it — for testing that path, and for a setup where Landlock breaks a tool).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FilesystemContainmentConfig {
    /// Apply Landlock where the kernel has it.
    #[default]
    Auto,
    /// Never apply Landlock.
    Off,
}

/// `[containment] process`: PID namespaces where the kernel allows them, or the forced
/// subreaper fallback.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProcessContainmentConfig {
    /// Each worker as init of its own PID namespace where the kernel allows it.
    #[default]
    Auto,
    /// Never use namespaces.
    Subreaper,
}

/// Where one credential's key comes from and which model origins may use it.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CredentialEntry {
    /// Environment variable holding the key.
    pub env: Option<String>,
    /// File holding the key (relative paths are relative to the config file).
    pub file: Option<PathBuf>,
    /// Allowed model origins, e.g. `"https://api.openai.com:443"`.
    pub origins: Vec<String>,
}

/// `[limits]`: policy limits with the seed's defaults.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// Active workers per workspace, across brokers.
    pub active_workers_per_workspace: u32,
    /// Write-capable runs per workspace, across brokers.
    pub write_runs_per_workspace: u32,
    /// Prompt / message size.
    pub prompt_bytes: u64,
    /// Events retained per child.
    pub event_retention: u64,
    /// Event payload bytes retained per child.
    pub event_retention_bytes: u64,
    /// Bytes of one model response body as the worker receives it.
    pub model_response_bytes: u64,
    /// Bytes of one tool call's arguments.
    pub tool_argument_bytes: u64,
    /// Longest silence of a model endpoint in milliseconds.
    pub model_idle_timeout_ms: u64,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            active_workers_per_workspace: 4,
            write_runs_per_workspace: 1,
            prompt_bytes: 64 * 1024,
            event_retention: 1000,
            event_retention_bytes: 1024 * 1024,
            model_response_bytes: u64::from(subzero_core::Limits::SEED.model_response_bytes),
            tool_argument_bytes: u64::from(subzero_core::Limits::SEED.tool_argument_bytes),
            model_idle_timeout_ms: u64::from(subzero_core::Limits::SEED.model_idle_timeout_ms),
        }
    }
}

impl Config {
    /// Read and validate the file at `path`; a missing file is the default config.
    pub fn load(path: &Path) -> RuntimeResult<Config> {
        match std::fs::read_to_string(path) {
            Ok(text) => Config::parse(&text, path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Config::default()),
            Err(e) => Err(RuntimeError::Config {
                path: path.to_path_buf(),
                message: format!("cannot be read: {e}"),
            }),
        }
    }

    /// Parse and validate `text` as if read from `path` (used for messages and for
    /// resolving relative credential files).
    pub fn parse(text: &str, path: &Path) -> RuntimeResult<Config> {
        let fail = |message: String| RuntimeError::Config {
            path: path.to_path_buf(),
            message,
        };
        let mut config: Config = toml::from_str(text).map_err(|e| fail(e.to_string()))?;
        for name in config.templates.keys() {
            check_template_id(name).map_err(|e| fail(format!("[templates.{name}]: {e}")))?;
        }
        let base = path.parent().unwrap_or(Path::new("/"));
        for (name, entry) in &mut config.credentials {
            match (&entry.env, &entry.file) {
                (Some(_), None) | (None, Some(_)) => {}
                _ => {
                    return Err(fail(format!(
                        "[credentials.{name}] needs exactly one of env = \"VAR\" or file = \"path\""
                    )));
                }
            }
            if let Some(file) = &entry.file
                && file.is_relative()
            {
                entry.file = Some(base.join(file));
            }
            if entry.origins.is_empty() {
                return Err(fail(format!(
                    "[credentials.{name}] lists no origins; add origins = [\"https://host:443\"] naming the model endpoints allowed to receive this key"
                )));
            }
            for origin in &entry.origins {
                Origin::parse_configured(origin).map_err(|why| {
                    fail(format!("[credentials.{name}] origin {origin:?}: {why}"))
                })?;
            }
        }
        let limits = &config.limits;
        if limits.active_workers_per_workspace == 0
            || limits.write_runs_per_workspace == 0
            || limits.prompt_bytes == 0
            || limits.event_retention == 0
            || limits.event_retention_bytes == 0
        {
            return Err(fail("every [limits] value must be at least 1".to_owned()));
        }
        // Last, so the targeted messages above win; this catches every other bound.
        check_contract(text).map_err(fail)?;
        Ok(config)
    }
}

/// A `[templates.<id>]` key must be a wire `TemplateId` (so `subzero_info`, `subzero_get`
/// and the grant snapshot can carry it) and not a built-in's id.
fn check_template_id(name: &str) -> Result<(), TemplateError> {
    let id = TemplateId::parse(name)?;
    if Template::BUILTIN_IDS.contains(&name) {
        return Err(TemplateError::ShadowsBuiltin { id });
    }
    Ok(())
}

/// Check the file against the contract (`schema-src/v1/config.schema.json`, through its
/// generated type): unknown keys, patterns and every bound, with the offending key named.
fn check_contract(text: &str) -> Result<(), String> {
    use subzero_protocol::Validate;
    let raw: toml::Value = toml::from_str(text).map_err(|e| e.to_string())?;
    let json = serde_json::to_value(&raw).map_err(|e| e.to_string())?;
    let contract: subzero_protocol::Config =
        serde_path_to_error::deserialize(json).map_err(|e| {
            let path = e.path().to_string();
            format!("at `{path}`: {}", e.into_inner())
        })?;
    contract.validate().map_err(|e| e.to_string())
}
