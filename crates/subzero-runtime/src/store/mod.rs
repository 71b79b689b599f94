//! The SQLite store: one database per OS user, shared by every broker of that user.
//!
//! Writes go through one dedicated thread that owns the only write connection and runs
//! each submitted closure inside `BEGIN IMMEDIATE`; the closure's `Err` rolls the whole
//! transaction back, so an operation is all or nothing. Async callers await a oneshot,
//! so the reactor never blocks on SQLite. Reads use separate read-only connections on
//! tokio's blocking pool.

mod events;
mod lifecycle;
mod ops;
mod rows;
mod schema;

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, Transaction, TransactionBehavior};
use tokio::sync::{oneshot, watch};

use crate::error::{RuntimeError, RuntimeResult};

pub use events::MAX_EVENT_PAYLOAD_BYTES;
pub use ops::{
    Admission, AdmitFollowup, AdmitSpawn, Claim, FollowupDelivery, LockObservation, NewArtifact,
    NextRun, PartialResult, RecoveryOutcome, ResumeCommit, Resumed, Settled, Settlement, StopBegun,
};
pub use rows::{
    Admit, ArtifactRow, ChildRow, EventGap, EventPage, EventRow, LeafRef, ModelRow, NewChild,
    Ownership, Phase, ReceiptInput, RunRow, WorkerInfo,
};
pub use schema::SCHEMA_VERSION;
/// The message of a core refusal without its leading `code: `, for errors that keep the core's words.
pub(crate) use lifecycle::uncoded as lifecycle_message;

/// The name of the writer thread (tests assert mutations run there).
pub const WRITER_THREAD_NAME: &str = "subzero-store-writer";

/// Tunables.
#[derive(Clone, Debug)]
pub struct StoreOptions {
    /// Events kept per child (default 1,000).
    pub event_retention: u64,
    /// Payload bytes kept per child (default 1 MiB).
    pub event_retention_bytes: u64,
    /// How long a connection waits for another broker's write lock (default 5 s).
    pub busy_timeout: Duration,
    /// How often a waiting reader re-checks for other brokers' writes (default 100 ms).
    pub poll_interval: Duration,
    /// Follow-ups that may wait behind one child's active run (the core's
    /// `queued_followups` limit; default 16). A fuller queue is `limit_exceeded`.
    pub queued_followups: u32,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            event_retention: 1000,
            event_retention_bytes: 1024 * 1024,
            busy_timeout: Duration::from_secs(5),
            poll_interval: Duration::from_millis(100),
            queued_followups: subzero_core::Limits::default().queued_followups,
        }
    }
}

type Job = Box<dyn FnOnce(&mut Connection, &StoreOptions) + Send>;

#[derive(Debug)]
struct Inner {
    path: PathBuf,
    options: StoreOptions,
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
    writer: Mutex<Option<JoinHandle<()>>>,
    readers: Mutex<Vec<Connection>>,
    commits: watch::Sender<u64>,
}

/// Handle to the store; cheap to clone.
#[derive(Clone, Debug)]
pub struct Store {
    inner: Arc<Inner>,
}

fn open_write(path: &Path, options: &StoreOptions) -> RuntimeResult<Connection> {
    // Create the file owner-only; SQLite gives the WAL and shm files the same mode.
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .map_err(|e| RuntimeError::io(format!("cannot create {}", path.display()), e))?;
    let mut conn = Connection::open(path)?;
    conn.busy_timeout(options.busy_timeout)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", true)?;
    schema::migrate(&mut conn)?;
    Ok(conn)
}

fn open_read(path: &Path, options: &StoreOptions) -> RuntimeResult<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI,
    )?;
    conn.busy_timeout(options.busy_timeout)?;
    Ok(conn)
}

