//! Fuzz target `stream_redactor`: see `fuzz/checks/worker.rs::stream_redactor` and docs/fuzzing.md.
#![no_main]

#[path = "../checks/worker.rs"]
#[allow(dead_code)]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::stream_redactor(data));
