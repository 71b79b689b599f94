//! Process-tree containment: starts a worker exactly as a broker with this configuration
//! would (through the PID-namespace keeper unless the config forces the subreaper) and
//! reports what its hello says the kernel gave it, with how to get the rest.

use std::path::Path;
use std::time::Duration;

use subzero_protocol::ProcessContainmentMode;
use subzero_runtime::config::{Config, ProcessContainmentConfig};
use subzero_runtime::supervisor::{ProcessMode, Spawner, WorkerConn, WorkerLaunch};

use super::report::Check;

const NAME: &str = "process containment";

/// One handshake worker, started with the configured mode; its `containment.process`.
pub async fn check_process_containment(
    exe: &Path,
    workspace: &Path,
    config: Option<&Config>,
) -> Check {
    let configured = config.map_or(ProcessContainmentConfig::Auto, |c| c.containment.process);
    let mode = match configured {
        ProcessContainmentConfig::Auto => ProcessMode::PidNamespace,
        ProcessContainmentConfig::Subreaper => ProcessMode::Subreaper,
    };
    let scratch = std::env::temp_dir();
    let spawner = match Spawner::for_broker(scratch, mode) {
        Ok(s) => s,
        Err(e) => {
            return Check::fail(
                NAME,
                format!("cannot start the spawner thread: {e}"),
                "check the process limits (ulimit -u)",
            );
        }
    };
    let launch = WorkerLaunch {
        exe: exe.to_path_buf(),
        inherit: Vec::new(),
        cwd: workspace.to_path_buf(),
        log_filter: None,
    };
    let hello = match WorkerConn::start(&spawner, launch, "doctor".into()).await {
        Ok((mut conn, hello)) => {
            conn.close();
            conn.wait_exit(Duration::from_secs(2)).await;
            hello
        }
        Err(e) => {
            return Check::fail(
                NAME,
                format!("the worker did not start: {e}"),
                "see the `worker` check",
            );
        }
    };
    judge(hello.process, configured)
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
    let reason = process.reason.as_ref().map(|r| r.as_str().to_owned());
    match process.mode {
        ProcessContainmentMode::PidNamespace => Check::pass(
            NAME,
            "pid-namespace: each worker is init of its own PID namespace, so the kernel kills its whole tool tree when it ends",
        ),
        ProcessContainmentMode::Subreaper => {
            let why = reason.unwrap_or_else(|| "no reason given".to_owned());
            let fix = match configured {
                ProcessContainmentConfig::Subreaper => {
                    "remove `process = \"subreaper\"` from [containment] in the config file"
                        .to_owned()
                }
                ProcessContainmentConfig::Auto => subzero_worker::PID_NAMESPACE_HINT.to_owned(),
            };
            Check::warn(
                NAME,
                format!(
                    "subreaper only ({why}): a tool process that escapes while its worker and broker both die can outlive them"
                ),
                fix,
            )
        }
    }
}
