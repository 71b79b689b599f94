//! What the Pi engine's init does once Node runs: reap, end the tool tree when Node asks,
//! forward termination signals, and tear the tree down when Node exits.

use std::os::unix::net::UnixStream;
use std::time::Duration;

use subzero_sys::signal::{Signal, send_u32};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::signal::unix::{SignalKind, signal};

use crate::containment::{self, Containment};

/// How long Node gets to exit after the SIGTERM this process forwards.
const NODE_GRACE: Duration = Duration::from_millis(750);

/// Supervises Node (`node`, a child of this process) until it exits; returns its exit code.
pub fn supervise(node: u32, channel: UnixStream) -> i32 {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(err) => {
            tracing::error!(%err, "cannot start the init's runtime");
            return 2;
        }
    };
    runtime.block_on(watch(node, channel))
}

async fn watch(node: u32, channel: UnixStream) -> i32 {
    let containment = Containment::new();
    let channel = match channel
        .set_nonblocking(true)
        .and_then(|()| tokio::net::UnixStream::from_std(channel))
    {
        Ok(channel) => channel,
        Err(err) => {
            tracing::error!(%err, "cannot use the tree channel");
            return end(&containment, node).await;
        }
    };
    let (reader, mut writer) = channel.into_split();
    let mut lines = BufReader::new(reader).lines();
    let mut open = true;
    let (Ok(mut term), Ok(mut int), Ok(mut hup), Ok(mut child)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
        signal(SignalKind::child()),
    ) else {
        tracing::error!("cannot install signal handlers");
        return end(&containment, node).await;
    };
    containment::unblock_termination();
    loop {
        tokio::select! {
            line = lines.next_line(), if open => match line {
                Ok(Some(line)) if line.trim() == "kill" => {
                    let reaped = containment.kill_all_except(node).await;
                    if writer.write_all(format!("reaped {reaped}\n").as_bytes()).await.is_err() {
                        open = false;
                    }
                }
                Ok(Some(_)) => {}
                _ => open = false,
            },
            _ = tokio::time::timeout(Duration::from_millis(200), child.recv()) => {
                containment.reap();
                if let Some(code) = containment.take_exit(node) {
                    let reaped = containment.kill_all_except(node).await;
                    tracing::info!(code, reaped, "Node exited; tool tree torn down");
                    return code;
                }
            }
            _ = term.recv() => return terminate(&containment, node, "SIGTERM").await,
            _ = int.recv() => return terminate(&containment, node, "SIGINT").await,
            _ = hup.recv() => return terminate(&containment, node, "SIGHUP").await,
        }
    }
}

/// Told to terminate (the broker's death): Node is told too and tears its
/// run down; whatever is left after the grace is killed.
async fn terminate(containment: &Containment, node: u32, name: &str) -> i32 {
    tracing::warn!(
        signal = name,
        "terminating; telling Node and tearing the tree down"
    );
    send_u32(node, Signal::TERM);
    let deadline = tokio::time::Instant::now() + NODE_GRACE;
    while tokio::time::Instant::now() < deadline {
        containment.reap();
        if containment.take_exit(node).is_some() {
            containment.kill_all_except(node).await;
            return 0;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    end(containment, node).await;
    0
}

/// Kills Node and every tool process; returns 2.
async fn end(containment: &Containment, node: u32) -> i32 {
    send_u32(node, Signal::KILL);
    containment.kill_all_except(node).await;
    for _ in 0..200 {
        containment.reap();
        if containment.take_exit(node).is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    2
}
