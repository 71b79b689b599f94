//! The contract tests: `generated/` is fresh, the exported schemas agree with
//! `schema-src/`, every fixture is judged the same by both and round-trips through the
//! Rust types, and the error codes equal `subzero_core::ErrorCode::ALL`.

use std::collections::BTreeSet;
use std::io::Write;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use subzero_protocol::roots::RootVisitor;
use subzero_protocol::{ErrorCode, Validate};
use xtask::check::canonical;

#[test]
fn generated_code_and_schemas_are_fresh_and_agree_with_schema_src() {
    let exported = subzero_protocol::export::exported_schemas();
    match xtask::check::check(&xtask::workspace_root(), &exported) {
        Ok(summary) => report(&format!(
            "contract: {} schema files, {} exports agree with schema-src, checked {} valid and {} invalid fixtures",
            summary.schemas, summary.compared, summary.fixtures.valid, summary.fixtures.invalid
        )),
        Err(problems) => panic!("contract check failed:\n{}", problems.join("\n")),
    }
}

/// Runs each fixture through the Rust type of its schema.
struct RoundTrip {
    fixtures: Vec<xtask::fixtures::Fixture>,
    valid: usize,
    invalid: usize,
    problems: Vec<String>,
}

impl RootVisitor for RoundTrip {
    fn visit<T>(&mut self, stem: &'static str)
    where
        T: schemars::JsonSchema + Serialize + DeserializeOwned + Validate + 'static,
    {
        for fixture in self.fixtures.iter().filter(|f| f.stem == stem) {
            let parsed = serde_json::from_value::<T>(fixture.doc.clone())
                .map_err(|e| e.to_string())
                .and_then(|v| v.validate().map(|()| v).map_err(|e| e.to_string()));
            match (fixture.valid, parsed) {
                (true, Ok(value)) => {
                    self.valid += 1;
                    let back = serde_json::to_value(&value).unwrap_or(Value::Null);
                    if canonical(&back) != canonical(&fixture.doc) {
                        self.problems.push(format!(
                            "{}: round trip changed the document:\n  in:  {}\n  out: {}",
                            fixture.rel_path, fixture.doc, back
                        ));
                    }
                }
                (true, Err(e)) => self.problems.push(format!(
                    "{}: rejected by the Rust types: {e}",
                    fixture.rel_path
                )),
                (false, Ok(_)) => self
                    .problems
                    .push(format!("{}: accepted by the Rust types", fixture.rel_path)),
                (false, Err(_)) => self.invalid += 1,
            }
        }
    }
}

#[test]
fn every_fixture_round_trips_or_is_rejected_by_the_rust_types() {
    let fixtures = match xtask::fixtures::load(&xtask::workspace_root()) {
        Ok(f) => f,
        Err(e) => panic!("{e}"),
    };
    let mut run = RoundTrip {
        fixtures,
        valid: 0,
        invalid: 0,
        problems: Vec::new(),
    };
    subzero_protocol::visit_roots(&mut run);
    report(&format!(
        "rust types: round-tripped {} valid and rejected {} invalid fixtures",
        run.valid, run.invalid
    ));
    assert!(run.problems.is_empty(), "{}", run.problems.join("\n"));
    assert!(run.valid > 0 && run.invalid > 0);
}

#[test]
fn error_codes_equal_the_core_error_codes() {
    let core: BTreeSet<String> = subzero_core::ErrorCode::ALL
        .iter()
        .map(|c| c.as_str().to_string())
        .collect();
    let schema: BTreeSet<String> = schema_error_codes();
    assert_eq!(
        core, schema,
        "the error code table (schema-src/v1/error.schema.json) and subzero_core::ErrorCode::ALL differ"
    );
    // The generated enum speaks the same spellings.
    for code in &core {
        let parsed: Result<ErrorCode, _> = serde_json::from_value(Value::String(code.clone()));
        assert!(parsed.is_ok(), "generated ErrorCode cannot read {code}");
    }
}

fn schema_error_codes() -> BTreeSet<String> {
    let set = match xtask::source::SourceSet::load(&xtask::workspace_root()) {
        Ok(set) => set,
        Err(e) => panic!("{e}"),
    };
    match xtask::error_table::rows(&set) {
        Ok(rows) => rows.into_iter().map(|r| r.code).collect(),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn validate_names_the_field_that_breaks_a_bound() {
    let input: subzero_protocol::GetInput = match serde_json::from_value(serde_json::json!({
        "childId": "ch_01JDZ8Q4W3V9K2M5N7P8R0S1T0",
        "waitMs": 30001
    })) {
        Ok(v) => v,
        Err(e) => panic!("{e}"),
    };
    let err = match input.validate() {
        Err(e) => e,
        Ok(()) => panic!("waitMs 30001 was accepted"),
    };
    assert_eq!(err.field(), "waitMs");
    assert_eq!(err.code(), "invalid_request");
    let body = err.to_error_body();
    assert_eq!(body.code, ErrorCode::InvalidRequest);
}

/// Counts go straight to stderr (not through the test harness's capture) so that every
/// `cargo test` run shows them.
fn report(line: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

#[test]
fn byte_bounds_are_checked_where_the_schema_can_only_count_characters() {
    // 1000 three-byte characters: within maxLength 2048 (characters), over 2048 bytes.
    let preview = "€".repeat(1000);
    let doc = serde_json::json!({
        "type": "completed", "seq": 5, "at": "2026-11-29T20:05:36.123Z",
        "childId": "ch_01JDZ8Q4W3V9K2M5N7P8R0S1T0", "runId": "run_01JDZ8Q4W3V9K2M5N7P8R0S1T0",
        "artifactId": "art_01JDZ8Q4W3V9K2M5N7P8R0S1T0", "preview": preview, "previewTruncated": true
    });
    let event: subzero_protocol::ChildEvent = match serde_json::from_value(doc) {
        Ok(e) => e,
        Err(e) => panic!("{e}"),
    };
    let err = match event.validate() {
        Err(e) => e,
        Ok(()) => panic!("a 3000-byte preview was accepted"),
    };
    assert_eq!(err.field(), "preview");
}

#[test]
fn the_api_key_never_appears_in_debug_output() {
    let line = std::fs::read_to_string(
        xtask::workspace_root().join("fixtures/v1/control-broker-to-worker/valid/start-run.json"),
    )
    .unwrap_or_default();
    let message: subzero_protocol::BrokerMessage = match serde_json::from_str(&line) {
        Ok(m) => m,
        Err(e) => panic!("{e}"),
    };
    let shown = format!("{message:?}");
    assert!(!shown.contains("sk-test-not-a-real-key"), "{shown}");
}
