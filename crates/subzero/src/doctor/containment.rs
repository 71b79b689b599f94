//! Process-tree containment: starts a worker exactly as a broker with this configuration
//! would (cloned into a PID namespace, else a cgroup, unless the config forces the
//! subreaper) and reports what its hello says the kernel gave it, with how to get the rest.

use std::path::Path;
use std::time::Duration;

use subzero_protocol::ProcessContainmentMode;
use subzero_runtime::config::{Config, ProcessContainmentConfig};
use subzero_runtime::supervisor::limits::LimitParents;
use subzero_runtime::supervisor::{
    FilesystemMode, ProcessMode, ProcessPlan, Spawner, WorkerConn, WorkerLaunch, WorkerSetup,
};

use super::report::Check;

const NAME: &str = "process containment";

/// One handshake worker, started with the configured mode and the paths a broker would
/// hide from tools: its `containment.process`, `containment.view`, `containment.network` and
/// `containment.resources`, one check each.
pub async fn check_process_containment(
    exe: &Path,
    workspace: &Path,
    config: Option<&Config>,
    hide: Vec<std::path::PathBuf>,
) -> Vec<Check> {
    match handshake(exe, workspace, config, hide).await {
        Ok((hello, configured)) => vec![
            judge(hello.process, configured),
            judge_view(hello.view.as_ref()),
            judge_network(hello.network.as_ref()),
            judge_resources(hello.resources.as_ref()),
        ],
        Err(check) => vec![check],
    }
}

async fn handshake(
    exe: &Path,
    workspace: &Path,
    config: Option<&Config>,
    hide: Vec<std::path::PathBuf>,
) -> Result<(subzero_runtime::supervisor::Hello, ProcessContainmentConfig), Check> {
    let configured = config.map_or(ProcessContainmentConfig::Auto, |c| c.containment.process);
    let plan = match ProcessPlan::detect(ProcessMode::from(configured)) {
        Ok(plan) => plan,
        // Only a forced cgroup fails here; the broker refuses to start the same way.
        Err(why) => {
            return Err(Check::fail(
                NAME,
                format!("{why} (a broker with this configuration refuses to start)"),
                subzero_runtime::supervisor::cgroup::ENABLE_HINT,
            ));
        }
    };
    let spawner = match Spawner::configured(WorkerSetup {
        scratch_parent: Some(std::env::temp_dir()),
        process: plan,
        filesystem: FilesystemMode::default(),
        network_off: config.is_some_and(|c| {
            c.containment.network == subzero_runtime::config::NetworkContainmentConfig::Off
        }),
        hide,
        limits: std::sync::Arc::new(LimitParents::probe()),
    }) {
        Ok(s) => s,
        Err(e) => {
            return Err(Check::fail(
                NAME,
                format!("cannot start the spawner thread: {e}"),
                "check the process limits (ulimit -u)",
            ));
        }
    };
    let launch = WorkerLaunch::handshake(exe, workspace, Vec::new());
    let hello = match WorkerConn::start(&spawner, launch, "doctor".into()).await {
        Ok((mut conn, hello)) => {
            conn.close();
            conn.wait_exit(Duration::from_secs(2)).await;
            hello
        }
        Err(e) => {
            return Err(Check::fail(
                NAME,
                format!("the worker did not start: {e}"),
                "see the `worker` check",
            ));
        }
    };
    Ok((hello, configured))
}

/// `tool view`: whether tool processes can see Subzero's state, configuration and keys.
fn judge_view(view: Option<&subzero_protocol::ViewReceipt>) -> Check {
    const VIEW: &str = "tool view";
    match view {
        Some(view) if view.hidden => Check::pass(VIEW, view.summary.as_str().to_owned()),
        Some(view) => Check::warn(
            VIEW,
            view.summary.as_str().to_owned(),
            format!(
                "allow the worker a mount namespace per tool process: {}",
                subzero_runtime::supervisor::PID_NAMESPACE_HINT
            ),
        ),
        None => Check::warn(
            VIEW,
            "the worker does not report its tools' view (an older worker)",
            "reinstall subzero so the broker and the worker are the same build",
        ),
    }
}

