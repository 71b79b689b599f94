//! Fuzz target `control_lines`: see `fuzz/checks/protocol.rs::control_line` and docs/fuzzing.md.
#![no_main]

#[path = "../checks/protocol.rs"]
#[allow(dead_code)]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::control_line(data));
