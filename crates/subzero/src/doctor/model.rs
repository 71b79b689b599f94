//! Reachability of one model endpoint with one configured credential: the key is
//! resolved for that URL's origin exactly as a spawn would, then `GET {url}/models` is
//! sent with it. Any HTTP answer means the endpoint is reachable.

use std::time::{Duration, Instant};

use secrecy::SecretString;
use subzero_core::Described;
use subzero_runtime::config::Config;
use subzero_runtime::credentials::CredentialResolver;

use super::report::Check;

/// How long the probe waits for an answer.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Resolve `credential` for `url`, then probe `{url}/models`.
pub async fn check_model(
    url: &str,
    credential: &str,
    config: Option<&Config>,
    config_path: &std::path::Path,
) -> Check {
    let name = format!("model {url}");
    let Some(config) = config else {
        return Check::fail(
            name,
            "the configuration file cannot be used (see the config check)",
            "fix the configuration first",
        );
    };
    let key = match resolve_key(config, config_path, credential, url) {
        Ok(key) => key,
        Err(message) => {
            return Check::fail(
                name,
                message,
                format!(
                    "make credentialRef {credential:?} resolvable for this URL's origin (see the message), then rerun doctor"
                ),
            );
        }
    };
    let client = match probe_client() {
        Ok(c) => c,
        Err(e) => {
            return Check::fail(
                name,
                format!("cannot build an HTTP client: {e}"),
                "report a bug",
            );
        }
    };
    let target = format!("{}/models", url.trim_end_matches('/'));
    let started = Instant::now();
    let sent = client
        .get(&target)
        .bearer_auth(secrecy::ExposeSecret::expose_secret(&key))
        .send()
        .await;
    drop(key);
    let ms = started.elapsed().as_millis();
    match sent {
        Ok(response) => answered(name, &target, response.status(), ms, credential),
        Err(e) => unanswered(name, &target, &e),
    }
}

/// The key `credential` gives for `url`'s origin, as a spawn would resolve it; `Err` is the
/// resolver's message without its leading code.
fn resolve_key(
    config: &Config,
    config_path: &std::path::Path,
    credential: &str,
    url: &str,
) -> Result<SecretString, String> {
    CredentialResolver::new(config, config_path)
        .and_then(|r| r.resolve(credential, url))
        .map_err(|e| e.message())
}

/// A client that gives up after [`PROBE_TIMEOUT`] and never follows a redirect.
fn probe_client() -> reqwest::Result<reqwest::Client> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(PROBE_TIMEOUT)
        .connect_timeout(PROBE_TIMEOUT)
        // The key must never follow a redirect to another place.
        .redirect(reqwest::redirect::Policy::none())
        .build()
}

/// Any HTTP answer means reachable; 401 and 403 warn that the key was refused.
fn answered(
    name: String,
    target: &str,
    status: reqwest::StatusCode,
    ms: u128,
    credential: &str,
) -> Check {
    let detail = format!("GET {target}: HTTP {} in {ms} ms", status.as_u16());
    if status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::FORBIDDEN {
        Check::warn(
            name,
            format!("{detail}: reachable, but the key was refused"),
            format!(
                "check the key that credentialRef {credential:?} reads; it may be expired or for another endpoint"
            ),
        )
    } else {
        Check::pass(name, format!("{detail}: reachable"))
    }
}

/// No HTTP answer: a timeout, a connection that failed, or another failure.
fn unanswered(name: String, target: &str, e: &reqwest::Error) -> Check {
    let why = if e.is_timeout() {
        format!("no answer within {} s", PROBE_TIMEOUT.as_secs())
    } else if e.is_connect() {
        "cannot connect (refused, unreachable or TLS failure)".to_owned()
    } else {
        "request failed".to_owned()
    };
    // reqwest's message names the URL, never the header.
    Check::fail(
        name,
        format!("GET {target}: {why}: {}", error_chain(e)),
        format!(
            "check the URL (it should be the API base, e.g. https://api.openai.com/v1) and that the endpoint is up: curl -sS {target}"
        ),
    )
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    text
}
