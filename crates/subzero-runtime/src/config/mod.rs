//! The configuration file (TOML, snake_case): credentials, user templates, limits, tool
//! limits, containment and budgets.
//!
//! The raw shape stays close to `docs/protocol.md`; unknown keys are rejected so a
//! typo is reported instead of silently ignored. A missing file is an empty config.
//! [`Config::parse`] refuses a file with any problem (`subzero doctor`, tests);
//! a broker loads it with [`Config::load_lenient`], which leaves out only what is broken.

mod lenient;

pub use lenient::{ConfigProblem, LoadedConfig};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use subzero_core::template::{Template, TemplateError, TemplateId, ToolLimitsConfig};

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
    /// `[budgets]`: per-run budgets of a spawn — defaults and maxima.
    #[serde(default)]
    pub budgets: BudgetsConfig,
    /// `[tool_limits]`: kernel bounds on the tool processes of every template's children
    /// (built-ins included), under each template's own `tool_limits`; a key set nowhere
    /// takes [`subzero_core::template::ToolLimits::SHIPPED`].
    #[serde(default)]
    pub tool_limits: ToolLimitsConfig,
    /// `[workers]`: where the worker implementations other than the built-in Rust one live.
    #[serde(default)]
    pub workers: WorkersConfig,
    /// `[isolation]`: what an isolated checkout gets besides the tracked files.
    #[serde(default)]
    pub isolation: IsolationConfig,
}

/// `[workers]`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WorkersConfig {
    /// `[workers.pi]`: the Pi SDK worker.
    pub pi: PiWorkerConfig,
}

/// `[isolation]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IsolationConfig {
    /// Gitignore-style patterns of ignored files copied into each checkout, besides the
    /// workspace's `.worktreeinclude`.
    pub include: Vec<String>,
    /// Ignored directories linked (read-only to the child) into each checkout.
    pub share: Vec<String>,
    /// `subzero gc` removes applied, discarded and unchanged checkouts older than this.
    pub keep_days: u32,
}

impl Default for IsolationConfig {
    fn default() -> Self {
        IsolationConfig {
            include: Vec::new(),
            share: vec!["node_modules".to_owned(), ".venv".to_owned()],
            keep_days: 7,
        }
    }
}

/// `[workers.pi]`: where the Pi worker is installed; each key left out is found by itself
/// (`crate::workers::locate_pi`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PiWorkerConfig {
    /// The worker's folder (`workers/pi` of a checkout, after `npm ci` there).
    pub dir: Option<PathBuf>,
    /// The Node that runs it (22.19 or later).
    pub node: Option<PathBuf>,
}

/// `[budgets]`: `[budgets.default]` is what a spawn without `budget.X` gets,
/// `[budgets.max]` the most it may ask for.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BudgetsConfig {
    /// `[budgets.default]`.
    pub default: BudgetValues,
    /// `[budgets.max]`.
    pub max: BudgetValues,
}

/// One `[budgets.*]` table; an absent key keeps the shipped value.
#[derive(Clone, Copy, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BudgetValues {
    pub max_turns: Option<u32>,
    pub deadline_ms: Option<u64>,
    pub tool_timeout_ms: Option<u64>,
    pub max_output_tokens: Option<u32>,
    pub token_budget: Option<u64>,
}

impl BudgetsConfig {
    /// The budgets in force, or why the tables make no sense (a default past its
    /// maximum, a zero).
    pub fn budgets(&self) -> Result<subzero_core::Budgets, String> {
        let seed = subzero_core::Budgets::SEED;
        let d = &self.default;
        let m = &self.max;
        let maxima = subzero_core::budget::BudgetMaxima {
            max_turns: m.max_turns.unwrap_or(seed.maxima.max_turns),
            deadline_ms: m.deadline_ms.unwrap_or(seed.maxima.deadline_ms),
            tool_timeout_ms: m.tool_timeout_ms.unwrap_or(seed.maxima.tool_timeout_ms),
            max_output_tokens: m.max_output_tokens.unwrap_or(seed.maxima.max_output_tokens),
            token_budget: m.token_budget.or(seed.maxima.token_budget),
        };
        // A default left out follows a lowered maximum; one set past its maximum is refused.
        let defaults = subzero_core::template::RunLimits {
            max_turns: d
                .max_turns
                .unwrap_or(seed.defaults.max_turns.min(maxima.max_turns)),
            deadline_ms: d
                .deadline_ms
                .unwrap_or(seed.defaults.deadline_ms.min(maxima.deadline_ms)),
            tool_timeout_ms: d
                .tool_timeout_ms
                .unwrap_or(seed.defaults.tool_timeout_ms.min(maxima.tool_timeout_ms)),
            max_output_tokens: d.max_output_tokens.unwrap_or(
                seed.defaults
                    .max_output_tokens
                    .min(maxima.max_output_tokens),
            ),
            token_budget: d.token_budget.or(seed.defaults.token_budget),
        };
        subzero_core::Budgets::new(defaults, maxima)
    }
}

