//! Streamed Chat Completions answers in the shapes real servers document, for
//! [`crate::ScriptedServer`]: each function returns one [`Reply`] that replays, chunk for
//! chunk, what that server sends to a request with `stream: true` and
//! `stream_options.include_usage` (what the worker sends).
//!
//! Where each shape comes from (see also `docs/compatibility.md`):
//! - [`openai`]: the API reference's streaming chunk object (`role` and `refusal` in the first
//!   delta, `usage: null` in every chunk but the last, a last chunk with `choices: []`),
//!   and the typed HTTP 400 a reasoning model answers `max_tokens` with.
//! - [`vllm`]: vLLM's OpenAI-compatible server: reasoning as `reasoning_content` (up to 0.10)
//!   or `reasoning` (from 0.11), tool calls whose first delta names the function and whose
//!   arguments follow in pieces, `stop_reason` next to `finish_reason`.
//! - [`llama_cpp`]: `llama-server` (`tools/server/server-task.cpp`, `common/chat.cpp`): a first
//!   delta `{"role":"assistant","content":null}`, `reasoning_content` deltas, the finish chunk
//!   with an empty delta, usage only when asked (a separate chunk with `choices: []`) and
//!   `timings` on the last chunk.
//! - [`ollama`]: Ollama's `/v1/chat/completions` (`openai/openai.go`, `middleware/openai.go`):
//!   `role` and `content` in every delta, thinking as `reasoning`, tool calls whole in one
//!   chunk, `finish_reason` `tool_calls` (or `stop`, as older builds sent), and the usage
//!   chunk as a copy of the last chunk with `choices: []`.
//!
//! Token counts are `(prompt_tokens, completion_tokens)`.

use serde_json::{Value, json};

use crate::{Reply, Step};

/// Splits `text` into pieces of at most `size` chars (at least one piece).
fn pieces(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return vec![String::new()];
    }
    chars
        .chunks(size.max(1))
        .map(|c| c.iter().collect())
        .collect()
}

fn data(value: &Value) -> Step {
    Step::Data(value.to_string())
}

/// OpenAI's own Chat Completions stream (`api.openai.com`).
pub mod openai {
    use super::*;

    fn chunk(delta: Value, finish: Option<&str>) -> Step {
        data(&json!({
            "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
            "object": "chat.completion.chunk",
            "created": 1_741_570_283,
            "model": "o4-mini-2025-04-16",
            "service_tier": "default",
            "system_fingerprint": "fp_44709d6fcb",
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
            "usage": null,
            "obfuscation": "x7Qk"
        }))
    }

    fn usage((input, output): (u64, u64)) -> Step {
        data(&json!({
            "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
            "object": "chat.completion.chunk",
            "created": 1_741_570_283,
            "model": "o4-mini-2025-04-16",
            "service_tier": "default",
            "system_fingerprint": "fp_44709d6fcb",
            "choices": [],
            "usage": {
                "prompt_tokens": input, "completion_tokens": output,
                "total_tokens": input + output,
                "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": output / 2, "audio_tokens": 0,
                    "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}
            },
            "obfuscation": "p2"
        }))
    }

    /// A text answer: role delta, text in pieces, `finish_reason: stop`, usage, `[DONE]`.
    pub fn text(text: &str, tokens: (u64, u64)) -> Reply {
        let mut steps = vec![chunk(
            json!({"role": "assistant", "content": "", "refusal": null}),
            None,
        )];
        steps.extend(
            pieces(text, 4)
                .iter()
                .map(|p| chunk(json!({"content": p}), None)),
        );
        steps.extend([chunk(json!({}), Some("stop")), usage(tokens), Step::done()]);
        Reply::Sse(steps)
    }

