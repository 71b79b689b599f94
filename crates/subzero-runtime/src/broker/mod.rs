//! The Broker service: the eight operations on core + store + supervisor.
//!
//! One broker is one `subzero mcp` process owned by one host. It owns the workers it
//! started (one per busy child), keeps each child's model key in memory only, and
//! shares every durable fact with other brokers of the same OS user through the store.
//! spawn, send and resume return as soon as the run is admitted and its worker has
//! been handed the work; they never wait for the model.

mod admit;
mod checkpoint;
mod containment;
mod engines;
mod error;
mod events;
mod filesystem;
mod get;
mod info;
mod list;
mod live;
mod orphans;
mod output;
mod receipts;
mod resume;
mod snapshot;
mod stop;
mod wire;
mod worker;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use secrecy::{ExposeSecret, SecretString};
use subzero_core::lifecycle::Supervisor;
use subzero_core::template::{TemplateId, Templates};
use subzero_core::{ChildId, ErrorCode, Limits};
use subzero_protocol as p;
use tokio::sync::Notify;

use crate::artifacts::ArtifactFiles;
use crate::config::{Config, ConfigProblem, LoadedConfig};
use crate::credentials::CredentialResolver;
use crate::locks::BrokerIdentity;
use crate::paths::StatePaths;
use crate::scope::WorkspaceScope;
use crate::secret_env::SecretEnv;
use crate::store::{Store, StoreOptions};
use crate::supervisor::limits::LimitParents;
use crate::supervisor::{
    FilesystemMode, ProcessMode, ProcessPlan, Spawner, WorkerLaunch, WorkerSetup,
};
use info::{CredentialSource, credential_sources};

pub use error::BrokerError;
pub use get::ProgressSink;
pub use snapshot::{child_snapshot, child_summary, gap_event, wire_event};

/// The model API protocol used when a caller names none.
pub const DEFAULT_API: &str = "openai-completions";

/// How a broker is set up.
#[derive(Clone, Debug)]
pub struct BrokerOptions {
    /// The default workspace (the host's project directory).
    pub workspace: PathBuf,
    /// The state directory (database, locks, artifacts, transcripts).
    pub state_dir: PathBuf,
    /// The configuration file (a missing file is an empty configuration).
    pub config_path: PathBuf,
    /// The worker executable, run as `subzero-worker worker`.
    pub worker_exe: PathBuf,
    /// Log filter passed to workers as `SUBZERO_LOG`.
    pub worker_log: Option<String>,
    /// The secrets the configuration names (credential `env` variables and MCP `env:`
    /// references), captured once: the broker never reads them from its live environment.
    /// `subzero mcp` scrubs them from its environment; an embedder can use
    /// [`SecretEnv::capture`], which leaves the process environment as it is.
    pub secrets: SecretEnv,
    /// The host versions this build was tested with, reported as `subzero_info.hostAdapters`
    /// (the `subzero` binary passes the table its real-host suite keeps true).
    pub host_adapters: Vec<TestedHost>,
}

/// A host and the exact version of it that was tested (`codex`, `0.171.0`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestedHost {
    pub host: String,
    pub version: String,
}

/// The broker. Cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct Broker {
    /// The process's minting authority, lent to the code that observes each token's
    /// evidence (the worker driver, the checkpoint verification).
    supervisor: &'static Supervisor,
    paths: StatePaths,
    store: Store,
    templates: Templates,
    credentials: CredentialResolver,
    credential_sources: Vec<CredentialSource>,
    secrets: SecretEnv,
    config_path: PathBuf,
    artifacts: ArtifactFiles,
    identity: BrokerIdentity,
    scope: WorkspaceScope,
    other_scopes: Mutex<Vec<WorkspaceScope>>,
    spawner: Spawner,
    worker_exe: PathBuf,
    worker_log: Option<String>,
    host_adapters: Vec<TestedHost>,
    limits: Limits,
    /// `[limits] context_window`: the window of a model whose spawn or resume names none.
    context_window: Option<u32>,
    /// Per-run budgets of a spawn: defaults and maxima (`[budgets]`).
    budgets: subzero_core::Budgets,
    worker_slots: u32,
    writer_slots: u32,
    live: Mutex<HashMap<ChildId, live::Live>>,
    shutting_down: AtomicBool,
    /// The workers a child can run on (`WorkerKind → Engine`).
    engines: engines::Engines,
    steer_receipts: Mutex<receipts::SteerReceipts>,
    /// Worker drivers still running.
    drivers: AtomicUsize,
    /// Woken whenever a worker driver finishes.
    worker_gone: Notify,
    /// Becomes true when the host is gone (stdin EOF or a signal): waits end at once.
    closing: tokio::sync::watch::Sender<bool>,
    /// The last phase line reported in progress notifications, per child.
    last_phase: Mutex<HashMap<ChildId, String>>,
    /// Configuration entries left out at start (`subzero_info.configProblems`).
    config_problems: Vec<ConfigProblem>,
}

