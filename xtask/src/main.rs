//! `cargo xtask codegen | check | bench | test | dist | soak`.

use std::process::ExitCode;

use xtask::workspace_root;

const USAGE: &str = "usage: cargo xtask <codegen|check|bench [--quick] [--only SECTION]|test [CARGO TEST ARGS…]|dist [--target T] [--profile P]|soak [--release] [SOAK ARGS…]>\n  codegen  regenerate generated/ from schema-src/\n  check    fail when generated/ is stale, exports disagree with schema-src/, or fixtures are judged differently\n  bench    install the peers (npm ci), build the release binaries, measure beside them, write docs/benchmarks.md;
           fails when a figure misses its goal (--quick: a smoke run; --only lean|processes|store|isolation|real-model|install|host; builds the archives with dist first)\n  test     install the pinned outside clients and hosts into the checkout (.venv/, npm ci), then run\n           every test (the broker's suite beside the rest) where a missing prerequisite fails instead of skipping;\n           with arguments, one cargo test ARGS
  dist     release archives of the three binaries for x86-64 and arm64 Linux (static, musl), checksums and
           the npm packages, in target/dist/<profile>/ ([--target x86_64|aarch64|all] [--profile release|dist-check])
  soak     the seeded fault soak: real brokers, random work and faults, invariants after each fault
           (--seed S [--steps N] replays; --minutes N runs fresh seeds; --help for the rest)";

fn main() -> ExitCode {
    let task = std::env::args().nth(1).unwrap_or_default();
    let result = match task.as_str() {
        "codegen" | "check" => generate(&task),
        "bench" => xtask::bench::bench(
            &workspace_root(),
            &std::env::args().skip(2).collect::<Vec<_>>(),
        ),
        "test" => xtask::test::test(
            &workspace_root(),
            &std::env::args().skip(2).collect::<Vec<_>>(),
        ),
        "dist" => xtask::dist::dist(
            &workspace_root(),
            &std::env::args().skip(2).collect::<Vec<_>>(),
        ),
        "soak" => xtask::soak::soak(
            &workspace_root(),
            &std::env::args().skip(2).collect::<Vec<_>>(),
        ),
        _ => Err(vec![USAGE.to_string()]),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(problems) => {
            for problem in problems {
                eprintln!("{problem}");
            }
            ExitCode::FAILURE
        }
    }
}

/// `codegen` or `check`: built with the `codegen` feature, runs it; otherwise runs
/// `cargo run -p xtask --features codegen` with the same arguments (the plain build, which
/// `cargo xtask test` needs, leaves out typify, syn and jsonschema).
#[cfg(feature = "codegen")]
fn generate(task: &str) -> Result<(), Vec<String>> {
    let root = workspace_root();
    if task == "codegen" {
        xtask::generate::codegen(&root)
    } else {
        xtask::generate::run_check(&root)
    }
}

#[cfg(not(feature = "codegen"))]
fn generate(task: &str) -> Result<(), Vec<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let status = std::process::Command::new(cargo)
        .current_dir(workspace_root())
        .args([
            "run",
            "--quiet",
            "--package",
            "xtask",
            "--features",
            "codegen",
            "--",
        ])
        .args(std::env::args().skip(1))
        .status()
        .map_err(|e| vec![format!("cannot run cargo: {e}")])?;
    if status.success() {
        Ok(())
    } else {
        Err(vec![format!("cargo xtask {task} failed ({status})")])
    }
}
