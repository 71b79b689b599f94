//! The broker's end of one worker's control pipes.
//!
//! Lines from the worker are parsed into the generated [`WorkerMessage`] and validated;
//! a line that does not parse is reported (the worker is then considered broken by the
//! caller), never guessed at. The worker's stderr is forwarded to `tracing` line by line,
//! so it is never dropped and never reaches the MCP channel on stdout.

use std::io;
use std::time::Duration;

use subzero_protocol::{BrokerMessage, Validate, WorkerMessage};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::net::unix::pipe;

use super::process::WorkerProcess;
use super::spawn::{Spawner, WorkerLaunch};

/// What a worker says about itself before anything else.
#[derive(Clone, Debug, PartialEq)]
pub struct Hello {
    /// Implementation name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// Transcript format version it reads and writes.
    pub transcript_version: u64,
    /// Model API protocols it speaks.
    pub protocols: Vec<String>,
    /// Whether it applies steers to an active run.
    pub steering: bool,
    /// The control protocol version it speaks.
    pub control_version: u64,
    /// The process-tree containment the kernel gave it (`containment.process`); `None`
    /// from a worker older than the field.
    pub process: Option<subzero_protocol::ProcessContainment>,
    /// The filesystem enforcement (Landlock) it can give (`containment.filesystem`); `None`
    /// from a worker older than the field, which enforces nothing.
    pub filesystem: Option<subzero_protocol::FilesystemSupport>,
    /// Who holds the ownership locks while it lives (`containment.ownership`).
    pub ownership: Option<subzero_protocol::OwnershipReceipt>,
    /// Whether its tool processes can be kept off the network (`containment.network`);
    /// `None` from a worker older than the field, which cannot.
    pub network: Option<subzero_protocol::NetworkSupport>,
    /// What its tool processes cannot see (`containment.view`).
    pub view: Option<subzero_protocol::ViewReceipt>,
    /// How it bounds its tool tree, without the values (`containment.resources`).
    pub resources: Option<subzero_protocol::ResourceReceipt>,
    /// What it can run beyond its protocols (`capabilities`); `None`: everything (the
    /// Rust worker).
    pub capabilities: Option<subzero_protocol::WorkerCapabilities>,
    /// How it confines the process holding the key when its tools run inside it
    /// (`containment.worker`, the Pi worker); `None` for the Rust worker.
    pub worker: Option<subzero_protocol::WorkerReceipt>,
}

/// A running worker and its pipes.
#[derive(Debug)]
pub struct WorkerConn {
    process: WorkerProcess,
    /// The cgroups that bound its tool tree (`supervisor::limits`), removed once it is gone.
    limits: Vec<std::path::PathBuf>,
    stdin: Option<pipe::Sender>,
    lines: Lines<BufReader<pipe::Receiver>>,
}

/// How long a worker may take to say hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

impl WorkerConn {
    /// Start a worker and read its hello.
    pub async fn start(
        spawner: &Spawner,
        launch: WorkerLaunch,
        label: String,
    ) -> io::Result<(Self, Hello)> {
        let spawned = spawner.spawn(launch).await?;
        forward_stderr(spawned.stderr, label);
        let mut conn = WorkerConn {
            process: WorkerProcess::new(
                spawned.pid,
                spawned.pidfd,
                spawned.cgroup,
                spawned.locks,
                spawned.holder,
            ),
            limits: spawned.limits,
            stdin: Some(spawned.stdin),
            lines: BufReader::new(spawned.stdout).lines(),
        };
        let first = tokio::time::timeout(HELLO_TIMEOUT, conn.recv())
            .await
            .map_err(|_| io::Error::other("the worker did not say hello within 10 s"))?;
        match first {
            Some(Ok(WorkerMessage::Hello {
                name,
                version,
                transcript_version,
                protocols,
                steering,
                control_version,
                containment,
                capabilities,
                ..
            })) => {
                let protocols = protocols.0.iter().map(ToString::to_string).collect();
                let containment = containment.unwrap_or_default();
                let hello = Hello {
                    name: name.to_string(),
                    version: version.to_string(),
                    transcript_version: transcript_version.get(),
                    protocols,
                    steering,
                    control_version: control_version.get(),
                    process: containment.process,
                    filesystem: containment.filesystem,
                    ownership: containment.ownership,
                    network: containment.network,
                    view: containment.view,
                    resources: containment.resources,
                    worker: containment.worker,
                    capabilities,
                };
                Ok((conn, hello))
            }
            Some(Ok(_)) => Err(io::Error::other("the worker's first message was not hello")),
            Some(Err(bad)) => Err(io::Error::other(format!(
                "the worker's hello is malformed: {bad}"
            ))),
            None => Err(io::Error::other("the worker exited before saying hello")),
        }
    }

    /// The worker's process id (also its process-group id).
    pub fn pid(&self) -> i32 {
        self.process.pid()
    }

    /// The cgroup the worker runs in where it got no PID namespace, until it was ended.
    pub fn cgroup(&self) -> Option<&std::path::Path> {
        self.process.cgroup()
    }

    /// Send one control message. Its bounds that the types do not carry (integer maxima,
    /// list sizes) are checked first, so a broker bug shows up as an error here, not as a
    /// confused worker.
    pub async fn send(&mut self, message: BrokerMessage) -> io::Result<()> {
        message
            .validate()
            .map_err(|e| io::Error::other(format!("control message breaks the contract: {e}")))?;
        let mut line = serde_json::to_vec(&message).map_err(io::Error::other)?;
        line.push(b'\n');
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| io::Error::other("the worker's control pipe is already closed"))?;
        stdin.write_all(&line).await?;
        stdin.flush().await
    }

    /// The next message from the worker; `None` at end of stream (the worker exited or
    /// closed stdout). `Some(Err)` is a line that breaks the contract.
    pub async fn recv(&mut self) -> Option<Result<WorkerMessage, String>> {
        loop {
            let line = match self.lines.next_line().await {
                Ok(Some(line)) => line,
                Ok(None) => return None,
                Err(e) => return Some(Err(format!("reading the worker's stdout failed: {e}"))),
            };
            if line.trim().is_empty() {
                continue;
            }
            let parsed = serde_json::from_str::<WorkerMessage>(&line)
                .map_err(|e| format!("unparseable control line: {e}"))
                .and_then(|m| m.validate().map(|()| m).map_err(|e| e.to_string()));
            return Some(parsed);
        }
    }

    /// Close the control pipe: the worker cancels whatever runs, kills its tool tree
    /// and exits.
    pub fn close(&mut self) {
        self.stdin = None;
    }

    /// Wait for the worker process to exit, at most `limit`. Returns whether it did; once
    /// it did and its tree is proven gone (its namespace ended with it; its cgroup killed,
    /// emptied and removed), the broker's copies of its locks are released.
    pub async fn wait_exit(&mut self, limit: Duration) -> bool {
        self.process.wait_exit(limit).await
    }

    /// The processes still in the cgroups that bound its tool tree.
    pub fn limit_cgroup_members(&self) -> Vec<i32> {
        super::limits::members(&self.limits)
    }
}

impl Drop for WorkerConn {
    /// The limit cgroups go with the worker; one a process still holds stays for the
    /// next broker start's sweep.
    fn drop(&mut self) {
        super::limits::remove(&self.limits);
    }
}

fn forward_stderr(stderr: pipe::Receiver, label: String) {
    tokio::spawn(async move {
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            tracing::info!(target: "subzero::worker", worker = %label, "{line}");
        }
    });
}
