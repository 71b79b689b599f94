//! The worker re-exec handshake: start `subzero-worker worker` exactly as a broker does (new
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
    let launch = WorkerLaunch::handshake(exe, workspace, Vec::new());
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

/// The Pi SDK worker: where it is installed (`[workers.pi]`, else the checkout's
/// `workers/pi`), and its handshake through `subzero-worker worker --engine pi`. Not installed is a
/// failure when a template names it, a warning otherwise.
pub async fn check_pi_worker(
    exe: &Path,
    workspace: &Path,
    config: Option<&subzero_runtime::config::Config>,
) -> Check {
    let pi_config = config.map(|c| c.workers.pi.clone()).unwrap_or_default();
    let needed = config.is_some_and(|c| {
        c.templates
            .values()
            .any(|t| t.worker == subzero_core::template::WorkerKind::Pi)
    });
    let install = match subzero_runtime::workers::locate_pi(&pi_config, exe) {
        Ok(install) => install,
        Err(why) if needed => {
            return Check::fail("pi worker", why, subzero_runtime::workers::INSTALL_HINT);
        }
        Err(why) => {
            return Check::warn(
                "pi worker",
                format!("{why} (no template names worker = \"pi\")"),
                subzero_runtime::workers::INSTALL_HINT,
            );
        }
    };
    let spawner = match Spawner::start_default() {
        Ok(s) => s,
        Err(e) => {
            return Check::fail(
                "pi worker",
                format!("cannot start the spawner thread: {e}"),
                "check the process limits (ulimit -u)",
            );
        }
    };
    let launch = WorkerLaunch::handshake(exe, workspace, install.engine_args());
    let fix = format!(
        "run `{} worker --engine pi --pi-dir {} --pi-node {}` by hand to see its error; reinstall with `npm ci --prefix {}`",
        exe.display(),
        install.dir.display(),
        install.node.display(),
        install.dir.display()
    );
    let (mut conn, hello) = match WorkerConn::start(&spawner, launch, "doctor-pi".into()).await {
        Ok(started) => started,
        Err(e) => {
            return Check::fail("pi worker", format!("the handshake failed: {e}"), fix);
        }
    };
    conn.close();
    conn.wait_exit(Duration::from_secs(2)).await;
    let tools = hello
        .capabilities
        .as_ref()
        .map(|c| {
            c.tools
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    Check::pass(
        "pi worker",
        format!(
            "{} {} in {} on {} (protocols: {}; tools: {tools}; transcript v{})",
            hello.name,
            hello.version,
            install.dir.display(),
            install.node.display(),
            hello.protocols.join(", "),
            hello.transcript_version
        ),
    )
}
