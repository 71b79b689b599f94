//! The stable smoke run's side of the fuzz targets: every committed seed of a target through
//! its check. Included by path in `crates/subzero-protocol` and `crates/subzero-worker`'s
//! suites (`tests/testsuite/fuzz_smoke.rs`), whose manifest directories both sit two levels
//! below the workspace root.

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

/// Every seed of `target` through `check`, each named as it goes.
pub fn replay(target: &str, check: fn(&[u8])) {
    for (path, bytes) in seeds(target) {
        eprintln!("replaying {}", path.display());
        check(&bytes);
    }
}
