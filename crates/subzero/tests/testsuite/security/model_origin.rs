//! The key and the prompt reach only the origin of `model.url` (which the broker checked
//! against the credential's `origins`): a redirect to any other origin ends the run with
//! `model_request_failed` naming that origin (never its path or query) before anything is
//! sent there; a same-origin redirect is followed, at most a few hops.
//! Real broker and worker, scripted model servers on loopback (each port its own origin).

use std::time::Duration;

use crate::support::faults::Reaper;
use crate::support::mcp::*;
use crate::support::worker::{Snapshot, snapshot_of};
use subzero_protocol::{ChildState, ErrorCode, TerminalRunStatus};
use subzero_testkit::{Reply, ScriptedServer};

/// `http://127.0.0.1:PORT`
fn origin_of(server: &ScriptedServer) -> String {
    server.base_url().trim_end_matches("/v1").to_owned()
}

/// Spawns a researcher on `env` (whose script starts with the redirect under test) and
/// returns the settled snapshot.
async fn run_once(env: &Env) -> Snapshot {
    let mut reaper = Reaper::new(env.dir.path());
    let s = env.broker("broker").await;
    reaper.broker(s.pid());
    let (child, _run) = spawn(&s, env, "researcher", "Summarize the README").await;
    let snap = snapshot_of(&settle(&s, &child, Duration::from_secs(30)).await);
    s.close().await.expect("close");
    snap
}

/// The run failed with `model_request_failed` naming `target` as the refused origin, and
/// without the redirect's path or query.
fn assert_refused_redirect_to(snap: &Snapshot, target: &str) {
    assert_eq!(snap.state, ChildState::Ready, "{snap:#}");
    assert_eq!(snap.last().status, TerminalRunStatus::Failed, "{snap:#}");
    let error = snap.last_error();
    assert_eq!(error.code, ErrorCode::ModelRequestFailed, "{snap:#}");
    let message = error.message.as_str();
    assert!(
        message.contains(&format!("redirected to another origin, {target};")),
        "the message must name the refused origin {target}: {message}"
    );
    assert!(
        !message.contains("token=") && !message.contains("/stolen"),
        "the message must not carry the redirect's path or query: {message}"
    );
    assert!(!message.contains(KEY), "{message}");
}

/// Nothing — no request, so neither the key nor the prompt — reached `server`.
fn assert_untouched(server: &ScriptedServer, name: &str) {
    let seen = server.requests();
    assert!(
        seen.is_empty(),
        "{name} received {} request(s); first: {:?}",
        seen.len(),
        seen.first().map(|r| (&r.method, &r.path, &r.headers))
    );
}

async fn a_cross_origin_chain_sends_nothing_past_the_allowed_origin(status: u16) {
    let third = ScriptedServer::start(vec![Reply::text("third origin")]).expect("server");
    let second = ScriptedServer::start(vec![Reply::redirect(
        status,
        &format!("{}/v1/chat/completions", origin_of(&third)),
    )])
    .expect("server");
    let target = origin_of(&second);
    let env = Env::new(vec![Reply::redirect(
        status,
        &format!("{target}/stolen/chat/completions?token=abc"),
    )]);

    let snap = run_once(&env).await;

    assert_refused_redirect_to(&snap, &target);
    assert_untouched(&second, "the second origin");
    assert_untouched(&third, "the third origin");
    assert_eq!(env.server.requests().len(), 1, "nothing is retried");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_two_hop_307_chain_never_reaches_the_second_origin() {
    a_cross_origin_chain_sends_nothing_past_the_allowed_origin(307).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_two_hop_302_chain_never_reaches_the_second_origin() {
    a_cross_origin_chain_sends_nothing_past_the_allowed_origin(302).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_308_to_another_origin_forwards_neither_key_nor_body() {
    a_cross_origin_chain_sends_nothing_past_the_allowed_origin(308).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_same_port_under_another_host_name_is_another_origin() {
    // `localhost` is not `127.0.0.1` (origins are compared as written), even though the
    // very same server answers there.
    let env = Env::new(Vec::new());
    let port = env.origin().rsplit(':').next().expect("port").to_owned();
    let target = format!("http://localhost:{port}");
    env.server.push(Reply::redirect(
        307,
        &format!("{target}/v1/chat/completions"),
    ));
    env.server.push(Reply::text("should not be asked"));
    let snap = run_once(&env).await;
    assert_refused_redirect_to(&snap, &target);
    assert_eq!(env.server.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_same_origin_redirect_is_followed_with_the_same_request() {
    let env = Env::new(vec![
        Reply::redirect(307, "/v2/chat/completions"),
        Reply::redirect(308, "/v3/chat/completions"),
        Reply::text("Redirected, then answered."),
    ]);
    let snap = run_once(&env).await;
    assert_eq!(snap.last().status, TerminalRunStatus::Completed, "{snap:#}");
    assert_eq!(*snap.last().preview, "Redirected, then answered.");
    let seen = env.server.requests();
    let paths: Vec<&str> = seen.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "/v1/chat/completions",
            "/v2/chat/completions",
            "/v3/chat/completions"
        ]
    );
    for request in &seen {
        assert_eq!(request.method, "POST");
        assert_eq!(request.body, seen[0].body, "each hop carries the same body");
        assert_eq!(
            request.header("authorization"),
            Some(format!("Bearer {KEY}").as_str())
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn same_origin_redirects_end_after_a_few_hops() {
    let script = (0..10)
        .map(|n| Reply::redirect(307, &format!("/loop{n}/chat/completions")))
        .collect();
    let env = Env::new(script);
    let snap = run_once(&env).await;
    assert_eq!(snap.last().status, TerminalRunStatus::Failed, "{snap:#}");
    assert_eq!(snap.last_error().code, ErrorCode::ModelRequestFailed);
    let message = snap.last_error().message.as_str();
    assert!(
        message.contains("redirected more than 3 times"),
        "{message}"
    );
    assert_eq!(
        env.server.requests().len(),
        4,
        "the first request and 3 hops"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_redirect_back_into_the_allowed_origin_after_leaving_it_is_still_refused() {
    // allowed → other → allowed: the first hop already leaves the origin, so the other
    // origin never sees the request and the way back is never taken.
    let other = ScriptedServer::start(Vec::new()).expect("server");
    let target = origin_of(&other);
    let env = Env::new(vec![
        Reply::redirect(307, &format!("{target}/v1/chat/completions")),
        Reply::text("the way back"),
    ]);
    other.push(Reply::redirect(
        307,
        &format!("{}/v1/chat/completions", env.origin()),
    ));
    let snap = run_once(&env).await;
    assert_refused_redirect_to(&snap, &target);
    assert_untouched(&other, "the other origin");
    assert_eq!(env.server.requests().len(), 1);
}
