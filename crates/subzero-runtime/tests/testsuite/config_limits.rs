//! `[limits]` keys load with their defaults, and a value outside a key's documented range is
//! refused when the file is loaded, naming the key and the range.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use subzero_runtime::config::Config;

fn parse(limits: &str) -> Result<Config, String> {
    Config::parse(
        &format!("[limits]\n{limits}\n"),
        Path::new("/c/config.toml"),
    )
    .map_err(|e| e.to_string())
}

#[test]
fn queued_followups_defaults_to_16_and_takes_a_configured_bound() {
    assert_eq!(parse("").unwrap().limits.queued_followups, 16);
    assert_eq!(
        parse("queued_followups = 2")
            .unwrap()
            .limits
            .queued_followups,
        2
    );
    assert_eq!(
        parse("queued_followups = 256")
            .unwrap()
            .limits
            .queued_followups,
        256
    );
}

#[test]
fn queued_followups_outside_1_to_256_is_refused_naming_the_key() {
    for bad in ["0", "257", "-1"] {
        let message = parse(&format!("queued_followups = {bad}")).unwrap_err();
        assert!(
            message.contains("invalid_request") && message.contains("queued_followups"),
            "{bad}: {message}"
        );
    }
    let message = parse("queued_followups = 257").unwrap_err();
    assert!(message.contains("256"), "{message}");
}

#[test]
fn every_limits_range_of_the_contract_is_checked_at_load() {
    for (key, bad) in [
        ("active_workers_per_workspace", "65"),
        ("write_runs_per_workspace", "17"),
        ("event_retention", "15"),
        ("event_retention_bytes", "1023"),
    ] {
        let message = parse(&format!("{key} = {bad}")).unwrap_err();
        assert!(message.contains(key), "{key} = {bad}: {message}");
    }
}
