//! The Broker: the services the eight commands (`commands/`) run on — the store, the worker
//! registry, the policy, the scopes, the gate and the receipts.
//!
//! One broker is one `subzero mcp` process owned by one host. It owns the workers it
//! started (one per busy child), keeps each child's model key in memory only, and
//! shares every durable fact with other brokers of the same OS user through the store.
//! spawn, send and resume return as soon as the run is admitted and its worker has
//! been handed the work; they never wait for the model.

mod admit;
mod checkpoint;
mod commands;
mod containment;
mod engines;
mod error;
mod filesystem;
mod gate;
mod isolation;
mod live;
mod network;
mod orphans;
mod policy;
mod receipts;
mod registry;
mod scopes;
mod stop;
mod tasks;
mod wire;
mod worker;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use subzero_core::ChildId;
use subzero_core::lifecycle::Supervisor;

use crate::artifacts::ArtifactFiles;
use crate::config::{Config, LoadedConfig};
use crate::credentials::CredentialResolver;
use crate::locks::BrokerIdentity;
use crate::paths::StatePaths;
use crate::scope::WorkspaceScope;
use crate::secret_env::SecretEnv;
use crate::store::{Store, StoreOptions};
use crate::supervisor::limits::LimitParents;
use crate::supervisor::{FilesystemMode, ProcessMode, ProcessPlan, Spawner, WorkerSetup};

pub use commands::{Command, Context, ProgressSink};
pub use error::BrokerError;
pub use tasks::{StartsRun, TaskView};
pub use wire::snapshot::{child_snapshot, child_summary, gap_event, settled_run, wire_event};

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
    /// How the broker's binary was built (`subzero_info.build`); `None` says nothing.
    pub build: Option<BuildFacts>,
}

/// The commit a binary was built from (40 hex digits, or `unknown`) and its target triple.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuildFacts {
    pub commit: String,
    pub target: String,
}

/// A host and the exact version of it that was tested (`codex`, `0.171.0`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestedHost {
    pub host: String,
    pub version: String,
}

/// The broker: the services the eight commands run on. Cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct Broker {
    /// The process's minting authority, lent to the code that observes each token's
    /// evidence (the worker driver, the checkpoint verification).
    supervisor: &'static Supervisor,
    paths: StatePaths,
    /// Every durable fact, shared with the other brokers of this user.
    store: Store,
    artifacts: ArtifactFiles,
    identity: BrokerIdentity,
    /// What the configuration allows and provides.
    policy: policy::Policy,
    /// The workspace scopes this broker answers for.
    scopes: scopes::Scopes,
    /// The workers this broker runs and the children it holds in memory.
    workers: registry::Workers,
    /// Steers accepted by this broker, answered again on a retry.
    steer_receipts: Mutex<receipts::SteerReceipts>,
    /// Where isolated children's checkouts live and what each gets.
    isolation: isolation::Isolation,
    /// Open until the host is gone.
    gate: gate::Gate,
    /// The last phase line reported in progress notifications, per child.
    last_phase: Mutex<HashMap<ChildId, String>>,
}

impl Broker {
    /// Open the state, recover what earlier brokers left behind, and get ready to serve.
    /// Must be called inside a Tokio runtime.
    pub async fn open(options: BrokerOptions) -> Result<Arc<Broker>, BrokerError> {
        let paths = StatePaths::create(&options.state_dir)?;
        // Only an unreadable or non-TOML file stops the start; a broken entry is left out
        // and reported (`config::lenient`).
        let LoadedConfig { config, problems } = Config::load_lenient(&options.config_path)?;
        let policy = policy::Policy::new(&config, &options, problems)?;
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
            &policy.credentials,
            process,
            limit_cgroups,
        )?;
        let workers = registry::Workers::new(registry::WorkersSetup {
            spawner,
            engines: engines::Engines::new(&config.workers.pi, &options.worker_exe),
            exe: options.worker_exe,
            log: options.worker_log,
            worker_slots: config.limits.active_workers_per_workspace,
            writer_slots: config.limits.write_runs_per_workspace,
        });
        Ok(Arc::new(Broker {
            supervisor: crate::supervisor::proof::authority()?,
            artifacts: ArtifactFiles::new(&paths),
            isolation: isolation::Isolation::new(&paths, &config.isolation),
            paths,
            store,
            identity,
            policy,
            scopes: scopes::Scopes::new(scope),
            workers,
            steer_receipts: Mutex::new(receipts::SteerReceipts::new()),
            gate: gate::Gate::new(),
            last_phase: Mutex::new(HashMap::new()),
        }))
    }

    /// The store (for inspection tools and tests).
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The default workspace scope.
    pub fn scope(&self) -> &WorkspaceScope {
        &self.scopes.own
    }

    /// The state directory layout.
    pub fn paths(&self) -> &StatePaths {
        &self.paths
    }

    /// The host is gone: accept no new work and end every wait now. The full
    /// [`Broker::shutdown`] follows once the MCP session has ended.
    pub fn begin_shutdown(&self) {
        self.gate.close();
    }

    fn owner_token(&self) -> &str {
        self.identity.token()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these short critical sections leaves plain data
    // behind; keep serving rather than poisoning every later call.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
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
        network_off: config.containment.network == crate::config::NetworkContainmentConfig::Off,
        hide,
        limits,
    })
    .map_err(|e| BrokerError::internal(format!("cannot start the worker spawner: {e}")))
}