    /// One tool call: the first delta carries `id`, `type`, the name and empty arguments;
    /// the arguments follow in pieces; `finish_reason: tool_calls`.
    pub fn tool_call(id: &str, name: &str, arguments: &str, tokens: (u64, u64)) -> Reply {
        let mut steps = vec![chunk(
            json!({"role": "assistant", "content": null, "refusal": null, "tool_calls": [{
                "index": 0, "id": id, "type": "function",
                "function": {"name": name, "arguments": ""}
            }]}),
            None,
        )];
        steps.extend(pieces(arguments, 3).iter().map(|p| {
            chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}),
                None,
            )
        }));
        steps.extend([
            chunk(json!({}), Some("tool_calls")),
            usage(tokens),
            Step::done(),
        ]);
        Reply::Sse(steps)
    }

    /// The body of the HTTP 400 a reasoning model answers a request carrying `max_tokens` with.
    pub const REFUSES_MAX_TOKENS: &str = r#"{
  "error": {
    "message": "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
    "type": "invalid_request_error",
    "param": "max_tokens",
    "code": "unsupported_parameter"
  }
}"#;

    /// That HTTP 400.
    pub fn refuses_max_tokens() -> Reply {
        Reply::status(400, REFUSES_MAX_TOKENS)
    }
}

/// vLLM's OpenAI-compatible server (`vllm serve`).
pub mod vllm {
    use super::*;

    fn chunk(choice: Value) -> Step {
        data(&json!({
            "id": "chatcmpl-5d7a4b0e8c2f4d3a9b1e6f7a8c9d0e1f",
            "object": "chat.completion.chunk",
            "created": 1_741_570_283,
            "model": "Qwen/Qwen3-8B",
            "choices": [choice]
        }))
    }

    fn delta(delta: Value) -> Step {
        chunk(json!({"index": 0, "delta": delta, "logprobs": null, "finish_reason": null}))
    }

    fn finish(reason: &str) -> Step {
        chunk(
            json!({"index": 0, "delta": {"content": ""}, "logprobs": null,
                     "finish_reason": reason, "stop_reason": null}),
        )
    }

    fn usage((input, output): (u64, u64)) -> Step {
        data(&json!({
            "id": "chatcmpl-5d7a4b0e8c2f4d3a9b1e6f7a8c9d0e1f",
            "object": "chat.completion.chunk",
            "created": 1_741_570_283,
            "model": "Qwen/Qwen3-8B",
            "choices": [],
            "usage": {"prompt_tokens": input, "total_tokens": input + output,
                      "completion_tokens": output}
        }))
    }

    /// Reasoning deltas in `field` (`reasoning_content` or `reasoning`), then the answer.
    pub fn reasoning_then_text(
        field: &str,
        reasoning: &str,
        text: &str,
        tokens: (u64, u64),
    ) -> Reply {
        let mut steps = vec![delta(json!({"role": "assistant", "content": ""}))];
        steps.extend(
            pieces(reasoning, 5)
                .iter()
                .map(|p| delta(json!({ field: p }))),
        );
        steps.extend(pieces(text, 4).iter().map(|p| delta(json!({"content": p}))));
        steps.extend([finish("stop"), usage(tokens), Step::done()]);
        Reply::Sse(steps)
    }

    /// Reasoning in `field`, then one tool call: a delta with the id and name, then the
    /// arguments in pieces; `finish_reason: tool_calls`.
    pub fn reasoning_then_tool_call(
        field: &str,
        reasoning: &str,
        (id, name, arguments): (&str, &str, &str),
        tokens: (u64, u64),
    ) -> Reply {
        let mut steps = vec![delta(json!({"role": "assistant", "content": ""}))];
        steps.extend(
            pieces(reasoning, 5)
                .iter()
                .map(|p| delta(json!({ field: p }))),
        );
        steps.push(delta(json!({"tool_calls": [{
            "id": id, "type": "function", "index": 0, "function": {"name": name}
        }]})));
        steps.extend(
            pieces(arguments, 4).iter().map(|p| {
                delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}))
            }),
        );
        steps.extend([finish("tool_calls"), usage(tokens), Step::done()]);
        Reply::Sse(steps)
    }
}

/// llama.cpp's `llama-server`.
pub mod llama_cpp {
    use super::*;

