//! A worker started the way the broker starts it: by `subzero_runtime::supervisor::Spawner`
//! (cloned into its own PID namespace where the kernel gives one — a user namespace too when
//! not root — else its cgroup, else the subreaper), holding a flock-held child lock, with the
//! state directory hidden from its tools and its scratch directory beneath it, spoken to
//! through `WorkerConn` (every line parsed and validated against the control schema).
//!
//! The conformance cases drive it synchronously, as they drove a plain child process: a
//! background task owns the connection; lines come back as JSON values.

use std::os::fd::OwnedFd;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use subzero_protocol::BrokerMessage;
use subzero_runtime::locks::HeldLock;
use subzero_runtime::supervisor::limits::LimitParents;
use subzero_runtime::supervisor::{
    FilesystemMode, Hello, ProcessMode, ProcessPlan, Spawner, WorkerConn, WorkerLaunch, WorkerSetup,
};
use tokio::sync::mpsc;

use super::logs;
use crate::support::worker::{ControlLines, WAIT};

/// The runtime every spawner and connection of this test process runs on.
static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("the conformance runtime")
});

/// The type of the line that stands for a worker line breaking the control contract.
const BROKEN: &str = "(broken control line)";

/// The executable the broker starts workers from: `subzero-worker` beside `subzero`, as
/// `serve.rs` chooses it (else `subzero` itself).
pub fn worker_exe() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_subzero-worker"))
}

/// What the connection task is told to do.
enum Order {
    Send(Box<BrokerMessage>),
    Close,
    Kill,
}

/// One place's spawner: the broker's, with this place's state directory hidden and its
/// scratch parent. It must outlive its workers (its thread's exit is their parent death).
pub struct Broker {
    spawner: Spawner,
    state: PathBuf,
}

impl Broker {
    /// The spawner a broker with state directory `state` would have.
    pub fn new(state: &Path) -> Broker {
        logs::install();
        let scratch = state.join("scratch");
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&scratch)
            .expect("scratch parent");
        let _entered = RUNTIME.enter();
        let process = ProcessPlan::detect(ProcessMode::Auto).expect("process plan");
        let spawner = Spawner::configured(WorkerSetup {
            scratch_parent: Some(scratch),
            process,
            filesystem: FilesystemMode::Landlock,
            network_off: false,
            hide: vec![state.to_path_buf()],
            limits: Arc::new(LimitParents::probe()),
        })
        .expect("spawner");
        Broker {
            spawner,
            state: state.to_path_buf(),
        }
    }

    /// Starts `engine` args' worker in `workspace`, holding the child lock as the broker does.
    pub fn start(&self, workspace: &Path, engine: Vec<std::ffi::OsString>) -> Conn {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let label = format!(
            "conformance-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let launch = WorkerLaunch {
            exe: worker_exe(),
            inherit: vec![self.child_lock()],
            cwd: workspace.to_path_buf(),
            log_filter: Some("debug".to_owned()),
            engine,
        };
        let spawner = self.spawner.clone();
        let started = RUNTIME.block_on(async {
            tokio::time::timeout(WAIT, WorkerConn::start(&spawner, launch, label.clone())).await
        });
        let (conn, hello) = match started {
            Ok(Ok(started)) => started,
            Ok(Err(e)) => panic!("the worker did not start: {e}\n{}", logs::of(&label)),
            Err(_) => panic!("the worker did not say hello in time\n{}", logs::of(&label)),
        };
        eprintln!(
            "{label} ({}) as uid {}: process containment {}",
            hello.name,
            nix::unistd::geteuid(),
            serde_json::to_string(&hello.process).unwrap_or_default()
        );
        Conn::run(conn, hello, label)
    }

    /// The child's lock, taken as the broker takes it (`HeldLock`), handed over as fd 3; a
    /// second worker of the same place (after a kill) waits until the first tree is gone.
    fn child_lock(&self) -> OwnedFd {
        let dir = self.state.join("locks/children");
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .expect("locks dir");
        let path = dir.join("child.lock");
        let end = Instant::now() + WAIT;
        loop {
            match HeldLock::try_exclusive(&path).expect("the child lock") {
                Some(held) => return held.into_fd(),
                None if Instant::now() < end => std::thread::sleep(Duration::from_millis(20)),
                None => panic!("the child lock is still held by an earlier worker's tree"),
            }
        }
    }
}

/// A worker started by [`Broker::start`], driven like a child process over pipes.
pub struct Conn {
    hello: Hello,
    orders: mpsc::UnboundedSender<Order>,
    lines: Receiver<Value>,
    seen: Vec<Value>,
    stdout: Arc<Mutex<String>>,
    label: String,
    pid: i32,
    done: Option<std::sync::mpsc::Receiver<()>>,
}

