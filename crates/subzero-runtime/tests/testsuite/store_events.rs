//! The store's event log: retention by count and bytes, gaps reported explicitly, payload
//! bounds, and waits that wake on new events or time out.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use crate::testsuite::common::{Fixture, TOKEN};
use subzero_core::events::{EventBody, ToolState};
use subzero_core::{ErrorCode, EventSeq, RunId};
use subzero_runtime::store::StoreOptions;

fn tool(run_id: RunId, name: &str) -> EventBody {
    EventBody::Tool {
        run_id,
        name: name.to_owned(),
        state: ToolState::Started,
    }
}

fn text(run_id: RunId, bytes: usize) -> EventBody {
    EventBody::Text {
        run_id,
        text: "x".repeat(bytes),
        truncated: false,
    }
}

fn small_retention(count: u64, bytes: u64) -> StoreOptions {
    StoreOptions {
        event_retention: count,
        event_retention_bytes: bytes,
        ..StoreOptions::default()
    }
}

#[tokio::test]
async fn reading_below_the_oldest_retained_event_reports_a_gap() {
    let fx = Fixture::with_options(small_retention(5, 1 << 20));
    let (child, run) = fx.spawn_child().await; // seq 1
    for i in 0..12 {
        fx.store
            .append_event(child, TOKEN, tool(run, &format!("read{i}")))
            .await
            .unwrap(); // seq 2..=13
    }
    let page = fx
        .store
        .events(&fx.scope, child, EventSeq::START, 50)
        .await
        .unwrap();
    assert_eq!(page.oldest_cursor, EventSeq::new(8));
    let gap = page.gap.unwrap();
    assert_eq!(gap.requested, EventSeq::START);
    assert_eq!(gap.oldest, EventSeq::new(8));
    let seqs: Vec<u64> = page.events.iter().map(|e| e.seq.get()).collect();
    assert_eq!(seqs, vec![9, 10, 11, 12, 13]);
    assert_eq!(page.next_cursor, EventSeq::new(13));

    let page = fx
        .store
        .events(&fx.scope, child, EventSeq::new(8), 2)
        .await
        .unwrap();
    assert_eq!(page.gap, None);
    assert_eq!(page.next_cursor, EventSeq::new(10));
    let page = fx
        .store
        .events(&fx.scope, child, EventSeq::new(13), 2)
        .await
        .unwrap();
    assert!(page.events.is_empty());
    assert_eq!(page.next_cursor, EventSeq::new(13));
}

#[tokio::test]
async fn the_byte_cap_prunes_oldest_events() {
    let fx = Fixture::with_options(small_retention(1000, 200));
    let (child, run) = fx.spawn_child().await;
    for _ in 0..20 {
        fx.store
            .append_event(child, TOKEN, text(run, 40))
            .await
            .unwrap();
    }
    let page = fx
        .store
        .events(&fx.scope, child, EventSeq::START, 50)
        .await
        .unwrap();
    assert!(page.gap.is_some());
    assert!(page.events.len() <= 4, "{}", page.events.len());
    assert_eq!(page.events.last().unwrap().seq, EventSeq::new(21));
}

#[tokio::test]
async fn an_oversized_event_payload_is_refused_and_nothing_is_stored() {
    let fx = Fixture::new();
    let (child, run) = fx.spawn_child().await;
    let err = fx
        .store
        .append_event(child, TOKEN, text(run, 9000))
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::LimitExceeded);
    assert_eq!(fx.count("SELECT COUNT(*) FROM events"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gap_that_opens_while_a_reader_waits_is_reported() {
    let fx = Fixture::with_options(small_retention(3, 1 << 20));
    let (child, run) = fx.spawn_child().await; // seq 1
    let store = fx.store.clone();
    let scope = fx.scope.clone();
    let watchers = fx.store.commit_watchers();
    let reader = tokio::spawn(async move {
        store
            .wait_events(&scope, child, EventSeq::new(1), 10, Duration::from_secs(10))
            .await
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while fx.store.commit_watchers() == watchers {
        assert!(
            std::time::Instant::now() < deadline,
            "the reader never started waiting"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let burst = (0..6).map(|i| tool(run, &format!("grep{i}"))).collect();
    fx.store.append_events(child, TOKEN, burst).await.unwrap(); // seq 2..=7, keep 5..=7
    let page = reader.await.unwrap().unwrap();
    let gap = page.gap.expect("gap reported");
    assert_eq!(gap.requested, EventSeq::new(1));
    assert_eq!(gap.oldest, EventSeq::new(4));
    assert_eq!(page.events.first().unwrap().seq, EventSeq::new(5));
}

#[tokio::test]
async fn a_wait_times_out_without_events() {
    let fx = Fixture::new();
    let (child, _) = fx.spawn_child().await;
    let start = std::time::Instant::now();
    let page = fx
        .store
        .wait_events(
            &fx.scope,
            child,
            EventSeq::new(1),
            10,
            Duration::from_millis(250),
        )
        .await
        .unwrap();
    assert!(page.events.is_empty());
    assert!(start.elapsed() >= Duration::from_millis(250));
}