    fn base(choices: Value) -> Value {
        json!({
            "choices": choices,
            "created": 1_757_141_666,
            "id": "chatcmpl-ecQULm0WqPrftUqjPZO1CFYeDjGZNbDu",
            "model": "gpt-oss-20b",
            "system_fingerprint": "b6097-9515c613",
            "object": "chat.completion.chunk"
        })
    }

    fn delta(delta: Value) -> Step {
        data(&base(
            json!([{"finish_reason": null, "index": 0, "delta": delta}]),
        ))
    }

    fn timings(output: u64) -> Value {
        json!({
            "cache_n": 236, "prompt_n": 1, "prompt_ms": 30.958, "prompt_per_token_ms": 30.958,
            "prompt_per_second": 32.301_828_283_480_845, "predicted_n": output,
            "predicted_ms": 661.064, "predicted_per_token_ms": 18.887_542_857_142_858,
            "predicted_per_second": 52.944_949_354_374_16
        })
    }

    /// The end of a stream: the finish chunk (empty delta), then — when `tokens` is given,
    /// i.e. the request asked with `include_usage` — the usage chunk with `choices: []`;
    /// `timings` ride on whichever comes last.
    fn end(reason: &str, tokens: Option<(u64, u64)>) -> Vec<Step> {
        let mut finish = base(json!([{"finish_reason": reason, "index": 0, "delta": {}}]));
        match tokens {
            Some((input, output)) => {
                let mut usage = base(json!([]));
                usage["usage"] = json!({"completion_tokens": output, "prompt_tokens": input,
                                        "total_tokens": input + output});
                usage["timings"] = timings(output);
                vec![data(&finish), data(&usage), Step::done()]
            }
            None => {
                finish["timings"] = timings(0);
                vec![data(&finish), Step::done()]
            }
        }
    }

    /// A text answer; `tokens: None` is a stream without a usage chunk.
    pub fn text(text: &str, tokens: Option<(u64, u64)>) -> Reply {
        let mut steps = vec![delta(json!({"role": "assistant", "content": null}))];
        steps.extend(pieces(text, 4).iter().map(|p| delta(json!({"content": p}))));
        steps.extend(end("stop", tokens));
        Reply::Sse(steps)
    }

    /// `reasoning_content` deltas (the server's default `--reasoning-format`), then the answer.
    pub fn reasoning_then_text(reasoning: &str, text: &str, tokens: Option<(u64, u64)>) -> Reply {
        let mut steps = vec![delta(json!({"role": "assistant", "content": null}))];
        steps.extend(
            pieces(reasoning, 5)
                .iter()
                .map(|p| delta(json!({"reasoning_content": p}))),
        );
        steps.extend(pieces(text, 4).iter().map(|p| delta(json!({"content": p}))));
        steps.extend(end("stop", tokens));
        Reply::Sse(steps)
    }

    /// Reasoning, then one tool call: a header delta (index, id, name, empty arguments), then
    /// argument deltas carrying only `index` and `function.arguments`.
    pub fn reasoning_then_tool_call(
        reasoning: &str,
        (id, name, arguments): (&str, &str, &str),
        tokens: Option<(u64, u64)>,
    ) -> Reply {
        let mut steps = vec![delta(json!({"role": "assistant", "content": null}))];
        steps.extend(
            pieces(reasoning, 5)
                .iter()
                .map(|p| delta(json!({"reasoning_content": p}))),
        );
        steps.push(delta(json!({"tool_calls": [{
            "index": 0, "id": id, "type": "function",
            "function": {"name": name, "arguments": ""}
        }]})));
        steps.extend(
            pieces(arguments, 4).iter().map(|p| {
                delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}))
            }),
        );
        steps.extend(end("tool_calls", tokens));
        Reply::Sse(steps)
    }
}

/// Ollama's OpenAI-compatible endpoint (`http://localhost:11434/v1`).
pub mod ollama {
    use super::*;

    fn chunk(delta: Value, finish: Option<&str>) -> Value {
        json!({
            "id": "chatcmpl-417",
            "object": "chat.completion.chunk",
            "created": 1_741_570_283,
            "model": "qwen3:8b",
            "system_fingerprint": "fp_ollama",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
        })
    }

