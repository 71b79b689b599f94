//! `subzero_info` says what a caller needs to use this broker: the core and control
//! protocol versions, each credential reference with the origins it may be sent to (never
//! its key or where the key is read from), and the queue and retention bounds.

use crate::support::faults::Reaper;
use crate::support::mcp::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn info_names_versions_credential_origins_and_bounds() {
    let env = Env::new(Vec::new());
    let mut reaper = Reaper::new(env.dir.path());
    let s = env.broker("broker").await;
    reaper.broker(s.pid());
    let info = ok(&s, "subzero_info", json!({})).await;
    assert_eq!(info["coreVersion"], env!("CARGO_PKG_VERSION"), "{info:#}");
    assert_eq!(info["controlProtocolVersion"], 1, "{info:#}");
    let refs = info["credentialRefs"].as_array().expect("credentialRefs");
    assert_eq!(refs.len(), 1, "{info:#}");
    assert_eq!(refs[0]["name"], CRED);
    assert_eq!(refs[0]["origins"], json!([env.origin()]), "{info:#}");
    assert_eq!(refs[0]["available"], true);
    let text = info.to_string();
    assert!(
        !text.contains(KEY) && !text.contains("SUBZERO_TEST_KEY"),
        "{text}"
    );
    assert_eq!(info["limits"]["queuedFollowups"], 16, "{info:#}");
    assert_eq!(
        info["limits"]["eventRetentionBytes"],
        1024 * 1024,
        "{info:#}"
    );
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn info_reports_the_configured_queue_and_retention_bounds() {
    let env = Env::new(Vec::new());
    let mut config = std::fs::read_to_string(env.config()).expect("config");
    config.push_str("\n[limits]\nqueued_followups = 3\nevent_retention_bytes = 4096\n");
    std::fs::write(env.config(), config).expect("config");
    let mut reaper = Reaper::new(env.dir.path());
    let s = env.broker("broker").await;
    reaper.broker(s.pid());
    let info = ok(&s, "subzero_info", json!({})).await;
    assert_eq!(info["limits"]["queuedFollowups"], 3, "{info:#}");
    assert_eq!(info["limits"]["eventRetentionBytes"], 4096, "{info:#}");
    s.close().await.expect("close");
}
