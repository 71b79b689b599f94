//! The grants through `subzero mcp`: refusals at spawn, receipts, events, and as `nobody`.

use serde_json::json;
use subzero_protocol as p;
use subzero_testkit::Reply;

use super::*;
use crate::support::worker::tool_messages;

/// A broker whose config adds a `fetcher` (an allowlist of `127.0.0.2:port`) and an
/// `opened` template (`network = "open"`), optionally with namespaces turned off.
fn broker_env(script: Vec<Reply>, port: u16, off: bool) -> crate::support::mcp::Env {
    let env = crate::support::mcp::Env::new(script);
    let mut config = std::fs::read_to_string(env.config()).expect("config");
    config.push_str(&format!(
        "\n[templates.fetcher]\ndescription = \"Fetches\"\ninstructions = \"Fetch.\"\ntools = [\"bash\"]\nnetwork = [\"127.0.0.2:{port}\"]\n\
         \n[templates.opened]\ndescription = \"Open\"\ninstructions = \"Go.\"\ntools = [\"read\"]\nnetwork = \"open\"\n"
    ));
    if off {
        config.push_str("\n[containment]\nnetwork = \"off\"\n");
    }
    std::fs::write(env.config(), config).expect("config");
    env
}

fn network_support(info: &p::Info) -> &p::NetworkSupport {
    info.enforcement
        .containment
        .as_ref()
        .and_then(|c| c.network.as_ref())
        .unwrap_or_else(|| panic!("no network support: {info:#?}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_grant_other_than_open_is_refused_at_spawn_where_namespaces_are_off() {
    use crate::support::mcp::*;
    let env = broker_env(vec![Reply::text("done")], 9, true);
    let mut reaper = crate::support::faults::Reaper::new(env.dir.path());
    let s = env.broker("broker").await;
    reaper.broker(s.pid());

    let info = broker_info(&s).await;
    let support = network_support(&info);
    assert!(!support.namespace, "{support:#?}");
    assert!(
        support.summary.contains("network = \"off\""),
        "{support:#?}"
    );
    let coder = template_named(&info, "coder")
        .network
        .as_ref()
        .expect("coder's grant");
    assert_eq!(coder.mode, p::NetworkMode::None, "the built-in default");
    let fetcher = template_named(&info, "fetcher")
        .network
        .as_ref()
        .expect("grant");
    assert_eq!(fetcher.mode, p::NetworkMode::Allowlist);
    assert_eq!(
        fetcher
            .hosts
            .as_ref()
            .map(|h| h.iter().map(|h| h.to_string()).collect::<Vec<_>>()),
        Some(vec!["127.0.0.2:9".to_owned()])
    );

    for template in ["coder", "researcher", "fetcher"] {
        let code = err(
            &s,
            "subzero_spawn",
            json!({"prompt": "go", "templateId": template, "model": env.model()}),
        )
        .await;
        assert_eq!(code, "unsupported_grant", "{template}");
    }
    assert!(env.server.requests().is_empty(), "no model call was made");
    // A spawn cannot widen the template's grant: there is no argument for it.
    let code = err(
        &s,
        "subzero_spawn",
        json!({"prompt": "go", "templateId": "coder", "model": env.model(), "network": "open"}),
    )
    .await;
    assert_eq!(code, "invalid_request");

    let (child, _run) = spawn(&s, &env, "opened", "go").await;
    let snap = settled(&s, &child, std::time::Duration::from_secs(20)).await;
    let snap = get(&s, json!({"childId": snap.child_id, "containment": true})).await;
    let network = snap
        .containment
        .as_ref()
        .and_then(|c| c.network.as_ref())
        .expect("receipt");
    assert_eq!(network.mode, p::NetworkMode::Open, "{network:#?}");
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_connection_is_an_event_the_parent_sees_and_the_receipt_names_the_proxy() {
    use crate::support::mcp::*;
    let listed = Listener::start("127.0.0.2", "listed-answer");
    let other = Listener::start("127.0.0.2", "other");
    let command = format!(
        "curl -sS --max-time 5 http://127.0.0.2:{}/ ; echo; {} -c 'import urllib.request as u; u.urlopen(\"http://127.0.0.2:{}/?q=s3cr3t\", timeout=5)' 2>&1 | tail -1",
        listed.port(),
        python(),
        other.port()
    );
    let args = json!({ "command": command }).to_string();
    let env = broker_env(
        vec![
            Reply::tool_calls(&[("c1", "bash", args.as_str())]),
            Reply::text("done"),
        ],
        listed.port(),
        false,
    );
    let mut reaper = crate::support::faults::Reaper::new(env.dir.path());
    let s = env.broker("broker").await;
    reaper.broker(s.pid());
    assert!(network_support(&broker_info(&s).await).namespace);

    let (child, _run) = spawn(&s, &env, "fetcher", "fetch").await;
    settled(&s, &child, std::time::Duration::from_secs(30)).await;
    let snap = get(&s, json!({"childId": child, "containment": true})).await;
    let network = snap
        .containment
        .as_ref()
        .and_then(|c| c.network.as_ref())
        .expect("receipt");
    assert_eq!(network.mode, p::NetworkMode::Allowlist, "{network:#?}");
    assert!(network.enforced, "{network:#?}");
    assert!(network.summary.contains("admits 1 host"), "{network:#?}");
    let refused: Vec<(String, u64)> = snap
        .events
        .iter()
        .filter_map(|e| match e {
            p::ChildEvent::NetworkRefused { host, port, .. } => {
                Some((host.to_string(), port.get()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        refused,
        vec![("127.0.0.2".to_owned(), u64::from(other.port()))],
        "{snap:#?}"
    );
    assert_eq!(other.connections(), 0);
    let requests = env.server.requests();
    let results = tool_messages(&requests[1].json().expect("json"));
    if has_curl() {
        assert!(results[0].contains("listed-answer"), "{results:?}");
    }
    assert!(results[0].contains("403"), "{results:?}");
    let events = serde_json::to_string(&snap.events).expect("json");
    assert!(
        !events.contains("s3cr3t"),
        "no event carries the URL: {events}"
    );
    s.close().await.expect("close");
}

/// As `nobody` (as the test's own user when that is not root) the workers have no
/// `CAP_NET_ADMIN`: the tools' namespace is made in a user namespace of its own. In both
/// process modes — a user + PID namespace, and the subreaper fallback — a coder's `bash`
/// reaches nothing outside while its model is reached.
#[tokio::test(flavor = "multi_thread")]
async fn as_nobody_a_coders_bash_reaches_no_network_in_either_process_mode() {
    use crate::support::containment::{Case, NOBODY};
    use crate::support::mcp::*;
    let user = nix::unistd::geteuid().is_root().then_some(NOBODY);
    for subreaper in [false, true] {
        let outside = Listener::start("127.0.0.1", "outside");
        let command = format!(
            "echo \"uid=$(id -u)\"; (exec 3<>/dev/tcp/127.0.0.1/{}) 2>/dev/null; echo \"devtcp=$?\"; getent hosts example.com >/dev/null; echo \"dns=$?\"",
            outside.port()
        );
        let args = json!({ "command": command }).to_string();
        let env = Env::new(vec![
            Reply::tool_calls(&[("c1", "bash", args.as_str())]),
            Reply::text("done"),
        ]);
        if subreaper {
            let config = std::fs::read_to_string(env.config()).expect("config");
            std::fs::write(
                env.config(),
                format!("{config}\n[containment]\nprocess = \"subreaper\"\n"),
            )
            .expect("config");
        }
        let case = Case::with_user(env, user);
        let mut reaper = crate::support::faults::Reaper::new(case.env.dir.path());
        let s = case.broker("broker").await;
        reaper.broker(s.pid());
        let (child, _) = spawn(&s, &case.env, "coder", "probe").await;
        let snap = settled(&s, &child, std::time::Duration::from_secs(60)).await;
        assert_eq!(
            last_status(&snap),
            Some(p::TerminalRunStatus::Completed),
            "{snap:#?}"
        );
        let seen = tool_messages(&case.env.server.requests()[1].json().expect("json")).remove(0);
        let uid = user.map_or_else(|| nix::unistd::geteuid().as_raw(), |u| u.uid);
        assert!(seen.contains(&format!("uid={uid}")), "{seen}");
        assert!(seen.contains("devtcp=1"), "subreaper={subreaper}: {seen}");
        assert!(seen.contains("dns=2"), "subreaper={subreaper}: {seen}");
        assert_eq!(outside.connections(), 0, "subreaper={subreaper}");
        s.close().await.expect("close");
    }
}
