//! Where the wire said less (or other) than the docs promise, with the real broker and
//! workers over MCP: `budget: null` is refused, `subzero_info.budgets.maxima` names every
//! budget's maximum, and a failed run's `lastRun.error.details` carries what its failure
//! reported — the HTTP `status`, the refused `redirect` origin, the `limit` name.

use std::time::Duration;

use crate::support::mcp::*;
use serde_json::{Value, json};
use subzero_testkit::{Reply, Step};

/// Spawn a researcher and wait for its first run to end; its snapshot.
async fn first_run(env: &Env) -> p::ChildSnapshot {
    let s = env.broker("broker").await;
    let (child, _run) = spawn(&s, env, "researcher", "Answer").await;
    let snap = settled(&s, &child, Duration::from_secs(60)).await;
    s.close().await.expect("the broker closes");
    snap
}

#[tokio::test(flavor = "multi_thread")]
async fn a_null_budget_is_invalid_request_and_creates_nothing() {
    let env = Env::new(vec![Reply::text("never asked")]);
    let s = env.broker("broker").await;
    for (budget, field) in [
        (Value::Null, "budget"),
        (json!({"maxTurns": null}), "budget.maxTurns"),
        (
            json!({"maxTurns": 3, "tokenBudget": null}),
            "budget.tokenBudget",
        ),
    ] {
        let reply = call(
            &s,
            "subzero_spawn",
            json!({"prompt": "hi", "templateId": "researcher", "model": env.model(), "budget": budget}),
        )
        .await;
        assert!(
            reply.is_error,
            "budget {budget} was accepted: {}",
            reply.text
        );
        let body: p::ErrorBody = parse(
            "the error body",
            &serde_json::from_str(&reply.text).expect("error body"),
        );
        assert_eq!(body.code, p::ErrorCode::InvalidRequest, "{body:#?}");
        assert_eq!(details(&body).field.as_deref(), Some(field), "{body:#?}");
    }
    let listed = list(&s, json!({})).await;
    assert!(
        listed.children.is_empty(),
        "nothing was created: {listed:#?}"
    );
    assert!(env.server.requests().is_empty(), "no model was asked");
    s.close().await.expect("the broker closes");
}

#[tokio::test(flavor = "multi_thread")]
async fn info_names_every_budgets_maximum_including_the_token_budgets() {
    let env = Env::new(Vec::new());
    let s = env.broker("broker").await;
    let info = broker_info(&s).await;
    let maxima = &info.budgets.maxima;
    for (budget, named) in [
        ("maxTurns", maxima.max_turns.is_some()),
        ("deadlineMs", maxima.deadline_ms.is_some()),
        ("toolTimeoutMs", maxima.tool_timeout_ms.is_some()),
        ("maxOutputTokens", maxima.max_output_tokens.is_some()),
        ("tokenBudget", maxima.token_budget.is_some()),
    ] {
        assert!(named, "maxima lacks {budget}: {maxima:#?}");
    }
    // None is configured: the bound a spawn actually meets is the protocol's.
    assert_eq!(
        maxima.token_budget.as_ref().map(|t| t.get()),
        Some(2_000_000_000u64),
        "{maxima:#?}"
    );
    // And it is the real bound: one more is refused, that much is accepted.
    let spawn_with = |tokens: u64| {
        json!({"prompt": "hi", "templateId": "researcher", "model": env.model(),
               "budget": {"tokenBudget": tokens}})
    };
    let code = err(&s, "subzero_spawn", spawn_with(2_000_000_001)).await;
    assert_eq!(code, "invalid_request");
    env.server.push(Reply::text("fine"));
    ok(&s, "subzero_spawn", spawn_with(2_000_000_000)).await;
    s.close().await.expect("the broker closes");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_http_failure_shows_its_status_in_last_run_error_details() {
    let env = Env::new(vec![Reply::status(
        503,
        r#"{"error":{"message":"overloaded"}}"#,
    )]);
    let snap = first_run(&env).await;
    let error = last_error(&snap);
    assert_eq!(error.code, p::ErrorCode::ModelRequestFailed, "{snap:#?}");
    let details = details(error);
    assert_eq!(details.status, Some(503), "{snap:#?}");
    assert!(
        details.excerpt.is_some_and(|e| e.contains("overloaded")),
        "{snap:#?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_redirect_names_the_origin_in_last_run_error_details() {
    let env = Env::new(Vec::new());
    let port = env.origin().rsplit(':').next().expect("port").to_owned();
    let target = format!("http://localhost:{port}");
    env.server.push(Reply::redirect(
        307,
        &format!("{target}/v1/chat/completions?token=abc"),
    ));
    let snap = first_run(&env).await;
    let error = last_error(&snap);
    assert_eq!(error.code, p::ErrorCode::ModelRequestFailed, "{snap:#?}");
    let details = details(error);
    assert_eq!(
        details.redirect.as_deref(),
        Some(target.as_str()),
        "{snap:#?}"
    );
    assert_eq!(details.status, None, "{snap:#?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_limit_names_the_limit_in_last_run_error_details() {
    let chunk = json!({"choices": [{"index": 0, "delta": {"content": "y".repeat(4096)}, "finish_reason": null}]})
        .to_string();
    let env = Env::new(vec![Reply::Sse(vec![
        Step::repeat_data(&chunk, 64),
        Step::finish("stop"),
        Step::done(),
    ])]);
    std::fs::write(
        env.config(),
        format!(
            "[credentials.{CRED}]\nenv = \"SUBZERO_TEST_KEY\"\norigins = [\"{}\"]\n\n[limits]\nmodel_response_bytes = 65536\n",
            env.origin()
        ),
    )
    .expect("config");
    let snap = first_run(&env).await;
    let error = last_error(&snap);
    assert_eq!(error.code, p::ErrorCode::LimitExceeded, "{snap:#?}");
    assert_eq!(
        details(error).limit.as_deref(),
        Some("model_response_bytes"),
        "{snap:#?}"
    );
}