impl Conn {
    fn run(mut conn: WorkerConn, hello: Hello, label: String) -> Conn {
        let (orders, mut inbox) = mpsc::unbounded_channel::<Order>();
        let (tx, lines): (Sender<Value>, Receiver<Value>) = channel();
        let (finished, done) = channel();
        let stdout = Arc::new(Mutex::new(String::new()));
        let out = stdout.clone();
        let pid = conn.pid();
        RUNTIME.spawn(async move {
            let mut reading = true;
            loop {
                tokio::select! {
                    order = inbox.recv() => match order {
                        Some(Order::Send(message)) => {
                            if let Err(e) = conn.send(*message).await {
                                eprintln!("sending to the worker failed: {e}");
                            }
                        }
                        Some(Order::Kill) => {
                            let _ = nix::sys::signal::kill(
                                nix::unistd::Pid::from_raw(pid),
                                nix::sys::signal::Signal::SIGKILL,
                            );
                            conn.wait_exit(Duration::from_secs(5)).await;
                            break;
                        }
                        Some(Order::Close) | None => {
                            conn.close();
                            conn.wait_exit(Duration::from_secs(5)).await;
                            break;
                        }
                    },
                    line = conn.recv(), if reading => match line {
                        Some(Ok(message)) => {
                            let value = serde_json::to_value(&message).expect("a worker message as JSON");
                            out.lock().expect("stdout").push_str(&format!("{value}\n"));
                            let _ = tx.send(value);
                        }
                        Some(Err(bad)) => {
                            let _ = tx.send(json!({"type": BROKEN, "why": bad}));
                        }
                        None => reading = false,
                    },
                }
            }
            let _ = finished.send(());
        });
        let hello_typed = hello.clone();
        let hello = json!({
            "type": "hello",
            "name": hello.name,
            "version": hello.version,
            "transcriptVersion": hello.transcript_version,
            "controlVersion": hello.control_version,
            "protocols": hello.protocols,
            "steering": hello.steering,
            "capabilities": hello.capabilities,
            "process": hello.process,
            "filesystem": hello.filesystem,
            "ownership": hello.ownership,
            "view": hello.view,
            "resources": hello.resources,
        });
        Conn {
            hello: hello_typed,
            orders,
            lines,
            seen: vec![hello],
            stdout,
            label,
            pid,
            done: Some(done),
        }
    }

    /// The worker's `hello`, as the connection read it.
    pub fn hello(&self) -> &Hello {
        &self.hello
    }

    /// The worker's pid (the namespace's init, seen from here).
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Sends `message`, which must be a valid control message (as the broker's are).
    pub fn send(&mut self, message: &Value) {
        let parsed: BrokerMessage = serde_json::from_value(message.clone())
            .unwrap_or_else(|e| panic!("not a control message ({e}): {message}"));
        let _ = self.orders.send(Order::Send(Box::new(parsed)));
    }

    /// The next line matching `pred` (every line read is kept).
    pub fn expect(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        if let Some(found) = self.seen.iter().find(|v| pred(v)) {
            return found.clone();
        }
        let end = Instant::now() + WAIT;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(value) => {
                    assert!(
                        value["type"] != BROKEN,
                        "the worker broke the control contract: {}\nstderr:\n{}",
                        value["why"],
                        self.stderr_text()
                    );
                    self.seen.push(value.clone());
                    if pred(&value) {
                        return value;
                    }
                }
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => panic!(
                    "timed out waiting for {what}; lines so far: {:#?}\nstderr:\n{}",
                    self.seen,
                    self.stderr_text()
                ),
            }
        }
    }

    /// Every control line read from the worker, one JSON object a line.
    pub fn stdout_text(&self) -> String {
        self.stdout.lock().expect("stdout").clone()
    }

    /// The worker's log lines (its stderr, which the broker forwards to its log).
    pub fn stderr_text(&self) -> String {
        logs::of(&self.label)
    }

    /// SIGKILLs the worker (the namespace's init: the kernel ends everything in it).
    pub fn kill(&mut self) {
        let _ = self.orders.send(Order::Kill);
        self.wait_done();
    }

    fn wait_done(&mut self) {
        if let Some(done) = self.done.take() {
            let _ = done.recv_timeout(Duration::from_secs(10));
        }
    }
}

impl ControlLines for Conn {
    fn next_line(&mut self, what: &str, pred: &dyn Fn(&Value) -> bool) -> Value {
        self.expect(what, pred)
    }

    fn lines(&self) -> &[Value] {
        &self.seen
    }
}

impl Drop for Conn {
    /// Closes the control pipe (the worker's cancel-and-exit) and waits for it to exit.
    fn drop(&mut self) {
        let _ = self.orders.send(Order::Close);
        self.wait_done();
    }
}
