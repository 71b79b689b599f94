//! The SQLite store: one database per OS user, shared by every broker of that user.
//!
//! Writes go through one dedicated thread that owns the only write connection and runs
//! each submitted closure inside `BEGIN IMMEDIATE`; the closure's `Err` rolls the whole
//! transaction back, so an operation is all or nothing. Async callers await a oneshot,
//! so the reactor never blocks on SQLite. Reads use separate read-only connections on
//! tokio's blocking pool.
//!
//! What callers may rely on:
//! - A transaction that panics is rolled back and answers `internal`; the writer thread
//!   survives it and later writes work.
//! - Every write transaction first checks that the path still names the database file
//!   the store opened (device and inode); a database deleted or replaced under the store
//!   is refused with `storage_unavailable` and never written into its orphan.
//! - [`Store::close`] checkpoints the WAL into the database (`wal_checkpoint(TRUNCATE)`),
//!   so the last broker to exit leaves a `subzero.db` that is complete by itself.
//! - [`Store::open_read_only`] (for `subzero ls`, `show`, …) never creates, migrates or
//!   writes a database and never waits for a writer.
//! - Nothing outside this module writes through a raw-SQL transaction: the public writes
//!   are the operations of `ops/`, each one decided by the core and written by
//!   `write.rs`; the transaction runner is private to the store.
//! - The store holds the core's [`StorageKey`], taken once per process: only the store
//!   loads lifecycle values from stored records.

mod events;
mod file;
mod grant;
mod ledger;
mod lifecycle;
mod ops;
mod rows;
mod schema;
mod sql;
#[cfg(test)]
mod tests;
mod write;

use std::os::unix::fs::OpenOptionsExt;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use std::sync::LazyLock;

use rusqlite::{Connection, OpenFlags, Transaction, TransactionBehavior};
use subzero_core::lifecycle::StorageKey;
use tokio::sync::{oneshot, watch};

use crate::error::{RuntimeError, RuntimeResult};
use file::DatabaseFile;

pub use grant::StoredSnapshot;
pub use ledger::{CheckoutFilter, CheckoutRow};
pub use ops::{
    Admission, AdmitFollowup, AdmitSpawn, ChildFilter, ChildView, Claim, FollowupDelivery,
    LockObservation, NewArtifact, NextRun, PartialResult, RecoveryOutcome, ResumeCommit, Resumed,
    Settled, Settlement, StopBegun, TASK_TOOLS, TaskRow,
};
pub use rows::{
    Admit, ArtifactRow, ChildRow, ErrorDetails, EventGap, EventPage, EventRow, LeafRef, ModelApi,
    ModelRow, NewChild, Ownership, Phase, ReceiptInput, RunRow, RunUsage, Timestamp, UsageSource,
    WorkerInfo,
};
pub use schema::SCHEMA_VERSION;

/// The store's key to load lifecycle values, taken the first time a store is used in this
/// process (the core hands it out once).
static STORAGE_KEY: LazyLock<Option<StorageKey>> = LazyLock::new(StorageKey::take);

/// The store's key; an error when code other than the store took it first (nothing can
/// then be loaded from the records, so nothing is written either).
pub(crate) fn storage_key() -> RuntimeResult<&'static StorageKey> {
    STORAGE_KEY.as_ref().ok_or_else(|| {
        RuntimeError::Internal(
            "the storage key of this process was taken by code other than the store; \
             the store cannot load lifecycle values without it"
                .to_owned(),
        )
    })
}

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
    /// Largest event payload (the core's `event_payload_bytes` limit; default 8 KiB).
    /// A bigger one is `limit_exceeded`: its content belongs in an artifact.
    pub event_payload_bytes: u32,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            event_retention: 1000,
            event_retention_bytes: 1024 * 1024,
            busy_timeout: Duration::from_secs(5),
            poll_interval: Duration::from_millis(100),
            queued_followups: subzero_core::Limits::default().queued_followups,
            event_payload_bytes: subzero_core::Limits::default().event_payload_bytes,
        }
    }
}

impl StoreOptions {
    /// The core's limits for what the store checks (the event payload).
    pub fn limits(&self) -> subzero_core::Limits {
        subzero_core::Limits {
            event_payload_bytes: self.event_payload_bytes,
            queued_followups: self.queued_followups,
            ..subzero_core::Limits::default()
        }
    }
}

/// What the writer thread owns: the only write connection and the file it must still be.
struct Writer {
    conn: Connection,
    options: StoreOptions,
    file: DatabaseFile,
}

type Job = Box<dyn FnOnce(&mut Writer) + Send>;

#[derive(Debug)]
struct Inner {
    path: PathBuf,
    options: StoreOptions,
    /// `false` for [`Store::open_read_only`]: no writer thread, writes refused.
    writable: bool,
    /// Set by [`Store::close`]: read connections are no longer kept.
    closed: AtomicBool,
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

/// A read connection: opened read-only and `query_only`, so nothing it runs can write.
fn open_read(path: &Path, options: &StoreOptions) -> RuntimeResult<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI,
    )?;
    conn.busy_timeout(options.busy_timeout)?;
    conn.pragma_update(None, "query_only", true)?;
    Ok(conn)
}

