//! Store-level figures on a temporary SQLite database (WAL, `synchronous=FULL`, the
//! store's own writer thread), driven through `subzero_runtime::store::Store`.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use subzero_core::events::{EventBody, ToolState};
use subzero_core::{ChildId, ErrorCode, EventSeq, RunId};
use subzero_runtime::paths::StatePaths;
use subzero_runtime::scope::WorkspaceScope;
use subzero_runtime::store::{
    Admit, AdmitSpawn, ModelApi, ModelRow, NewChild, Settlement, Store, StoreOptions,
};
use tempfile::TempDir;

use crate::Fail;
use crate::procs::rss_mib;
use crate::stats::{Samples, ms_since};

const TOKEN: &str = "bk_BENCH";

/// A store in a temp dir with one workspace scope.
pub struct BenchStore {
    tempdir: Option<TempDir>,
    pub store: Store,
    pub scope: WorkspaceScope,
}

impl BenchStore {
    pub fn new() -> Result<BenchStore, Fail> {
        let dir = tempfile::tempdir()?;
        let mut bench = BenchStore::at(dir.path())?;
        bench.tempdir = Some(dir);
        Ok(bench)
    }

    /// A store in `dir/state` for the workspace `dir/workspace` (the layout `BenchEnv`
    /// gives a broker).
    pub fn at(dir: &Path) -> Result<BenchStore, Fail> {
        let paths = StatePaths::create(dir.join("state"))?;
        let workspace = dir.join("workspace");
        std::fs::create_dir_all(&workspace)?;
        let scope = WorkspaceScope::resolve(&workspace.canonicalize()?)?;
        let store = Store::open(&paths.database(), StoreOptions::default())?;
        Ok(BenchStore {
            tempdir: None,
            store,
            scope,
        })
    }

    /// A new running child owned by the bench's token; its admission writes `run_started`.
    pub async fn spawn_child(&self) -> Result<(ChildId, RunId), Fail> {
        let child_id = ChildId::generate();
        let run_id = RunId::generate();
        let input = AdmitSpawn {
            child: NewChild {
                child_id,
                label: "look around".to_owned(),
                scope: self.scope.clone(),
                template_id: "researcher".to_owned(),
                snapshot: json!({"templateId": "researcher", "tools": ["read", "grep", "find", "ls"], "writeCapable": false}),
                write_capable: false,
                model: ModelRow {
                    url: "http://127.0.0.1:9/v1".to_owned(),
                    model: "scripted".to_owned(),
                    api: ModelApi::OpenaiCompletions,
                    credential_ref: "bench".to_owned(),
                    context_window: None,
                },
            },
            run_id,
            prompt: "Survey the workspace.".to_owned(),
            owner_token: TOKEN.to_owned(),
            receipt: None,
        };
        match self.store.admit_spawn(input).await? {
            Admit::New(_) => Ok((child_id, run_id)),
            other => Err(format!("unexpected admission {other:?}").into()),
        }
    }
}

/// The `n`th event of a typical run: mostly tool activity by name, some coalesced text.
fn event(run_id: RunId, n: usize) -> EventBody {
    if n.is_multiple_of(4) {
        EventBody::Text {
            run_id,
            text: format!("Reading the sources, step {n}: the module layout looks conventional."),
            truncated: false,
        }
    } else {
        EventBody::Tool {
            run_id,
            name: "read".to_owned(),
            state: ToolState::Finished,
        }
    }
}

/// Event ingest: batches through `append_events`, singles through `append_event`.
pub struct Ingest {
    pub batch_events_per_s: Samples,
    pub single_events_per_s: Samples,
}

