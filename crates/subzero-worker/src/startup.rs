//! The start-up every engine of `subzero-worker worker` shares, before its hello.

use std::sync::Arc;

use crate::WorkerOptions;
use crate::containment;
use crate::emit;
use crate::scratch::Scratch;

/// What every engine has once the worker's start-up is done (before its hello).
pub(crate) struct Started {
    pub scratch: Arc<Scratch>,
    pub process: containment::ProcessReport,
    pub holders: containment::fds::LockHolders,
}

/// The start-up both engines share: descriptor hygiene, non-dumpable subreaper, the cgroups,
/// the view probe (it forks, so the process must still be single-threaded), the scratch
/// directory and the Landlock probe. `Err` is the exit code.
pub(crate) fn start_up(options: &WorkerOptions) -> Result<Started, i32> {
    init_tracing();
    // Installing fails only when a provider is already installed, which is fine.
    let _ = rustls::crypto::ring::default_provider().install_default();
    // Inside a namespace or a cgroup of its own the broker outlives the tree, so the locks
    // stay out of the tools; only the subreaper fallback needs the tools to hold them.
    let holders = if containment::is_namespace_init() || options.cgroup.is_some() {
        containment::fds::LockHolders::BrokerAndWorker
    } else {
        containment::fds::LockHolders::WholeTree
    };
    if let Err(err) = containment::fds::prepare(&options.lock_fds, holders) {
        tracing::error!(%err, "the lock descriptor is unusable");
        return Err(2);
    }
    if let Err(err) = containment::init_process() {
        tracing::error!(%err, "cannot make the worker non-dumpable or set its parent-death signal");
        return Err(2);
    }
    if let Some(dir) = &options.cgroup
        && let Err(err) = containment::cgroup::enter_tools(dir)
    {
        tracing::error!(%err, cgroup = %dir.display(), "cannot use the tool cgroup");
        return Err(2);
    }
    if let Err(err) = containment::limits::set_cgroups(&options.limits_cgroups) {
        tracing::error!(%err, "cannot use the limit cgroups");
        return Err(2);
    }
    // While the worker is still single-threaded: the probe forks.
    let hiding = containment::view::probe(&options.hide);
    tracing::info!(view = %hiding.summary(), "tool view");
    // Also while single-threaded: without CAP_NET_ADMIN the namespace is made by a fork.
    let network = containment::network::probe(options.network_off);
    tracing::info!(network = ?network.receipt().map(|r| r.summary.to_string()), "tool network");
    let scratch = match Scratch::create(options.scratch_parent.as_deref()) {
        Ok(scratch) => Arc::new(scratch),
        Err(err) => {
            tracing::error!(%err, "cannot make a private scratch directory");
            return Err(2);
        }
    };
    let process = containment::ProcessReport::observe(options.process_containment_reason.clone());
    tracing::info!(mode = %process.mode, reason = ?process.reason, "process containment");
    let filesystem = containment::landlock::probe(options.landlock_off);
    tracing::info!(filesystem = %filesystem.summary(), "filesystem containment");

    Ok(Started {
        scratch,
        process,
        holders,
    })
}

pub(crate) fn init_tracing() {
    let mut filter = tracing_subscriber::EnvFilter::try_from_env("SUBZERO_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // rmcp traces whole JSON-RPC messages (tool arguments and results) below warn.
    if let Ok(directive) = "rmcp=warn".parse() {
        filter = filter.add_directive(directive);
    }
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(emit::RedactingStderr)
        .with_ansi(false)
        .log_internal_errors(false)
        .try_init();
}
