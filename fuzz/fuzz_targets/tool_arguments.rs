//! Fuzz target `tool_arguments`: see `fuzz/checks/protocol.rs::tool_arguments` and docs/fuzzing.md.
#![no_main]

#[path = "../checks/protocol.rs"]
#[allow(dead_code)]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::tool_arguments(data));