/// `[containment]`: how workers and their tool processes are contained.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ContainmentConfig {
    /// Process-tree containment.
    pub process: ProcessContainmentConfig,
    /// Filesystem enforcement (Landlock) of tool processes.
    pub filesystem: FilesystemContainmentConfig,
    /// Network namespaces for tool processes.
    pub network: NetworkContainmentConfig,
}

/// `[containment] network`: a network namespace for the tools of a grant other than
/// `open` where the kernel allows it, or never (as on a kernel that refuses one — for
/// testing that path; such grants are then refused).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NetworkContainmentConfig {
    /// Where the kernel allows it.
    #[default]
    Auto,
    /// Never.
    Off,
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

/// `[containment] process`: PID namespaces where the kernel allows them, else a cgroup
/// v2 per worker, else the subreaper; or one of the fallbacks, forced.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProcessContainmentConfig {
    /// Each worker as init of its own PID namespace where the kernel allows it, else in
    /// its own cgroup where a writable cgroup v2 subtree exists, else the subreaper.
    #[default]
    Auto,
    /// Never use namespaces: each worker in its own cgroup (the broker refuses to start
    /// where it cannot make one).
    Cgroup,
    /// Never use namespaces or cgroups.
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
    /// Follow-up runs queued behind one child's active run (1..256; the contract checks
    /// the range at load).
    pub queued_followups: u32,
    /// Bytes of one model response body as the worker receives it.
    pub model_response_bytes: u64,
    /// Bytes of one tool call's arguments.
    pub tool_argument_bytes: u64,
    /// Longest silence of a model endpoint in milliseconds.
    pub model_idle_timeout_ms: u64,
    /// The context window of a model whose spawn or resume names none (tokens).
    pub context_window: Option<u32>,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            active_workers_per_workspace: 4,
            write_runs_per_workspace: 1,
            prompt_bytes: 64 * 1024,
            event_retention: 1000,
            event_retention_bytes: 1024 * 1024,
            queued_followups: subzero_core::Limits::SEED.queued_followups,
            model_response_bytes: u64::from(subzero_core::Limits::SEED.model_response_bytes),
            tool_argument_bytes: u64::from(subzero_core::Limits::SEED.tool_argument_bytes),
            model_idle_timeout_ms: u64::from(subzero_core::Limits::SEED.model_idle_timeout_ms),
            context_window: None,
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
        for (key, value) in [
            (
                "active_workers_per_workspace",
                u64::from(limits.active_workers_per_workspace),
            ),
            (
                "write_runs_per_workspace",
                u64::from(limits.write_runs_per_workspace),
            ),
            ("prompt_bytes", limits.prompt_bytes),
            ("event_retention", limits.event_retention),
            ("event_retention_bytes", limits.event_retention_bytes),
        ] {
            if value == 0 {
                return Err(fail(format!(
                    "[limits] {key} is 0; every [limits] value must be at least 1"
                )));
            }
        }
        config
            .budgets
            .budgets()
            .map_err(|why| fail(format!("[budgets]: {why}")))?;
        config
            .tool_limits
            .check()
            .map_err(|bound| fail(format!("[tool_limits] {bound}")))?;
        for (name, template) in &config.templates {
            template
                .tool_limits
                .check()
                .map_err(|bound| fail(format!("[templates.{name}] tool_limits.{bound}")))?;
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