impl Store {
    /// Open (creating and migrating) the database at `path` and start the writer thread.
    /// Blocking: call it before entering the reactor or from `spawn_blocking`.
    pub fn open(path: &Path, options: StoreOptions) -> RuntimeResult<Store> {
        let mut conn = open_write(path, &options)?;
        let (jobs, rx) = mpsc::channel::<Job>();
        let thread_options = options.clone();
        let writer = std::thread::Builder::new()
            .name(WRITER_THREAD_NAME.to_owned())
            .spawn(move || {
                while let Ok(job) = rx.recv() {
                    job(&mut conn, &thread_options);
                }
                tracing::debug!("store writer stopped");
            })
            .map_err(|e| RuntimeError::io("cannot start the store writer thread", e))?;
        let (commits, _) = watch::channel(0);
        Ok(Store {
            inner: Arc::new(Inner {
                path: path.to_path_buf(),
                options,
                jobs: Mutex::new(Some(jobs)),
                writer: Mutex::new(Some(writer)),
                readers: Mutex::new(Vec::new()),
                commits,
            }),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The options in force.
    pub fn options(&self) -> &StoreOptions {
        &self.inner.options
    }

    /// Stop accepting writes and wait for the writer to finish queued work.
    pub fn close(&self) {
        if let Ok(mut jobs) = self.inner.jobs.lock() {
            jobs.take();
        }
        let handle = self.inner.writer.lock().ok().and_then(|mut w| w.take());
        if let Some(handle) = handle
            && handle.join().is_err()
        {
            tracing::error!("store writer thread panicked");
        }
        if let Ok(mut readers) = self.inner.readers.lock() {
            readers.clear();
        }
    }

    fn submit<T, F>(&self, f: F) -> RuntimeResult<oneshot::Receiver<RuntimeResult<T>>>
    where
        T: Send + 'static,
        F: FnOnce(&Transaction<'_>, &StoreOptions) -> RuntimeResult<T> + Send + 'static,
    {
        self.submit_with(f, false)
    }

    fn submit_with<T, F>(
        &self,
        f: F,
        patient: bool,
    ) -> RuntimeResult<oneshot::Receiver<RuntimeResult<T>>>
    where
        T: Send + 'static,
        F: FnOnce(&Transaction<'_>, &StoreOptions) -> RuntimeResult<T> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let commits = self.inner.commits.clone();
        let job: Job = Box::new(move |conn, options| {
            let result = run_immediate(conn, options, f, patient);
            if result.is_ok() {
                commits.send_modify(|n| *n = n.wrapping_add(1));
            }
            let _ = tx.send(result);
        });
        let jobs = self
            .inner
            .jobs
            .lock()
            .map_err(|_| RuntimeError::ShuttingDown)?;
        jobs.as_ref()
            .ok_or(RuntimeError::ShuttingDown)?
            .send(job)
            .map_err(|_| RuntimeError::ShuttingDown)?;
        Ok(rx)
    }

    /// Run `f` in one `BEGIN IMMEDIATE` transaction on the writer thread. `Ok` commits,
    /// `Err` rolls everything back. The reactor only awaits a oneshot.
    pub async fn transact<T, F>(&self, f: F) -> RuntimeResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Transaction<'_>, &StoreOptions) -> RuntimeResult<T> + Send + 'static,
    {
        self.submit(f)?
            .await
            .map_err(|_| RuntimeError::ShuttingDown)?
    }

    /// [`Store::transact`] for writes that must not be lost to a database locked by
    /// another process (a worker's events and settlements): while the write lock is held
    /// elsewhere past the busy timeout, taking it is retried for up to [`DURABLE_RETRY`];
    /// `f` runs once, after the lock is ours. Admission and other caller-facing writes
    /// use `transact`, so a caller gets `busy` after the busy timeout, not a hung call.
    pub async fn transact_durable<T, F>(&self, f: F) -> RuntimeResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Transaction<'_>, &StoreOptions) -> RuntimeResult<T> + Send + 'static,
    {
        self.submit_with(f, true)?
            .await
            .map_err(|_| RuntimeError::ShuttingDown)?
    }

    /// [`Store::transact`] for synchronous callers (startup, tests). Never call it on
    /// the reactor.
    pub fn transact_blocking<T, F>(&self, f: F) -> RuntimeResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Transaction<'_>, &StoreOptions) -> RuntimeResult<T> + Send + 'static,
    {
        self.submit(f)?
            .blocking_recv()
            .map_err(|_| RuntimeError::ShuttingDown)?
    }

    fn with_reader<T>(&self, f: impl FnOnce(&Connection) -> RuntimeResult<T>) -> RuntimeResult<T> {
        let pooled = self.inner.readers.lock().ok().and_then(|mut r| r.pop());
        let mut conn = match pooled {
            Some(conn) => conn,
            None => open_read(&self.inner.path, &self.inner.options)?,
        };
        let result = {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Deferred)?;
            let value = f(&tx);
            tx.finish()?;
            value
        };
        if let Ok(mut readers) = self.inner.readers.lock()
            && readers.len() < 4
        {
            readers.push(conn);
        }
        result
    }

    /// Run a read-only closure in one snapshot on a read connection, synchronously.
    pub fn read_blocking<T>(
        &self,
        f: impl FnOnce(&Connection) -> RuntimeResult<T>,
    ) -> RuntimeResult<T> {
        self.with_reader(f)
    }

    /// Run a read-only closure in one snapshot on tokio's blocking pool.
    pub async fn read<T, F>(&self, f: F) -> RuntimeResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> RuntimeResult<T> + Send + 'static,
    {
        let store = self.clone();
        tokio::task::spawn_blocking(move || store.with_reader(f))
            .await
            .map_err(|e| RuntimeError::Internal(format!("store read task failed: {e}")))?
    }

    /// A receiver that changes after every local commit (other brokers' commits are
    /// seen by polling; see [`StoreOptions::poll_interval`]).
    pub fn commits(&self) -> watch::Receiver<u64> {
        self.inner.commits.subscribe()
    }
}

fn run_immediate<T>(
    conn: &mut Connection,
    options: &StoreOptions,
    f: impl FnOnce(&Transaction<'_>, &StoreOptions) -> RuntimeResult<T>,
    patient: bool,
) -> RuntimeResult<T> {
    let started = std::time::Instant::now();
    // With WAL and BEGIN IMMEDIATE, a lock held by another process shows up here, when
    // the write lock is taken, before `f` runs; a patient caller waits it out.
    let tx = loop {
        match conn.transaction_with_behavior(TransactionBehavior::Immediate) {
            Ok(tx) => break tx,
            Err(e) => {
                let err = RuntimeError::from(e);
                if patient
                    && matches!(err, RuntimeError::Locked(_))
                    && started.elapsed() < DURABLE_RETRY
                {
                    tracing::warn!(
                        "state database locked by another process; waiting to record a write that must not be lost"
                    );
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                }
                return Err(err);
            }
        }
    };
    let value = f(&tx, options)?;
    tx.commit()?;
    Ok(value)
}

/// How long [`Store::transact_durable`] keeps retrying a write against a locked database.
pub const DURABLE_RETRY: Duration = Duration::from_secs(300);

/// The current time as stored: RFC 3339 UTC with milliseconds.
pub(crate) fn now(conn: &Connection) -> RuntimeResult<String> {
    Ok(
        conn.query_row("SELECT strftime('%Y-%m-%dT%H:%M:%fZ', 'now')", [], |r| {
            r.get(0)
        })?,
    )
}