/// `tool network`: whether tool processes of a grant other than `open` get a network
/// namespace (loopback only, and the allowlist proxy); without one such spawns are refused.
fn judge_network(network: Option<&subzero_protocol::NetworkSupport>) -> Check {
    const NETWORK: &str = "tool network";
    match network {
        Some(n) if n.namespace => Check::pass(NETWORK, n.summary.as_str().to_owned()),
        Some(n) => Check::warn(
            NETWORK,
            n.summary.as_str().to_owned(),
            "run the broker as root or with user namespaces enabled (and [containment] network = \"auto\"), or give the templates that need their tools online network = \"open\"",
        ),
        None => Check::warn(
            NETWORK,
            "the worker does not report its tools' network (an older worker)",
            "reinstall subzero so the broker and the worker are the same build",
        ),
    }
}

/// `tool bounds`: how the kernel bounds a tool tree's processes, memory, files.
fn judge_resources(resources: Option<&subzero_protocol::ResourceReceipt>) -> Check {
    const BOUNDS: &str = "tool bounds";
    let Some(r) = resources else {
        return Check::warn(
            BOUNDS,
            "the worker does not report its tool bounds (an older worker)",
            "reinstall subzero so the broker and the worker are the same build",
        );
    };
    let line = |name: &str, b: &subzero_protocol::ResourceBound| {
        format!("{name}: {} ({})", b.mechanism.as_str(), b.scope)
    };
    let detail = [
        line("processes", &r.processes),
        line("memory", &r.memory),
        line("file size", &r.file_size),
        line("open files", &r.open_files),
    ]
    .join("; ");
    if r.processes.scope == subzero_protocol::ResourceScope::None {
        Check::warn(
            BOUNDS,
            detail,
            "run the broker as an unprivileged user with user namespaces enabled, or as root where the cgroup v1 pids controller is mounted, so a fork bomb in a tool is bounded",
        )
    } else {
        Check::pass(BOUNDS, detail)
    }
}

fn judge(
    process: Option<subzero_protocol::ProcessContainment>,
    configured: ProcessContainmentConfig,
) -> Check {
    let Some(process) = process else {
        return Check::warn(
            NAME,
            "the worker does not report its containment (an older worker)",
            "reinstall subzero so the broker and the worker are the same build",
        );
    };
    let why = process
        .reason
        .as_ref()
        .map_or_else(|| "no reason given".to_owned(), |r| r.as_str().to_owned());
    let switch = format!("[containment] process = \"{}\"", name_of(configured));
    let to_namespaces = match configured {
        ProcessContainmentConfig::Auto => {
            subzero_runtime::supervisor::PID_NAMESPACE_HINT.to_owned()
        }
        _ => format!(
            "set process = \"auto\" in [containment] of the config file (now {switch}) to use PID namespaces"
        ),
    };
    match process.mode {
        ProcessContainmentMode::PidNamespace => Check::pass(
            NAME,
            format!(
                "pid-namespace ({switch}): each worker is init of its own PID namespace, so the kernel kills its whole tool tree when it ends"
            ),
        ),
        ProcessContainmentMode::Cgroup => Check::warn(
            NAME,
            format!(
                "cgroup ({switch}; {why}): each worker's tool tree is in its own cgroup v2 and killed with cgroup.kill when the worker ends or is stopped; a tree whose worker and broker die at once lives, still in its cgroup, until the next broker start, and tools still see your other processes in /proc"
            ),
            to_namespaces,
        ),
        ProcessContainmentMode::ProcessGroup => Check::warn(
            NAME,
            format!(
                "process groups only ({switch}; {why}): a stop kills each tool's process group, and a tool process that leaves its group (setsid, a daemon) can outlive it"
            ),
            "run on a Linux kernel, not under an emulator (qemu-user refuses PR_SET_CHILD_SUBREAPER), outside a seccomp profile that filters prctl".to_owned(),
        ),
        ProcessContainmentMode::Subreaper => {
            let fix = match configured {
                ProcessContainmentConfig::Auto => format!(
                    "{to_namespaces}; or, for the cgroup fallback, {}",
                    subzero_runtime::supervisor::cgroup::ENABLE_HINT
                ),
                _ => to_namespaces,
            };
            Check::warn(
                NAME,
                format!(
                    "subreaper only ({switch}; {why}): a tool process that escapes while its worker and broker both die can outlive them"
                ),
                fix,
            )
        }
    }
}

/// The switch's value as the config file spells it.
fn name_of(configured: ProcessContainmentConfig) -> &'static str {
    match configured {
        ProcessContainmentConfig::Auto => "auto",
        ProcessContainmentConfig::Cgroup => "cgroup",
        ProcessContainmentConfig::Subreaper => "subreaper",
    }
}
