//! Bindings generated from the contract by tools nobody here wrote, exactly as
//! docs/contract.md ("Generated bindings") tells an implementer to:
//!
//! - TypeScript: json-schema-to-typescript over `generated/bundle/` (every module exported
//!   together through one index), then `tsc --strict`; the shared enums are named types,
//!   a bounded array is an array (not a union of tuples), and no type is declared twice.
//! - Python: datamodel-code-generator over the same bundles into pydantic v2 models; every
//!   valid fixture round-trips in strict mode, every "from the future" fixture is read by
//!   the consumer models and refused by the normative ones, and the tagged unions are
//!   discriminated.
//!
//! The tools are pinned: json-schema-to-typescript and typescript in
//! `tests/clients/ts/package-lock.json`, datamodel-code-generator and pydantic in
//! `cargo xtask test`'s venv. Without them a plain `cargo test` says so loudly and skips; in
//! strict mode (`cargo xtask test`, CI) a missing tool fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support;
use serde_json::Value;

/// The workspace root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `tests/clients/ts/`.
fn ts_project() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/ts")
}

/// The group of the TypeScript bindings case.
const TYPESCRIPT: &str = "contract_bindings:typescript";
/// The group of the pydantic bindings case.
const PYDANTIC: &str = "contract_bindings:pydantic";

fn run(command: &mut Command, what: &str) -> Output {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("{what} did not start: {e}"));
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// The last line of stdout as JSON.
fn report(output: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("no JSON report ({e}):\n{stdout}"))
}

/// The TS project with its pinned packages installed, or `None` without Node (outside strict
/// mode).
fn node_ready() -> Option<PathBuf> {
    if !support::prereq::node_available() {
        support::prereq::missing(TYPESCRIPT, "Node 20 and npm", "install Node 20");
        return None;
    }
    support::prereq::present(TYPESCRIPT);
    let dir = ts_project();
    support::prereq::npm_installed(
        &dir,
        &[
            "json-schema-to-typescript/package.json",
            "typescript/bin/tsc",
        ],
    );
    Some(dir)
}

#[test]
fn typescript_declarations_of_every_module_type_check_under_strict() {
    let Some(dir) = node_ready() else {
        return;
    };
    let out = tempfile::tempdir().expect("temp dir");
    let ts = out.path().join("ts");
    let generated = run(
        Command::new("node")
            .arg(dir.join("bindings.mjs"))
            .arg(root().join("generated/bundle"))
            .arg(&ts),
        "node bindings.mjs (json-schema-to-typescript)",
    );
    let report = report(&generated);
    let names: Vec<&str> = report["names"]
        .as_array()
        .expect("names")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    // Shared enums and every root type are named once; nothing is declared as `X1`, `X2`.
    for name in [
        "ChildState",
        "RunStatus",
        "TerminalRunStatus",
        "Phase",
        "ErrorCode",
        "WaitedReason",
        "ChildEvent",
        "WorkerEvent",
        "ChildSnapshot",
        "Info",
        "SpawnInput",
        "StopOutput",
    ] {
        assert_eq!(
            names.iter().filter(|n| **n == name).count(),
            1,
            "{name} in {names:?}"
        );
    }
    let numbered: Vec<&&str> = names
        .iter()
        .filter(|n| n.ends_with(|c: char| c.is_ascii_digit()) && **n != "SubzeroProtocolV1")
        .collect();
    assert!(numbered.is_empty(), "types declared twice: {numbered:?}");
    let normative = std::fs::read_to_string(ts.join("subzero-v1.ts")).expect("generated module");
    assert!(
        normative.contains("protocols: ModelApi[]"),
        "the 1..8 `protocols` array is not a plain array"
    );
    // A program using the named types, compiled with everything else under --strict.
    std::fs::write(
        ts.join("use.ts"),
        "import type { ChildEvent, ChildSnapshot, ErrorBody, RunStatus, consumer } from \"./index.js\";\n\
         export function lastStatus(s: ChildSnapshot): RunStatus | null { return s.lastRun ? s.lastRun.status : null; }\n\
         export function kind(e: ChildEvent): string { return e.type === \"completed\" ? e.artifactId : e.type; }\n\
         export function code(e: ErrorBody | consumer.ErrorBody): string { return e.code; }\n",
    )
    .expect("use.ts");
    run(
        Command::new("node")
            .arg(dir.join("node_modules/typescript/bin/tsc"))
            .args([
                "--noEmit",
                "--strict",
                "--skipLibCheck",
                "--lib",
                "es2022",
                "--module",
                "nodenext",
                "--moduleResolution",
                "nodenext",
            ])
            .arg(ts.join("index.ts"))
            .arg(ts.join("use.ts")),
        "tsc --strict",
    );
}

/// Whether the test Python has datamodel-code-generator and pydantic 2 (else the test is
/// skipped, or fails in strict mode).
fn python_ready() -> bool {
    if support::prereq::python_runs(
        "import datamodel_code_generator, pydantic; assert pydantic.VERSION.startswith('2')",
    ) {
        support::prereq::present(PYDANTIC);
        return true;
    }
    support::prereq::missing(
        PYDANTIC,
        "datamodel-code-generator with pydantic 2",
        "python3 -m pip install 'datamodel-code-generator==0.89.0' 'pydantic==2.13.4'",
    );
    false
}

#[test]
fn pydantic_models_round_trip_every_fixture_in_strict_mode() {
    if !python_ready() {
        return;
    }
    let out = tempfile::tempdir().expect("temp dir");
    for stem in ["subzero-v1", "subzero-v1-consumer"] {
        let module = out.path().join(format!("{}.py", stem.replace('-', "_")));
        run(
            Command::new(support::prereq::python())
                .args(["-m", "datamodel_code_generator"])
                .arg("--input")
                .arg(root().join(format!("generated/bundle/{stem}.schema.json")))
                .arg("--output")
                .arg(&module)
                .args([
                    "--input-file-type",
                    "jsonschema",
                    "--output-model-type",
                    "pydantic_v2.BaseModel",
                    "--target-python-version",
                    "3.11",
                    "--use-title-as-name",
                    "--use-schema-description",
                    "--use-field-description",
                    "--disable-timestamp",
                    "--formatters",
                    "builtin",
                ]),
            "datamodel-codegen",
        );
    }
    let checked = run(
        Command::new(support::prereq::python())
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/python_bindings.py"))
            .arg(out.path())
            .arg(root())
            .env("PYTHONDONTWRITEBYTECODE", "1"),
        "python_bindings.py",
    );
    let report = report(&checked);
    assert!(report["valid"].as_u64() > Some(50), "{report}");
    assert!(report["future"].as_u64() >= Some(3), "{report}");
}
