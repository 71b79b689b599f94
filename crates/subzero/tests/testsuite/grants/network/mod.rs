//! Network grants on real worker and `bash` processes, from inside the tools as a
//! prompt-injected child would try: under `none` a raw `/dev/tcp` connect, Python, `curl`
//! and a DNS lookup all fail while the tools' own loopback works; under an allowlist the
//! listed host answers through the worker's proxy and nothing else does — another port,
//! a direct connect, a listed name that resolves to a loopback address (DNS rebinding) —
//! and each refusal reaches the broker as a `network_refused` event; the model endpoint
//! works in every mode (each run completes). "The kernel cannot" is simulated with
//! `subzero-worker worker --network off`, what the broker passes for
//! `[containment] network = "off"`.
//!
//! The listeners these tests start stand on the host's loopback, outside the tools'
//! namespace: 127.0.0.1 for the one no tool may reach, 127.0.0.2 for the allowlisted one
//! (all of 127/8 is the host's loopback).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::support::control::{hello_containment, is_hello};
use crate::support::worker::WorkerProc;
use serde_json::{Value, json};

/// A plain HTTP server on `ip`: answers every request with `body`, and counts connections.
pub(super) struct Listener {
    pub(super) addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
}

impl Listener {
    pub(super) fn start(ip: &str, body: &'static str) -> Listener {
        let socket = TcpListener::bind((ip, 0)).expect("a loopback listener");
        let addr = socket.local_addr().expect("its address");
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        std::thread::spawn(move || {
            for stream in socket.incoming() {
                let Ok(mut stream) = stream else { return };
                count.fetch_add(1, Ordering::SeqCst);
                let mut head = [0u8; 4096];
                let _ = stream.read(&mut head);
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        Listener { addr, accepted }
    }

    pub(super) fn port(&self) -> u16 {
        self.addr.port()
    }

    pub(super) fn connections(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

pub(super) fn with_network(mut snapshot: Value, network: Value) -> Value {
    snapshot["network"] = network;
    snapshot
}

/// A worker whose hello says tool processes get a network namespace.
pub(super) fn namespaced_worker() -> WorkerProc {
    let mut worker = WorkerProc::spawn();
    let hello = worker.expect("hello", is_hello);
    let network = hello_containment(&hello).network.expect("network");
    assert!(
        network.namespace,
        "these tests need network namespaces: {network:#?}"
    );
    worker
}

/// Runs one `bash` call of `command` and a final answer; the command's output.
pub(super) fn run_bash(
    worker: &mut WorkerProc,
    run_id: &str,
    snapshot: Value,
    workspace: &Path,
    command: &str,
) -> String {
    let args = json!({ "command": command }).to_string();
    super::landlock::run_tools(worker, run_id, snapshot, workspace, &[("c1", "bash", args)])
        .remove(0)
}

pub(super) fn python() -> String {
    let out = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("these tests need python3");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

pub(super) fn has_curl() -> bool {
    std::process::Command::new("curl")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// `name=<exit code>` lines for each probe of `target` (`host:port`).
pub(super) fn probes(target: SocketAddr, python: &str, curl: bool) -> String {
    let (host, port) = (target.ip(), target.port());
    let mut command = format!(
        "(exec 3<>/dev/tcp/{host}/{port}) 2>/dev/null; echo \"devtcp=$?\"\n\
         {python} -c 'import urllib.request,sys; urllib.request.urlopen(\"http://{host}:{port}/\", timeout=5)' 2>/dev/null; echo \"python=$?\"\n\
         {python} -c 'import socket; socket.getaddrinfo(\"example.com\", 80)' 2>/dev/null; echo \"dns=$?\"\n"
    );
    if curl {
        command.push_str(&format!(
            "curl -sS --max-time 5 --noproxy '*' http://{host}:{port}/ >/dev/null 2>&1; echo \"curl=$?\"\n"
        ));
    }
    command
}

mod broker;
mod packages;
mod worker;