impl Broker {
    /// Open the state, recover what earlier brokers left behind, and get ready to serve.
    /// Must be called inside a Tokio runtime.
    pub async fn open(options: BrokerOptions) -> Result<Arc<Broker>, BrokerError> {
        let paths = StatePaths::create(&options.state_dir)?;
        // Only an unreadable or non-TOML file stops the start; a broken entry is left out
        // and reported (`config::lenient`).
        let LoadedConfig {
            config,
            problems: mut config_problems,
        } = Config::load_lenient(&options.config_path)?;
        let credentials = credential_resolver(&config, &options)?;
        let limits = limits_from(&config);
        let templates =
            user_templates(&config, &limits, &options.config_path, &mut config_problems)?;
        for problem in &config_problems {
            tracing::warn!(file = %problem.file.display(), key = %problem.key, reason = %problem.reason, "configuration entry left out");
        }
        // Before anything is written: a forced cgroup that cannot be had refuses the start.
        let process = process_plan(&config, &options.config_path)?;
        let store = Store::open(
            &paths.database(),
            StoreOptions {
                event_retention: config.limits.event_retention,
                event_retention_bytes: config.limits.event_retention_bytes,
                queued_followups: config.limits.queued_followups,
                ..StoreOptions::default()
            },
        )?;
        let identity = BrokerIdentity::acquire(&paths)?;
        let scope = WorkspaceScope::resolve(&options.workspace)?;
        let limit_cgroups = Arc::new(LimitParents::probe());
        recover_before_serving(&store, &paths, identity.token(), &process, &limit_cgroups).await?;
        let spawner = spawner_for(
            &config,
            &paths,
            &options,
            &credentials,
            process,
            limit_cgroups,
        )?;
        let artifacts = ArtifactFiles::new(&paths);
        let engines = engines::Engines::new(&config.workers.pi, &options.worker_exe);
        Ok(Arc::new(Broker {
            supervisor: crate::supervisor::proof::authority()?,
            paths,
            store,
            templates,
            credentials,
            credential_sources: credential_sources(&config, &options.secrets),
            config_problems,
            secrets: options.secrets,
            config_path: options.config_path,
            artifacts,
            identity,
            scope,
            other_scopes: Mutex::new(Vec::new()),
            spawner,
            worker_exe: options.worker_exe,
            worker_log: options.worker_log,
            host_adapters: options.host_adapters,
            limits,
            context_window: config.limits.context_window,
            budgets: config
                .budgets
                .budgets()
                .map_err(|why| BrokerError::internal(format!("[budgets]: {why}")))?,
            worker_slots: config.limits.active_workers_per_workspace,
            writer_slots: config.limits.write_runs_per_workspace,
            live: Mutex::new(HashMap::new()),
            shutting_down: AtomicBool::new(false),
            engines,
            steer_receipts: Mutex::new(receipts::SteerReceipts::new()),
            drivers: AtomicUsize::new(0),
            worker_gone: Notify::new(),
            closing: tokio::sync::watch::Sender::new(false),
            last_phase: Mutex::new(HashMap::new()),
        }))
    }

    /// The store (for inspection tools and tests).
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The default workspace scope.
    pub fn scope(&self) -> &WorkspaceScope {
        &self.scope
    }

    /// The state directory layout.
    pub fn paths(&self) -> &StatePaths {
        &self.paths
    }

    fn launch(
        &self,
        inherit: Vec<std::os::fd::OwnedFd>,
        cwd: &Path,
        engine: Vec<std::ffi::OsString>,
    ) -> WorkerLaunch {
        WorkerLaunch {
            exe: self.worker_exe.clone(),
            inherit,
            cwd: cwd.to_path_buf(),
            log_filter: self.worker_log.clone(),
            engine,
        }
    }

    /// The scope for a caller-named workspace root (or the default). Every scope a
    /// caller names is remembered, so ids from it resolve in later calls of this broker.
    fn scope_for(&self, root: Option<&str>) -> Result<WorkspaceScope, BrokerError> {
        let Some(root) = root else {
            return Ok(self.scope.clone());
        };
        let scope = WorkspaceScope::resolve(Path::new(root)).map_err(|e| {
            BrokerError::invalid("workspaceRoot", BrokerError::from(e).message().to_owned())
        })?;
        if scope != self.scope {
            let mut others = lock(&self.other_scopes);
            if !others.contains(&scope) {
                others.push(scope.clone());
            }
        }
        Ok(scope)
    }

