//! The fuzz smoke run that fits CI: every committed seed in `fuzz/seeds/<target>/` goes
//! through the same check the cargo-fuzz target runs (`fuzz/checks/worker.rs`, included by
//! path), on stable and without libFuzzer. See docs/fuzzing.md.

#[path = "../../../../fuzz/checks/worker.rs"]
mod checks;

use std::path::PathBuf;

/// The seed files of `target`, sorted by name; a target without seeds is a mistake.
fn seeds(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/seeds")
        .join(target);
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|err| panic!("{}: {err}", dir.display()))
        .map(|entry| entry.expect("a readable seed directory").path())
        .collect();
    paths.sort();
    assert!(!paths.is_empty(), "no seeds in {}", dir.display());
    paths
        .into_iter()
        .map(|path| {
            let bytes =
                std::fs::read(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
            (path, bytes)
        })
        .collect()
}

fn replay(target: &str, check: fn(&[u8])) {
    for (path, bytes) in seeds(target) {
        eprintln!("replaying {}", path.display());
        check(&bytes);
    }
}

#[test]
fn transcript_seeds_pass_the_fuzz_check() {
    replay("transcript_lines", checks::transcript_lines);
}

#[test]
fn sse_stream_seeds_pass_the_fuzz_check() {
    replay("sse_stream", checks::sse_stream);
}

#[test]
fn stream_redactor_seeds_pass_the_fuzz_check() {
    replay("stream_redactor", checks::stream_redactor);
}
