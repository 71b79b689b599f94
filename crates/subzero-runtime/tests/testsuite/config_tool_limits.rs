//! `[tool_limits]` and a template's `tool_limits` load per key, and a value outside a key's
//! range is refused when the file is loaded, naming the file, the key and the range.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use subzero_core::ErrorCode;
use subzero_runtime::config::Config;
use subzero_runtime::error::RuntimeError;

const TEMPLATE: &str = "[templates.builder]\ndescription = \"Builds\"\ninstructions = \"Build it.\"\ntools = [\"bash\"]\n";

fn parse(text: &str) -> Result<Config, RuntimeError> {
    Config::parse(text, Path::new("/c/config.toml"))
}

/// The message of the typed configuration error `text` is refused with.
fn refused(text: &str) -> String {
    match parse(text) {
        Err(e @ RuntimeError::Config { .. }) => {
            assert_eq!(e.code(), ErrorCode::InvalidRequest, "{e}");
            let RuntimeError::Config { path, message } = &e else {
                unreachable!()
            };
            assert_eq!(path, Path::new("/c/config.toml"));
            assert!(e.to_string().contains("/c/config.toml"), "{e}");
            message.clone()
        }
        Err(other) => panic!("not a configuration error: {other}"),
        Ok(_) => panic!("accepted: {text}"),
    }
}

#[test]
fn tool_limits_load_per_key_at_both_levels() {
    let config = parse("").unwrap();
    assert!(config.tool_limits.is_empty());
    let config = parse(&format!(
        "[tool_limits]\nprocesses = 512\nmemory_bytes = 1073741824\n\n{TEMPLATE}tool_limits = {{ open_files = 256 }}\n"
    ))
    .unwrap();
    assert_eq!(config.tool_limits.processes, Some(512));
    assert_eq!(config.tool_limits.memory_bytes, Some(1 << 30));
    assert_eq!(config.tool_limits.open_files, None);
    let builder = &config.templates["builder"].tool_limits;
    assert_eq!(builder.open_files, Some(256));
    assert_eq!(builder.processes, None);
}

#[test]
fn a_default_tool_limit_outside_its_range_is_refused_naming_the_key_and_range() {
    assert_eq!(
        refused("[tool_limits]\nmemory_bytes = 0\n"),
        "[tool_limits] memory_bytes = 0 is outside 16777216..=1099511627776 (16 MiB..=1 TiB)"
    );
    assert_eq!(
        refused("[tool_limits]\nprocesses = 1048577\n"),
        "[tool_limits] processes = 1048577 is outside 1..=1048576"
    );
    assert_eq!(
        refused("[tool_limits]\nfile_size_bytes = 1125899906842625\n"),
        "[tool_limits] file_size_bytes = 1125899906842625 is outside 1048576..=1125899906842624 (1 MiB..=1 PiB)"
    );
    assert_eq!(
        refused("[tool_limits]\nopen_files = 15\n"),
        "[tool_limits] open_files = 15 is outside 16..=1048576"
    );
}

#[test]
fn a_template_tool_limit_outside_its_range_is_refused_naming_the_template() {
    assert_eq!(
        refused(&format!("{TEMPLATE}tool_limits = {{ processes = 0 }}\n")),
        "[templates.builder] tool_limits.processes = 0 is outside 1..=1048576"
    );
}

#[test]
fn unknown_negative_and_camel_case_tool_limit_keys_are_refused() {
    for text in [
        "[tool_limits]\ncpu_seconds = 10\n".to_owned(),
        "[tool_limits]\nmemoryBytes = 1073741824\n".to_owned(),
        "[tool_limits]\nopen_files = -1\n".to_owned(),
        format!("{TEMPLATE}tool_limits = {{ nice = 5 }}\n"),
    ] {
        let message = refused(&text);
        assert!(!message.is_empty(), "{text}");
    }
}