    /// Every scope this broker answers for: its own first, then those callers named.
    fn scopes(&self) -> Vec<WorkspaceScope> {
        let mut all = vec![self.scope.clone()];
        all.extend(lock(&self.other_scopes).iter().cloned());
        all
    }

    /// The host is gone: accept no new work and end every wait now. The full
    /// [`Broker::shutdown`] follows once the MCP session has ended.
    pub fn begin_shutdown(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
        self.closing.send_replace(true);
    }

    /// Whether the broker still accepts work.
    fn check_open(&self) -> Result<(), BrokerError> {
        if self.shutting_down.load(Ordering::SeqCst) {
            return Err(BrokerError::new(
                ErrorCode::RuntimeShuttingDown,
                "this broker is shutting down and accepts no new work; the host will start a new one",
            ));
        }
        Ok(())
    }

    fn owner_token(&self) -> &str {
        self.identity.token()
    }

    fn credential(&self, model: &p::ModelRef) -> Result<live::ModelKey, BrokerError> {
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

    fn config_path(&self) -> &Path {
        &self.config_path
    }

    /// The problem that left `[section.name]` out of the configuration, if one did.
    fn config_problem(&self, section: &str, name: &str) -> Option<&ConfigProblem> {
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

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these short critical sections leaves plain data
    // behind; keep serving rather than poisoning every later call.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
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

/// The configured process containment, detected once: a forced cgroup that cannot be
/// had refuses the start, naming the configuration file.
fn process_plan(config: &Config, path: &Path) -> Result<ProcessPlan, BrokerError> {
    ProcessPlan::detect(ProcessMode::from(config.containment.process)).map_err(|message| {
        BrokerError::from(crate::error::RuntimeError::Config {
            path: path.to_path_buf(),
            message,
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

/// Before serving: remove the limit cgroups and scratch directories of gone brokers, end
/// their orphaned worker trees (which frees the locks those held), then recover the
/// children they left behind.
async fn recover_before_serving(
    store: &Store,
    paths: &StatePaths,
    token: &str,
    process: &ProcessPlan,
    limit_cgroups: &Arc<LimitParents>,
) -> Result<(), BrokerError> {
    let (store, paths, token) = (store.clone(), paths.clone(), token.to_owned());
    let cgroups = process.cgroups().cloned();
    let limit_cgroups = limit_cgroups.clone();
    let report = tokio::task::spawn_blocking(move || {
        let removed = limit_cgroups.sweep();
        tracing::info!(removed, "limit cgroups of gone brokers removed");
        let swept = crate::recovery::reclaim_scratch(&paths);
        tracing::info!(?swept, "stale scratch directories reclaimed");
        // Before recovery: ending an orphaned tree frees the locks it held.
        if let Some(cgroups) = cgroups {
            let ended = cgroups.sweep();
            tracing::info!(ended, parent = %cgroups.dir().display(), "worker cgroups of gone brokers ended");
        }
        crate::recovery::recover_at_startup(&store, &paths, &token)
    })
    .await
    .map_err(|e| BrokerError::internal(format!("startup recovery panicked: {e}")))??;
    tracing::info!(?report, "startup recovery finished");
    Ok(())
}

/// The worker spawner with this broker's containment: its process plan, Landlock or not,
/// the paths hidden from tools (state, configuration, key files) and the limit cgroups.
fn spawner_for(
    config: &Config,
    paths: &StatePaths,
    options: &BrokerOptions,
    credentials: &CredentialResolver,
    process: ProcessPlan,
    limits: Arc<LimitParents>,
) -> Result<Spawner, BrokerError> {
    let filesystem = match config.containment.filesystem {
        crate::config::FilesystemContainmentConfig::Auto => FilesystemMode::Landlock,
        crate::config::FilesystemContainmentConfig::Off => FilesystemMode::Off,
    };
    let hide = crate::paths::hidden_from_tools(
        paths.root(),
        &options.config_path,
        credentials.key_files(),
    );
    Spawner::configured(WorkerSetup {
        scratch_parent: Some(paths.scratch_dir()),
        process,
        filesystem,
        hide,
        limits,
    })
    .map_err(|e| BrokerError::internal(format!("cannot start the worker spawner: {e}")))
}
