//! What a parent's model reads back: the containment receipt is in a snapshot only when
//! the call asks for it (it is decided once and does not change between calls), so a
//! settled `subzero_get` stays small.

use std::time::Duration;

use serde_json::json;
use subzero_testkit::Reply;

use crate::support::mcp::*;

#[tokio::test(flavor = "multi_thread")]
async fn a_get_carries_the_containment_receipt_only_when_asked() {
    let env = Env::new(vec![Reply::text("done")]);
    let s = env.broker("compact").await;
    let spawned: p::SpawnOutput = typed(
        &s,
        "subzero_spawn",
        json!({"prompt": "Say done.", "templateId": "researcher", "model": env.model()}),
    )
    .await;
    let child = spawned.child_id.to_string();
    let settled_reply = call(
        &s,
        "subzero_get",
        json!({"childId": child, "waitMs": 30000}),
    )
    .await;
    assert!(!settled_reply.is_error, "{}", settled_reply.text);
    assert!(
        settled_reply.structured.get("containment").is_none(),
        "a plain get repeats no receipt: {}",
        settled_reply.structured
    );
    assert!(
        !settled_reply.text.contains("containment"),
        "{}",
        settled_reply.text
    );
    let plain = settled(&s, &child, Duration::from_secs(30)).await;
    assert_eq!(plain.state, p::ChildState::Ready, "{plain:#?}");

    let asked = receipts(&s, &child).await;
    let containment = asked.containment.as_ref().expect("the receipt, when asked");
    assert!(containment.filesystem.is_some(), "{containment:#?}");
    assert!(containment.ownership.is_some(), "{containment:#?}");
    let asked_bytes = call(
        &s,
        "subzero_get",
        json!({"childId": child, "containment": true}),
    )
    .await
    .bytes;
    eprintln!(
        "a settled get: {} bytes; with the containment receipt: {asked_bytes} bytes",
        settled_reply.bytes
    );
    assert!(settled_reply.bytes < asked_bytes);
    s.close().await.expect("close");
}