pub async fn ingest(
    runs: usize,
    batches: usize,
    batch: usize,
    singles: usize,
) -> Result<Ingest, Fail> {
    let bench = BenchStore::new()?;
    let mut out = Ingest {
        batch_events_per_s: Samples::default(),
        single_events_per_s: Samples::default(),
    };
    for _ in 0..runs {
        let (child, run) = bench.spawn_child().await?;
        let start = Instant::now();
        for b in 0..batches {
            let events = (0..batch).map(|i| event(run, b * batch + i)).collect();
            bench.store.append_events(child, TOKEN, events).await?;
        }
        out.batch_events_per_s
            .push((batches * batch) as f64 / start.elapsed().as_secs_f64());

        let start = Instant::now();
        for i in 0..singles {
            bench
                .store
                .append_event(child, TOKEN, event(run, i))
                .await?;
        }
        out.single_events_per_s
            .push(singles as f64 / start.elapsed().as_secs_f64());
    }
    bench.store.close();
    Ok(out)
}

/// One waiter in `wait_events`, one appender.
pub struct Wake {
    /// `append_event` returned (commit acknowledged) → the waiter returned with the event;
    /// negative when the waiter won the race against the appender's acknowledgement.
    pub after_commit_ms: Samples,
    /// `append_event` issued → the waiter returned with the event (includes the commit).
    pub after_append_ms: Samples,
}

pub async fn wake_latency(samples: usize) -> Result<Wake, Fail> {
    let bench = Arc::new(BenchStore::new()?);
    let (child, run) = bench.spawn_child().await?;
    let mut out = Wake {
        after_commit_ms: Samples::default(),
        after_append_ms: Samples::default(),
    };
    let mut cursor = bench
        .store
        .events(&bench.scope, child, EventSeq::new(0), 50)
        .await?
        .next_cursor;
    for i in 0..samples {
        let waiter = {
            let bench = bench.clone();
            tokio::spawn(async move {
                let page = bench
                    .store
                    .wait_events(&bench.scope, child, cursor, 50, Duration::from_secs(10))
                    .await;
                (Instant::now(), page)
            })
        };
        // Let the waiter reach its wait.
        tokio::time::sleep(Duration::from_millis(5)).await;
        let start = Instant::now();
        bench
            .store
            .append_event(child, TOKEN, event(run, i))
            .await?;
        let committed = Instant::now();
        let (woke, page) = waiter.await?;
        let page = page?;
        if page.events.is_empty() {
            return Err("a waiter timed out without the event".into());
        }
        cursor = page.next_cursor;
        out.after_append_ms
            .push(woke.duration_since(start).as_secs_f64() * 1000.0);
        let signed = if woke >= committed {
            woke.duration_since(committed).as_secs_f64()
        } else {
            -committed.duration_since(woke).as_secs_f64()
        };
        out.after_commit_ms.push(signed * 1000.0);
    }
    bench.store.close();
    Ok(out)
}

/// 1,000 concurrent `wait_events` waiters on one child, one append.
pub struct Waiters {
    pub all_woke_ms: Samples,
    pub woke: usize,
    pub expected: usize,
    pub rss_per_waiter_kib: Samples,
}

pub async fn many_waiters(waiters: usize, runs: usize) -> Result<Waiters, Fail> {
    let bench = Arc::new(BenchStore::new()?);
    let (child, run) = bench.spawn_child().await?;
    let mut out = Waiters {
        all_woke_ms: Samples::default(),
        woke: 0,
        expected: waiters * runs,
        rss_per_waiter_kib: Samples::default(),
    };
    let me = std::process::id();
    for i in 0..runs {
        let cursor = bench
            .store
            .events(&bench.scope, child, EventSeq::new(u64::MAX >> 1), 1)
            .await?
            .next_cursor;
        let before = rss_mib(me).unwrap_or(0.0);
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..waiters {
            let bench = bench.clone();
            set.spawn(async move {
                let page = bench
                    .store
                    .wait_events(&bench.scope, child, cursor, 50, Duration::from_secs(20))
                    .await;
                page.is_ok_and(|p| !p.events.is_empty())
            });
        }
        // Every waiter has done its first read and sleeps on the commit signal.
        tokio::time::sleep(Duration::from_millis(1000)).await;
        let during = rss_mib(me).unwrap_or(before);
        out.rss_per_waiter_kib
            .push((during - before).max(0.0) * 1024.0 / waiters as f64);
        let start = Instant::now();
        bench
            .store
            .append_event(child, TOKEN, event(run, i))
            .await?;
        let mut woke = 0;
        while let Some(done) = set.join_next().await {
            woke += usize::from(done.unwrap_or(false));
        }
        out.all_woke_ms.push(ms_since(start));
        out.woke += woke;
    }
    bench.store.close();
    Ok(out)
}

