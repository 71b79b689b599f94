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
    let raw = ok(&s, "subzero_info", json!({})).await;
    let info: p::Info = parse("subzero_info", &raw);
    assert_eq!(
        info.core_version.as_deref().map(String::as_str),
        Some(env!("CARGO_PKG_VERSION")),
        "{info:#?}"
    );
    assert_eq!(
        info.control_protocol_version.map(|v| v.get()),
        Some(1),
        "{info:#?}"
    );
    // How it was built: the line `subzero --version` prints, whole.
    let build = info
        .build
        .as_ref()
        .expect("info says how the broker was built");
    let version = crate::support::cli::subzero()
        .arg("--version")
        .output()
        .unwrap();
    let line = String::from_utf8_lossy(&version.stdout);
    assert!(
        line.contains(&build.commit.as_str()[..12]) && line.contains(build.target.as_str()),
        "{line} against {build:?}"
    );
    let refs = &info.credential_refs;
    assert_eq!(refs.len(), 1, "{info:#?}");
    assert_eq!(refs[0].name.as_str(), CRED);
    let origins: Option<Vec<&str>> = refs[0]
        .origins
        .as_ref()
        .map(|o| o.iter().map(|o| o.as_str()).collect());
    assert_eq!(origins, Some(vec![env.origin().as_str()]), "{info:#?}");
    assert!(refs[0].available, "{info:#?}");
    let text = raw.to_string();
    assert!(
        !text.contains(KEY) && !text.contains("SUBZERO_TEST_KEY"),
        "{text}"
    );
    let limits = &info.limits;
    assert_eq!(
        limits.queued_followups.map(|n| n.get()),
        Some(16),
        "{info:#?}"
    );
    assert_eq!(
        limits.event_retention_bytes.map(|n| n.get()),
        Some(1024 * 1024),
        "{info:#?}"
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
    let info = broker_info(&s).await;
    let limits = &info.limits;
    assert_eq!(
        limits.queued_followups.map(|n| n.get()),
        Some(3),
        "{info:#?}"
    );
    assert_eq!(
        limits.event_retention_bytes.map(|n| n.get()),
        Some(4096),
        "{info:#?}"
    );
    s.close().await.expect("close");
}