impl Store {
    /// Open (creating and migrating) the database at `path` and start the writer thread.
    /// Blocking: call it before entering the reactor or from `spawn_blocking`.
    pub fn open(path: &Path, options: StoreOptions) -> RuntimeResult<Store> {
        let conn = open_write(path, &options)?;
        let file = DatabaseFile::identify(path)?;
        let (jobs, rx) = mpsc::channel::<Job>();
        let writer = Writer {
            conn,
            options: options.clone(),
            file,
        };
        let writer = std::thread::Builder::new()
            .name(WRITER_THREAD_NAME.to_owned())
            .spawn(move || writer.serve(&rx))
            .map_err(|e| RuntimeError::io("cannot start the store writer thread", e))?;
        Ok(Store::with_inner(
            path,
            options,
            true,
            Some(jobs),
            Some(writer),
        ))
    }

    /// Open an existing database for reading only: no writer thread, no migration, no
    /// write lock, nothing created. `None` when there is no database at `path` (nothing
    /// has run with this state directory yet). A database at another schema version is
    /// refused: an older one names `subzero mcp` as the one that upgrades it.
    /// Every write on the returned store fails with `internal` ("opened read-only").
    pub fn open_read_only(path: &Path, options: StoreOptions) -> RuntimeResult<Option<Store>> {
        match std::fs::metadata(path) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(RuntimeError::io(
                    format!("cannot read the state database {}", path.display()),
                    e,
                ));
            }
        }
        let conn = open_read(path, &options)?;
        schema::check_readable(&conn, path)?;
        let store = Store::with_inner(path, options, false, None, None);
        store.give_back(conn);
        Ok(Some(store))
    }

    fn with_inner(
        path: &Path,
        options: StoreOptions,
        writable: bool,
        jobs: Option<mpsc::Sender<Job>>,
        writer: Option<JoinHandle<()>>,
    ) -> Store {
        let (commits, _) = watch::channel(0);
        Store {
            inner: Arc::new(Inner {
                path: path.to_path_buf(),
                options,
                writable,
                closed: AtomicBool::new(false),
                jobs: Mutex::new(jobs),
                writer: Mutex::new(writer),
                readers: Mutex::new(Vec::new()),
                commits,
            }),
        }
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The options in force.
    pub fn options(&self) -> &StoreOptions {
        &self.inner.options
    }

    /// Stop accepting writes, wait for the writer to finish queued work, checkpoint the
    /// WAL into the database and close every connection. Read connections close first,
    /// so the writer's is this process's last and SQLite removes the emptied WAL.
    pub fn close(&self) {
        self.inner.closed.store(true, Ordering::SeqCst);
        self.drop_readers();
        if let Ok(mut jobs) = self.inner.jobs.lock() {
            jobs.take();
        }
        let handle = self.inner.writer.lock().ok().and_then(|mut w| w.take());
        if let Some(handle) = handle
            && handle.join().is_err()
        {
            tracing::error!("store writer thread panicked");
        }
        self.drop_readers();
    }

    fn drop_readers(&self) {
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
        if !self.inner.writable {
            return Err(RuntimeError::Internal(format!(
                "the store at {} was opened read-only (for inspection); only `subzero mcp` writes it",
                self.inner.path.display()
            )));
        }
        let (tx, rx) = oneshot::channel();
        let commits = self.inner.commits.clone();
        let job: Job = Box::new(move |writer| {
            let result = writer.transaction(f, patient);
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
    /// `Err` rolls everything back. The reactor only awaits a oneshot. Private to the
    /// store: its operations are the only writers.
    async fn transact<T, F>(&self, f: F) -> RuntimeResult<T>
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
    async fn transact_durable<T, F>(&self, f: F) -> RuntimeResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Transaction<'_>, &StoreOptions) -> RuntimeResult<T> + Send + 'static,
    {
        self.submit_with(f, true)?
            .await
            .map_err(|_| RuntimeError::ShuttingDown)?
    }

    /// [`Store::transact`] for synchronous callers (startup). Never call it on the
    /// reactor.
    fn transact_blocking<T, F>(&self, f: F) -> RuntimeResult<T>
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
        self.give_back(conn);
        result
    }

    /// Keep an idle read connection for the next read (at most 4; none once closed).
    fn give_back(&self, conn: Connection) {
        if self.inner.closed.load(Ordering::SeqCst) {
            return;
        }
        if let Ok(mut readers) = self.inner.readers.lock()
            && readers.len() < 4
        {
            readers.push(conn);
        }
    }

    /// Run a read-only closure in one snapshot on a read connection, synchronously.
    pub fn read_blocking<T>(
        &self,
        f: impl FnOnce(&Connection) -> RuntimeResult<T>,
    ) -> RuntimeResult<T> {
        self.with_reader(f)
    }

    /// Run a read-only closure in one snapshot on tokio's blocking pool (a read
    /// connection is `query_only`: nothing it runs can write).
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

    /// How many receivers of [`Store::commits`] live now: a reader waiting for events holds
    /// one (a test knows by it that a reader has started waiting).
    pub fn commit_watchers(&self) -> usize {
        self.inner.commits.receiver_count()
    }
}

impl Writer {
    /// Run jobs until every sender is gone, then checkpoint. A job catches its own
    /// transaction's panic; this loop catches one in a job's bookkeeping, so no panic
    /// ever ends the thread that every write of this process goes through.
    fn serve(mut self, jobs: &mpsc::Receiver<Job>) {
        while let Ok(job) = jobs.recv() {
            if let Err(panic) = std::panic::catch_unwind(AssertUnwindSafe(|| job(&mut self))) {
                tracing::error!(
                    panic = panic_text(panic.as_ref()),
                    "a store job panicked; the writer continues"
                );
            }
            self.rollback_leftover();
        }
        self.checkpoint();
        tracing::debug!("store writer stopped");
    }

    /// One write transaction: `f` in `BEGIN IMMEDIATE`, on the file the store opened.
    /// A panic in `f` rolls back and answers `internal`; a file-system refusal is
    /// `storage_unavailable` naming the path.
    fn transaction<T>(
        &mut self,
        f: impl FnOnce(&Transaction<'_>, &StoreOptions) -> RuntimeResult<T>,
        patient: bool,
    ) -> RuntimeResult<T> {
        let run = AssertUnwindSafe(|| {
            run_immediate(&mut self.conn, &self.options, &self.file, f, patient)
        });
        let result = match std::panic::catch_unwind(run) {
            Ok(result) => result,
            Err(panic) => {
                let text = panic_text(panic.as_ref());
                tracing::error!(panic = text, "a store transaction panicked; rolled back");
                Err(RuntimeError::Internal(format!(
                    "a store transaction panicked ({text}); it was rolled back and nothing changed — retry, and report this as a bug with the broker's log"
                )))
            }
        };
        self.rollback_leftover();
        result.map_err(|e| file::storage_failure(e, self.file.path()))
    }

    /// A transaction left open by an unwinding job is rolled back (rusqlite's drop
    /// normally did that already).
    fn rollback_leftover(&self) {
        if !self.conn.is_autocommit()
            && let Err(e) = self.conn.execute_batch("ROLLBACK")
        {
            tracing::error!(error = %e, "cannot roll back a transaction a panicking job left open");
        }
    }

    /// Fold the WAL into the database file and truncate it, so the file is complete by
    /// itself (a plain copy is a backup). Never waits: while another broker reads or
    /// writes, the checkpoint stays partial, and the last broker to close completes it.
    /// Never touches a file that is no longer the one at the store's path.
    fn checkpoint(&self) {
        if let Err(e) = self.file.check() {
            tracing::warn!(error = %e, "not checkpointing the state database");
            return;
        }
        if let Err(e) = self.conn.busy_timeout(Duration::ZERO) {
            tracing::debug!(error = %e, "cannot shorten the busy timeout for the checkpoint");
        }
        let outcome = self
            .conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
                Ok((
                    r.get::<_, i64>("busy")?,
                    r.get::<_, i64>("log")?,
                    r.get::<_, i64>("checkpointed")?,
                ))
            });
        match outcome {
            Ok((0, _, _)) => tracing::debug!("checkpointed the WAL into the state database"),
            Ok((_, frames, done)) => tracing::debug!(
                frames,
                done,
                "WAL checkpoint left partial: another broker is using the database; the last one to close completes it"
            ),
            Err(e) => tracing::debug!(
                error = %e,
                "WAL checkpoint did not run (another broker is using the database); the last one to close completes it"
            ),
        }
    }
}

/// The message of a caught panic.
fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".to_owned())
}

fn run_immediate<T>(
    conn: &mut Connection,
    options: &StoreOptions,
    file: &DatabaseFile,
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
    // Holding the write lock, before anything is written: is the path still our file?
    // Dropping `tx` on the error rolls the (empty) transaction back.
    file.check()?;
    let value = f(&tx, options)?;
    tx.commit()?;
    Ok(value)
}

/// How long [`Store::transact_durable`] keeps retrying a write against a locked database.
pub const DURABLE_RETRY: Duration = Duration::from_secs(300);

/// The current time as stored: RFC 3339 UTC with milliseconds.
pub(crate) fn now(conn: &Connection) -> RuntimeResult<Timestamp> {
    Ok(conn.query_row(
        "SELECT strftime('%Y-%m-%dT%H:%M:%fZ', 'now') AS now",
        [],
        |r| sql::RowExt::col(r, "now"),
    )?)
}