/// A database with `children` settled children holding `per_child` retained events each.
pub struct Populated {
    pub bench: BenchStore,
    pub children: Vec<ChildId>,
    pub events: u64,
    pub seconds: f64,
}

/// Populate through the store API: per child `admit_spawn` (+ `run_started`),
/// `append_events` with the rest of its events in one batch, a
/// `Failed` settlement (+ its terminal event; a `Completed` one needs the supervisor's
/// leaf proof), which leaves the child ready and unowned, as a broker expects.
/// 32 children are in flight at a time; the writer thread serialises them.
pub async fn populate(dir: &Path, children: usize, per_child: usize) -> Result<Populated, Fail> {
    let bench = Arc::new(BenchStore::at(dir)?);
    let start = Instant::now();
    let mut ids = Vec::with_capacity(children);
    let mut done = 0;
    while done < children {
        let mut set = tokio::task::JoinSet::new();
        for _ in done..(done + 32).min(children) {
            let bench = bench.clone();
            set.spawn(async move {
                let (child, run) = bench.spawn_child().await?;
                let events = (1..per_child.saturating_sub(1))
                    .map(|i| event(run, i))
                    .collect();
                bench.store.append_events(child, TOKEN, events).await?;
                bench
                    .store
                    .settle_run(
                        child,
                        run,
                        TOKEN,
                        Settlement::Failed {
                            code: ErrorCode::ModelRequestFailed,
                            message: "the scripted model went away".to_owned(),
                            partial: None,
                            details: None,
                        },
                    )
                    .await?;
                Ok::<_, Fail>(child)
            });
        }
        while let Some(joined) = set.join_next().await {
            ids.push(joined??);
        }
        done = ids.len();
    }
    let seconds = start.elapsed().as_secs_f64();
    let bench = Arc::try_unwrap(bench).map_err(|_| "the store is still shared")?;
    let events: u64 = bench
        .store
        .read(|c| Ok(c.query_row("SELECT COUNT(*) FROM events", [], |r| r.get::<_, i64>(0))?))
        .await?
        .try_into()
        .unwrap_or(0);
    ids.sort_by_key(|c| c.to_string());
    Ok(Populated {
        bench,
        children: ids,
        events,
        seconds,
    })
}

/// Store-level reads on the populated database.
pub struct StoreReads {
    pub list_first_page_ms: Samples,
    pub list_middle_page_ms: Samples,
    pub events_page_ms: Samples,
}

pub async fn store_reads(p: &Populated, runs: usize) -> Result<StoreReads, Fail> {
    let mut out = StoreReads {
        list_first_page_ms: Samples::default(),
        list_middle_page_ms: Samples::default(),
        events_page_ms: Samples::default(),
    };
    let store = &p.bench.store;
    let scope = &p.bench.scope;
    for i in 0..runs {
        let start = Instant::now();
        let rows = store.list_children(scope, 51, None).await?;
        out.list_first_page_ms.push(ms_since(start));
        if rows.is_empty() {
            return Err("list_children returned nothing".into());
        }
        let middle = p.children[(p.children.len() / 2 + i * 97) % p.children.len()];
        let start = Instant::now();
        store.list_children(scope, 51, Some(middle)).await?;
        out.list_middle_page_ms.push(ms_since(start));
        let start = Instant::now();
        let page = store.events(scope, middle, EventSeq::new(0), 50).await?;
        out.events_page_ms.push(ms_since(start));
        if page.events.is_empty() {
            return Err("a populated child has no events".into());
        }
    }
    Ok(out)
}