    /// The last chunk (empty content, `finish_reason`), its copy with `choices: []` and the
    /// usage (`include_usage`), `[DONE]`.
    fn end(reason: &str, (input, output): (u64, u64)) -> Vec<Step> {
        let last = chunk(json!({"role": "assistant", "content": ""}), Some(reason));
        let mut usage = last.clone();
        usage["choices"] = json!([]);
        usage["usage"] = json!({"prompt_tokens": input, "completion_tokens": output,
                                "total_tokens": input + output});
        vec![data(&last), data(&usage), Step::done()]
    }

    /// Optional thinking (`reasoning`, with `content: ""` next to it), then the answer.
    pub fn text(thinking: Option<&str>, text: &str, tokens: (u64, u64)) -> Reply {
        let mut steps = Vec::new();
        if let Some(thinking) = thinking {
            steps.extend(pieces(thinking, 5).iter().map(|p| {
                data(&chunk(
                    json!({"role": "assistant", "content": "", "reasoning": p}),
                    None,
                ))
            }));
        }
        steps.extend(
            pieces(text, 4)
                .iter()
                .map(|p| data(&chunk(json!({"role": "assistant", "content": p}), None))),
        );
        steps.extend(end("stop", tokens));
        Reply::Sse(steps)
    }

    /// Tool calls `(id, name, arguments)` delivered whole in one chunk, then the last chunk
    /// with `finish` (`tool_calls`, or `stop` as builds before the fix sent).
    pub fn tool_calls(calls: &[(&str, &str, &str)], finish: &str, tokens: (u64, u64)) -> Reply {
        let calls: Vec<Value> = calls
            .iter()
            .enumerate()
            .map(|(index, (id, name, arguments))| {
                json!({"id": id, "index": index, "type": "function",
                       "function": {"name": name, "arguments": arguments}})
            })
            .collect();
        let mut steps = vec![data(&chunk(
            json!({"role": "assistant", "content": "", "tool_calls": calls}),
            None,
        ))];
        steps.extend(end(finish, tokens));
        Reply::Sse(steps)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payloads(reply: &Reply) -> Vec<Value> {
        let Reply::Sse(steps) = reply else {
            panic!("not a stream: {reply:?}");
        };
        steps
            .iter()
            .filter_map(|s| match s {
                Step::Data(d) if d != "[DONE]" => serde_json::from_str(d).ok(),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn the_usage_chunk_comes_last_with_no_choices() {
        for reply in [
            openai::text("hi", (3, 2)),
            vllm::reasoning_then_text("reasoning", "r", "hi", (3, 2)),
            llama_cpp::text("hi", Some((3, 2))),
            ollama::text(None, "hi", (3, 2)),
        ] {
            let all = payloads(&reply);
            let last = all.last().expect("chunks");
            assert_eq!(last["choices"], json!([]), "{last}");
            assert_eq!(last["usage"]["prompt_tokens"], 3, "{last}");
        }
    }

    #[test]
    fn llama_cpp_without_usage_puts_timings_on_the_finish_chunk() {
        let all = payloads(&llama_cpp::text("hi", None));
        let last = all.last().expect("chunks");
        assert_eq!(last["choices"][0]["finish_reason"], "stop");
        assert!(
            last.get("usage").is_none() && last["timings"].is_object(),
            "{last}"
        );
        assert_eq!(all[0]["choices"][0]["delta"]["content"], Value::Null);
    }

    #[test]
    fn ollama_delivers_tool_calls_whole_in_one_chunk() {
        let all = payloads(&ollama::tool_calls(
            &[("call_1", "ls", "{}")],
            "tool_calls",
            (1, 1),
        ));
        let call = &all[0]["choices"][0]["delta"]["tool_calls"][0];
        assert_eq!(call["function"]["arguments"], "{}");
        assert_eq!(all[1]["choices"][0]["finish_reason"], "tool_calls");
    }
}
