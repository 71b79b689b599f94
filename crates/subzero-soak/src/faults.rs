//! Injecting a schedule's faults. A fault strikes at once; the part that lasts (a broker
//! down, a worker stopped, a full disk, a locked database, a dropping model) runs on in a
//! task that undoes it after its time, and the epoch waits for that task before it checks.

use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::task::JoinHandle;

use crate::exec::Ctx;
use crate::kernel;
use crate::schedule::Fault;

/// How long a broker killed by a fault may take to start again.
const RESTART_BOUND: Duration = Duration::from_secs(60);

/// How long a worker fault waits for a worker to strike when none runs at its moment.
const TARGET_WAIT: Duration = Duration::from_secs(2);

/// Whether a fault struck, and the task that undoes it when its time is up.
type Struck = (bool, Option<JoinHandle<()>>);

/// Injects `fault`; the returned task (if any) undoes it when its time is up.
pub async fn inject(ctx: &Arc<Ctx>, fault: Fault) -> Option<JoinHandle<()>> {
    let brokers = ctx.world.broker_count();
    let (injected, task): Struck = match fault {
        Fault::KillBroker { broker, down_ms } => {
            let b = broker % brokers;
            let killed = ctx.world.kill_broker(b).is_some();
            (killed, Some(restart(ctx, b, down_ms)))
        }
        Fault::KillWorker { pick } => match pick_worker(ctx, pick).await {
            Some(pid) => {
                kernel::signal(pid, Signal::SIGKILL);
                (true, None)
            }
            None => (false, None),
        },
        Fault::KillBoth { broker, down_ms } => kill_both(ctx, broker % brokers, down_ms),
        Fault::PauseWorker { pick, ms } => pause_worker(ctx, pick, ms).await,
        Fault::FullDisk { ms } => full_disk(&ctx.world, ms),
        Fault::LockDb { ms } => {
            let db = ctx.world.state.join("subzero.db");
            let exists = db.is_file();
            let task = tokio::task::spawn_blocking(move || hold_write_lock(&db, ms));
            (exists, Some(task))
        }
        Fault::DropModel { ms } => {
            let switch = ctx.world.model.switch.clone();
            switch.set_dropping(true);
            let task = tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                switch.set_dropping(false);
            });
            (true, Some(task))
        }
    };
    ctx.stats().fault(fault.kind(), injected);
    task
}

/// SIGKILLs broker `b` and its workers at the same moment; it restarts after `down_ms`.
fn kill_both(ctx: &Arc<Ctx>, b: usize, down_ms: u64) -> Struck {
    let ours: Vec<u32> = ctx
        .world
        .broker_pid(b)
        .map(kernel::descendants)
        .unwrap_or_default();
    let workers: Vec<u32> = kernel::workers(&ctx.world.state)
        .into_iter()
        .map(|w| w.pid)
        .filter(|pid| ours.contains(pid))
        .collect();
    let killed = ctx.world.kill_broker(b).is_some();
    for pid in &workers {
        kernel::signal(*pid, Signal::SIGKILL);
    }
    (killed, Some(restart(ctx, b, down_ms)))
}

/// SIGSTOPs a worker; SIGCONT after `ms`.
async fn pause_worker(ctx: &Ctx, pick: u64, ms: u64) -> Struck {
    let Some(pid) = pick_worker(ctx, pick).await else {
        return (false, None);
    };
    kernel::signal(pid, Signal::SIGSTOP);
    ctx.world.paused(pid);
    let task = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        kernel::signal(pid, Signal::SIGCONT);
    });
    (true, Some(task))
}

/// Fills the state directory's file system, frees it after `ms`.
fn full_disk(world: &Arc<crate::world::World>, ms: u64) -> Struck {
    let world = world.clone();
    let filled = world.tmpfs;
    let task = tokio::spawn(async move {
        let filler = {
            let world = world.clone();
            tokio::task::spawn_blocking(move || world.fill_disk())
                .await
                .ok()
                .flatten()
        };
        tokio::time::sleep(Duration::from_millis(ms)).await;
        if let Some(path) = filler {
            let _ = std::fs::remove_file(path);
        }
    });
    (filled, Some(task))
}

/// A worker of the soak chosen by `pick`; when none runs, the first to start within
/// [`TARGET_WAIT`].
async fn pick_worker(ctx: &Ctx, pick: u64) -> Option<u32> {
    let deadline = tokio::time::Instant::now() + TARGET_WAIT;
    loop {
        let mut pids: Vec<u32> = kernel::workers(&ctx.world.state)
            .into_iter()
            .filter(|w| w.child.is_some())
            .map(|w| w.pid)
            .collect();
        pids.sort_unstable();
        if !pids.is_empty() {
            return Some(pids[(pick % pids.len() as u64) as usize]);
        }
        if tokio::time::Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Starts broker `b` again after `down_ms`.
fn restart(ctx: &Arc<Ctx>, b: usize, down_ms: u64) -> JoinHandle<()> {
    let ctx = ctx.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(down_ms)).await;
        if let Err(e) = ctx.world.start_broker(b, RESTART_BOUND).await {
            ctx.violation(crate::verdict::Invariant::TypedAnswers, e);
        }
    })
}

/// A stranger's `BEGIN EXCLUSIVE` on the database, held for `ms`.
fn hold_write_lock(db: &std::path::Path, ms: u64) {
    let Ok(conn) = rusqlite::Connection::open(db) else {
        return;
    };
    let _ = conn.busy_timeout(Duration::from_secs(10));
    if conn.execute_batch("BEGIN EXCLUSIVE").is_ok() {
        std::thread::sleep(Duration::from_millis(ms));
        let _ = conn.execute_batch("ROLLBACK");
    }
}
