//! The store section: event ingest, how fast a waiting get wakes, many waiters at once,
//! and list and get on a populated database, through the store API and through a broker.

use std::path::Path;

use crate::plan::Plan;
use crate::report::Target;
use crate::sink::{Sink, one};
use crate::{broker, env, store};

const STORE: &str = "Store";

/// Every figure of the store section, in the order of the report.
pub async fn measure(exe: &Path, plan: &Plan, sink: &mut Sink) {
    let n = plan.runs;
    ingest_figures(n, sink).await;
    wake_figures(plan, sink).await;
    waiter_figures(plan, n, sink).await;
    populated_figures(exe, plan, n, sink).await;
}

/// Events appended per second, in batches and one by one.
async fn ingest_figures(n: usize, sink: &mut Sink) {
    eprintln!("event ingest…");
    match store::ingest(n, 100, 100, 200).await {
        Ok(ingest) => {
            sink.add(STORE, "event ingest, `append_events` batches of 100", "events/s", ingest.batch_events_per_s, Some(Target::MedianAtLeast(20_000.0)),
                "10,000 events per run into one child (retention 1,000 prunes as it goes); one `BEGIN IMMEDIATE` transaction per batch");
            sink.add(
                STORE,
                "event ingest, single `append_event` calls",
                "events/s",
                ingest.single_events_per_s,
                None,
                "200 sequential calls per run, one transaction (and fsync) each",
            );
        }
        Err(e) => sink.failed("event ingest", &e),
    }
}

/// An append → the get waiting on it returned.
async fn wake_figures(plan: &Plan, sink: &mut Sink) {
    eprintln!("get wake-up…");
    match store::wake_latency(plan.wake_samples).await {
        Ok(wake) => {
            sink.add(STORE, "get wake-up after an event lands", "ms", wake.after_commit_ms, Some(Target::P95AtMost(5.0)),
                "one `wait_events` waiter (what `subzero_get` waits on), one `append_event` from another task: append acknowledged → waiter returned with the event (negative: the waiter won the race)");
            sink.add(
                STORE,
                "get wake-up, counted from the append call",
                "ms",
                wake.after_append_ms,
                None,
                "append issued → waiter returned; includes the commit's fsync",
            );
        }
        Err(e) => sink.failed("get wake-up", &e),
    }
}

/// Many gets waiting on one child: how long until all woke, and what each costs.
async fn waiter_figures(plan: &Plan, n: usize, sink: &mut Sink) {
    eprintln!("{} concurrent waiters…", plan.waiters);
    match store::many_waiters(plan.waiters, n).await {
        Ok(w) => {
            sink.add(STORE, &format!("{} concurrent get waiters: append → all woke", plan.waiters), "ms", w.all_woke_ms, None,
                "all waiting in `wait_events` on one child; one `append_event`; time until the last returned");
            sink.add(
                STORE,
                &format!("{} concurrent get waiters: memory per waiter", plan.waiters),
                "KiB",
                w.rss_per_waiter_kib,
                None,
                "RSS growth of the bench process while they wait ÷ waiters",
            );
            sink.notes.push(format!(
                "{} concurrent waiters: {} of {} waits returned the event.",
                plan.waiters, w.woke, w.expected
            ));
        }
        Err(e) => sink.failed("concurrent waiters", &e),
    }
}

/// Populate a database with `plan.children` children, then list and get on it.
async fn populated_figures(exe: &Path, plan: &Plan, n: usize, sink: &mut Sink) {
    eprintln!(
        "populating {} children × {} events…",
        plan.children, plan.events_per_child
    );
    let env = match env::BenchEnv::new(exe, Vec::new()) {
        Ok(env) => env,
        Err(e) => return sink.failed("list and get", &e),
    };
    let populated =
        match store::populate(env.dir.path(), plan.children, plan.events_per_child).await {
            Ok(p) => p,
            Err(e) => return sink.failed("list and get population", &e),
        };
    let rate = populated.events as f64 / populated.seconds;
    sink.add(STORE, "event ingest while populating (whole population)", "events/s", one(rate), None,
        &format!("{} children: admit_spawn, append_events ({} events), settle, release; 32 children in flight", plan.children, plan.events_per_child));
    sink.notes.push(format!(
        "list/get database: {} children and {} retained events, populated through the store API in {:.1} s; database file {:.0} MiB.",
        populated.children.len(),
        populated.events,
        populated.seconds,
        std::fs::metadata(env.state_dir().join("subzero.db")).map_or(f64::NAN, |m| m.len() as f64 / 1024.0 / 1024.0),
    ));
    store_read_figures(&populated, n, sink).await;
    populated.bench.store.close();
    let ids: Vec<String> = populated.children.iter().map(ToString::to_string).collect();
    list_get_figures(&env, &ids, n, sink).await;
}

/// The store API's list and events pages on the populated database.
async fn store_read_figures(populated: &store::Populated, n: usize, sink: &mut Sink) {
    match store::store_reads(populated, n).await {
        Ok(r) => {
            sink.add(
                STORE,
                "store `list_children`, first page of 50",
                "ms",
                r.list_first_page_ms,
                Some(Target::MedianAtMost(50.0)),
                "store API on the populated database",
            );
            sink.add(
                STORE,
                "store `list_children`, page of 50 from the middle",
                "ms",
                r.list_middle_page_ms,
                Some(Target::MedianAtMost(50.0)),
                "`after` = a child in the middle",
            );
            sink.add(
                STORE,
                "store `events`, 50 events of one child",
                "ms",
                r.events_page_ms,
                None,
                "cursor 0",
            );
        }
        Err(e) => sink.failed("store reads", &e),
    }
}

/// `subzero_list` and `subzero_get` through a broker on the populated database.
async fn list_get_figures(env: &env::BenchEnv, ids: &[String], n: usize, sink: &mut Sink) {
    match broker::list_and_get(env, ids, n).await {
        Ok(r) => {
            sink.add(
                STORE,
                "`subzero_list` (default page of 50)",
                "ms",
                r.list_ms,
                Some(Target::MedianAtMost(50.0)),
                "MCP round trip through a broker on the populated database",
            );
            sink.add(
                STORE,
                "`subzero_list` limit 200",
                "ms",
                r.list_200_ms,
                None,
                "largest page",
            );
            sink.add(
                STORE,
                "`subzero_get` of one child",
                "ms",
                r.get_ms,
                None,
                "eventLimit 50, waitMs 0",
            );
        }
        Err(e) => sink.failed("subzero_list and subzero_get", &e),
    }
}
