//! The broker as a library, for Rust embedders: the same operations as the MCP tools,
//! plus `subscribe`, an async stream of a child's events (with explicit gap markers).

use std::sync::Arc;
use std::time::Duration;

use crate::support::mcp::*;
use futures::StreamExt;
use serde_json::{Value, json};
use subzero_core::{ChildId, EventSeq};
use subzero_runtime::broker::{Broker, BrokerOptions, Context};
use subzero_runtime::config::Config;
use subzero_runtime::secret_env::SecretEnv;
use subzero_testkit::Reply;

async fn open(env: &Env) -> Arc<Broker> {
    // In-process, the key comes from a file (this process's environment is shared).
    let key_file = env.dir.path().join("key");
    std::fs::write(&key_file, KEY).expect("key file");
    std::fs::write(
        env.config(),
        format!(
            "[credentials.{CRED}]\nfile = \"{}\"\norigins = [\"{}\"]\n",
            key_file.display(),
            env.origin()
        ),
    )
    .expect("config");
    // An embedder copies what the config names from its environment and leaves it as it is.
    let config = Config::load(&env.config()).expect("config loads");
    Broker::open(BrokerOptions {
        workspace: env.workspace(),
        state_dir: env.state_dir(),
        config_path: env.config(),
        worker_exe: env!("CARGO_BIN_EXE_subzero-worker").into(),
        worker_log: None,
        secrets: SecretEnv::capture(&config),
        host_adapters: Vec::new(),
        build: None,
    })
    .await
    .expect("broker opens")
}

#[tokio::test(flavor = "multi_thread")]
async fn subscribe_streams_a_childs_events_as_they_are_written() {
    let env = Env::new(vec![
        Reply::tool_call("c1", "ls", r#"{"path":"."}"#),
        Reply::text("listed"),
    ]);
    let broker = open(&env).await;
    let input: subzero_protocol::SpawnInput = serde_json::from_value(json!({
        "prompt": "list", "templateId": "researcher", "model": env.model()
    }))
    .expect("spawn input");
    let spawned = broker
        .execute(input, Context::default())
        .await
        .expect("spawn");
    let child = ChildId::parse(&spawned.child_id).expect("child id");
    let stream = broker.subscribe(child, EventSeq::START);
    futures::pin_mut!(stream);
    let mut kinds = Vec::new();
    let collected = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(event) = stream.next().await {
            let event: Value = event.expect("event");
            let kind = kind(&parse::<p::ChildEvent>("event", &event)).to_owned();
            kinds.push(kind.clone());
            if kind == "completed" {
                break;
            }
        }
    })
    .await;
    assert!(
        collected.is_ok(),
        "no completed event within 30 s: {kinds:?}"
    );
    assert_eq!(kinds.first().map(String::as_str), Some("run_started"));
    assert!(kinds.contains(&"tool".to_owned()), "{kinds:?}");
    broker.shutdown().await;
}
