//! Fuzz target `sse_stream`: see `fuzz/checks/worker.rs::sse_stream` and docs/fuzzing.md.
#![no_main]

#[path = "../checks/worker.rs"]
#[allow(dead_code)]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::sse_stream(data));
