//! Credential references resolve only to configured names and listed origins.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use secrecy::ExposeSecret;
use subzero_core::ErrorCode;
use subzero_runtime::config::Config;
use subzero_runtime::credentials::{CredentialResolver, Origin};

const CONFIG: &str = r#"
[credentials.openai]
env = "OPENAI_API_KEY"
origins = ["https://api.openai.com:443"]

[credentials.local]
env = "LOCAL_KEY"
origins = ["http://localhost:8080"]

[credentials.filed]
file = "keys/filed.key"
origins = ["https://models.example.com"]
"#;

fn resolver(dir: &Path, env: &'static [(&'static str, &'static str)]) -> CredentialResolver {
    let path = dir.join("config.toml");
    let config = Config::parse(CONFIG, &path).unwrap();
    CredentialResolver::with_env(&config, &path, move |name| {
        env.iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| OsString::from(*v))
    })
    .unwrap()
}

#[test]
fn a_configured_ref_resolves_for_a_listed_origin_with_default_ports_explicit() {
    let dir = tempfile::tempdir().unwrap();
    let r = resolver(dir.path(), &[("OPENAI_API_KEY", "sk-abc\n")]);
    let key = r.resolve("openai", "https://api.openai.com/v1").unwrap();
    assert_eq!(key.expose_secret(), "sk-abc");
    let key = r
        .resolve("openai", "https://API.openai.com:443/v1/")
        .unwrap();
    assert_eq!(key.expose_secret(), "sk-abc");
    assert!(!format!("{key:?}").contains("sk-abc"));
}

#[test]
fn an_unknown_ref_is_credentials_required_and_names_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let r = resolver(dir.path(), &[("OPENAI_API_KEY", "sk-abc")]);
    let err = r
        .resolve("OPENAI_API_KEY", "https://api.openai.com/v1")
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::CredentialsRequired);
    let msg = err.to_string();
    assert!(msg.contains("not a configured credential"), "{msg}");
    assert!(msg.contains("configured: filed, local, openai"), "{msg}");
    assert!(msg.contains("[credentials.OPENAI_API_KEY]"), "{msg}");
    assert!(msg.contains("config.toml"), "{msg}");
}

#[test]
fn an_unset_env_var_is_credentials_required_and_names_the_variable() {
    let dir = tempfile::tempdir().unwrap();
    let r = resolver(dir.path(), &[]);
    let err = r
        .resolve("openai", "https://api.openai.com/v1")
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::CredentialsRequired);
    let msg = err.to_string();
    assert!(msg.contains("OPENAI_API_KEY"), "{msg}");
    assert!(msg.contains("unset"), "{msg}");
    let r = resolver(dir.path(), &[("OPENAI_API_KEY", "  ")]);
    assert!(r.resolve("openai", "https://api.openai.com/v1").is_err());
}

#[test]
fn a_wrong_origin_is_credentials_required_without_name_resolution() {
    let dir = tempfile::tempdir().unwrap();
    let r = resolver(
        dir.path(),
        &[("OPENAI_API_KEY", "sk-abc"), ("LOCAL_KEY", "k")],
    );
    for url in [
        "https://evil.example.com/v1",
        "http://api.openai.com/v1",
        "https://api.openai.com:8443/v1",
    ] {
        let err = r.resolve("openai", url).unwrap_err();
        assert_eq!(err.code(), ErrorCode::CredentialsRequired, "{url}");
        let msg = err.to_string();
        assert!(msg.contains("not allowed for model origin"), "{msg}");
        assert!(msg.contains("https://api.openai.com:443"), "{msg}");
    }
    assert!(r.resolve("local", "http://localhost:8080/v1").is_ok());
    let err = r.resolve("local", "http://127.0.0.1:8080/v1").unwrap_err();
    assert!(err.to_string().contains("http://127.0.0.1:8080"), "{err}");
}

#[test]
fn the_origin_is_checked_before_the_key_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let r = resolver(dir.path(), &[]);
    let err = r.resolve("openai", "https://evil.example.com").unwrap_err();
    assert!(err.to_string().contains("not allowed"), "{err}");
}

#[test]
fn an_unreadable_key_file_names_the_file_relative_to_the_config() {
    let dir = tempfile::tempdir().unwrap();
    let r = resolver(dir.path(), &[]);
    let err = r
        .resolve("filed", "https://models.example.com/v1")
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::CredentialsRequired);
    let expected: PathBuf = dir.path().join("keys/filed.key");
    assert!(
        err.to_string().contains(&expected.display().to_string()),
        "{err}"
    );

    std::fs::create_dir_all(dir.path().join("keys")).unwrap();
    std::fs::write(&expected, "file-key\n").unwrap();
    let key = r
        .resolve("filed", "https://models.example.com:443/v1")
        .unwrap();
    assert_eq!(key.expose_secret(), "file-key");
}

#[test]
fn origins_normalize_scheme_host_and_default_port() {
    assert_eq!(
        Origin::of_url("HTTPS://Example.COM/path?q")
            .unwrap()
            .as_str(),
        "https://example.com:443"
    );
    assert_eq!(
        Origin::of_url("http://[::1]/").unwrap().as_str(),
        "http://[::1]:80"
    );
    assert!(Origin::of_url("ftp://example.com").is_err());
    assert!(Origin::parse_configured("https://example.com/v1").is_err());
}

#[test]
fn config_rejects_ambiguous_or_originless_credentials_and_unknown_keys() {
    let path = Path::new("/cfg/config.toml");
    let both = "[credentials.x]\nenv = \"A\"\nfile = \"b\"\norigins = [\"https://a.b\"]\n";
    let err = Config::parse(both, path).unwrap_err();
    assert!(err.to_string().contains("exactly one of"), "{err}");
    let none = "[credentials.x]\nenv = \"A\"\norigins = []\n";
    assert!(
        Config::parse(none, path)
            .unwrap_err()
            .to_string()
            .contains("no origins")
    );
    let typo = "[limits]\nactive_workers = 3\n";
    assert!(Config::parse(typo, path).is_err());
}

#[test]
fn the_documented_config_example_parses_with_defaults() {
    let text = r#"
[credentials.openai]
env = "OPENAI_API_KEY"
origins = ["https://api.openai.com:443"]

[templates.reviewer]
description = "Reads code and reports problems"
instructions = "You review code..."
tools = ["read", "grep"]
write_capable = false

[limits]
active_workers_per_workspace = 4
write_runs_per_workspace = 1
prompt_bytes = 65536
event_retention = 1000
"#;
    let config = Config::parse(text, Path::new("/c/config.toml")).unwrap();
    assert_eq!(config.templates["reviewer"].tools, vec!["read", "grep"]);
    assert_eq!(config.limits.event_retention_bytes, 1024 * 1024);
    let missing = Config::load(Path::new("/nonexistent/subzero/config.toml")).unwrap();
    assert!(missing.credentials.is_empty());
}
