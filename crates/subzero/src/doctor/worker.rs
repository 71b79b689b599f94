//! The worker re-exec handshake: start `subzero worker` exactly as a broker does (new
//! process group, cleared environment, parent-death signal, no lock handed over) and
//! read its hello.

use std::path::Path;
use std::time::Duration;

use subzero_runtime::broker::DEFAULT_API;
use subzero_runtime::supervisor::{Spawner, WorkerConn, WorkerLaunch};

use super::report::Check;

/// Start one worker, read its hello, close its control pipe.
pub async fn check_worker(exe: &Path, workspace: &Path) -> Check {
    let fix = format!(
        "`{} worker` must start and print its hello: reinstall subzero, check the file is executable and not on a noexec mount, and run it by hand to see its error",
        exe.display()
    );
    let spawner = match Spawner::start_default() {
        Ok(s) => s,
        Err(e) => {
            return Check::fail(
                "worker",
                format!("cannot start the spawner thread: {e}"),
                fix,
            );
        }
    };
    let launch = WorkerLaunch {
        exe: exe.to_path_buf(),
        inherit: Vec::new(),
        cwd: workspace.to_path_buf(),
        log_filter: None,
        engine: Vec::new(),
    };
    let (mut conn, hello) = match WorkerConn::start(&spawner, launch, "doctor".into()).await {
        Ok(started) => started,
        Err(e) => {
            return Check::fail(
                "worker",
                format!("handshake with `{} worker` failed: {e}", exe.display()),
                fix,
            );
        }
    };
    conn.close();
    let exited = conn.wait_exit(Duration::from_secs(2)).await;
    let detail = format!(
        "{} {} (protocols: {}; steering: {}; transcript v{})",
        hello.name,
        hello.version,
        hello.protocols.join(", "),
        if hello.steering { "yes" } else { "no" },
        hello.transcript_version
    );
    if !hello.protocols.iter().any(|p| p == DEFAULT_API) {
        return Check::fail(
            "worker",
            format!("{detail}: does not speak {DEFAULT_API}"),
            "the worker binary is not this subzero's: reinstall subzero",
        );
    }
    if !exited {
        return Check::warn(
            "worker",
            format!("{detail}; it did not exit within 2 s of its control pipe closing"),
            "workers must exit on EOF of stdin: reinstall subzero; report a bug if it persists",
        );
    }
    Check::pass("worker", detail)
}
