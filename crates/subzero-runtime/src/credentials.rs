//! Credential resolution: a `credentialRef` names a configured credential, never an
//! arbitrary environment variable, and only model URLs whose origin is listed for it
//! may receive the key. Keys are held as [`SecretString`] in memory only.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use secrecy::SecretString;
use url::Url;

use crate::config::Config;
use crate::error::{RuntimeError, RuntimeResult};

/// A normalized origin: `scheme://host:port`, default port made explicit, host
/// compared textually (no name resolution: `localhost` is not `127.0.0.1`).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Origin(String);

impl Origin {
    /// The origin of a model URL (`http`/`https` only).
    pub fn of_url(text: &str) -> Result<Origin, String> {
        let url = Url::parse(text).map_err(|e| format!("not a valid URL ({e})"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!(
                "scheme {:?} is not allowed; use http or https",
                url.scheme()
            ));
        }
        let host = url
            .host_str()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| "has no host".to_owned())?;
        let port = url
            .port_or_known_default()
            .ok_or_else(|| "has no port".to_owned())?;
        Ok(Origin(format!("{}://{host}:{port}", url.scheme())))
    }

    /// A configured origin: like [`Origin::of_url`], but it must be an origin only
    /// (no path beyond `/`, no query, fragment or user info).
    pub fn parse_configured(text: &str) -> Result<Origin, String> {
        let url = Url::parse(text).map_err(|e| format!("not a valid origin ({e})"))?;
        if url.path() != "/" && !url.path().is_empty()
            || url.query().is_some()
            || url.fragment().is_some()
            || !url.username().is_empty()
            || url.password().is_some()
        {
            return Err("must be scheme://host:port with nothing after it".to_owned());
        }
        Origin::of_url(text)
    }

    /// The normalized text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Clone, Debug)]
enum KeySource {
    Env(String),
    File(PathBuf),
}

#[derive(Clone, Debug)]
struct Entry {
    source: KeySource,
    origins: Vec<Origin>,
}

type EnvLookup = Arc<dyn Fn(&str) -> Option<OsString> + Send + Sync>;

/// Resolves `credentialRef` + model URL to a key.
#[derive(Clone)]
pub struct CredentialResolver {
    entries: BTreeMap<String, Entry>,
    config_path: PathBuf,
    env: EnvLookup,
}

impl fmt::Debug for CredentialResolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CredentialResolver")
            .field("entries", &self.entries)
            .field("config_path", &self.config_path)
            .finish_non_exhaustive()
    }
}

impl CredentialResolver {
    /// Build from a validated config read from `config_path`, reading keys from the live
    /// process environment (`subzero doctor`). The broker reads them instead from the
    /// [`SecretEnv`](crate::secret_env::SecretEnv) it captured at startup, via
    /// [`CredentialResolver::with_env`].
    pub fn new(config: &Config, config_path: &Path) -> RuntimeResult<CredentialResolver> {
        Self::with_env(config, config_path, |name| std::env::var_os(name))
    }

    /// Build with an explicit environment lookup (tests, or a captured environment).
    pub fn with_env(
        config: &Config,
        config_path: &Path,
        env: impl Fn(&str) -> Option<OsString> + Send + Sync + 'static,
    ) -> RuntimeResult<CredentialResolver> {
        let mut entries = BTreeMap::new();
        for (name, raw) in &config.credentials {
            let source = match (&raw.env, &raw.file) {
                (Some(var), None) => KeySource::Env(var.clone()),
                (None, Some(file)) => KeySource::File(file.clone()),
                _ => {
                    return Err(RuntimeError::Config {
                        path: config_path.to_path_buf(),
                        message: format!("[credentials.{name}] needs exactly one of env or file"),
                    });
                }
            };
            let origins = raw
                .origins
                .iter()
                .map(|o| {
                    Origin::parse_configured(o).map_err(|why| RuntimeError::Config {
                        path: config_path.to_path_buf(),
                        message: format!("[credentials.{name}] origin {o:?}: {why}"),
                    })
                })
                .collect::<RuntimeResult<Vec<_>>>()?;
            entries.insert(name.clone(), Entry { source, origins });
        }
        Ok(CredentialResolver {
            entries,
            config_path: config_path.to_path_buf(),
            env: Arc::new(env),
        })
    }

    /// The files `file =` credentials read keys from (absolute).
    pub fn key_files(&self) -> Vec<PathBuf> {
        self.entries
            .values()
            .filter_map(|e| match &e.source {
                KeySource::File(path) => Some(path.clone()),
                KeySource::Env(_) => None,
            })
            .collect()
    }

    /// Configured credential names.
    pub fn names(&self) -> Vec<&str> {
        self.entries.keys().map(String::as_str).collect()
    }

    /// Check that `credential_ref` is configured and allowed for `model_url`, without
    /// reading the key.
    pub fn check(&self, credential_ref: &str, model_url: &str) -> RuntimeResult<()> {
        self.entry_for(credential_ref, model_url).map(drop)
    }

    fn entry_for(&self, credential_ref: &str, model_url: &str) -> RuntimeResult<&Entry> {
        let config = self.config_path.display();
        let Some(entry) = self.entries.get(credential_ref) else {
            let known = if self.entries.is_empty() {
                "none are configured".to_owned()
            } else {
                format!("configured: {}", self.names().join(", "))
            };
            return Err(RuntimeError::CredentialsRequired(format!(
                "credentialRef {credential_ref:?} is not a configured credential ({known}); add [credentials.{credential_ref}] with env = \"VAR\" or file = \"path\" and origins = [\"scheme://host:port\"] to {config}"
            )));
        };
        let origin = Origin::of_url(model_url).map_err(|why| {
            RuntimeError::InvalidRequest(format!("model url {model_url:?} {why}"))
        })?;
        if !entry.origins.contains(&origin) {
            let allowed: Vec<&str> = entry.origins.iter().map(Origin::as_str).collect();
            return Err(RuntimeError::CredentialsRequired(format!(
                "credentialRef {credential_ref:?} is not allowed for model origin {origin} (allowed: {}); hosts are compared as written, so add \"{origin}\" to origins of [credentials.{credential_ref}] in {config} if this endpoint should receive the key",
                allowed.join(", ")
            )));
        }
        Ok(entry)
    }

    /// Resolve the key for `credential_ref` and `model_url`. Every failure is
    /// `credentials_required` (an invalid URL is `invalid_request`) with a message
    /// naming what is missing and how to fix it; the message never contains a key.
    pub fn resolve(&self, credential_ref: &str, model_url: &str) -> RuntimeResult<SecretString> {
        let entry = self.entry_for(credential_ref, model_url)?;
        let config = self.config_path.display();
        let key = match &entry.source {
            KeySource::Env(var) => {
                let value = (self.env)(var)
                    .and_then(|v| v.into_string().ok())
                    .map(|v| v.trim().to_owned())
                    .filter(|v| !v.is_empty());
                value.ok_or_else(|| {
                    RuntimeError::CredentialsRequired(format!(
                        "credentialRef {credential_ref:?} reads environment variable {var}, which is unset, empty or not UTF-8 in the broker's environment; set it where the host starts `subzero mcp`, or use file = \"path\" in [credentials.{credential_ref}] of {config}"
                    ))
                })?
            }
            KeySource::File(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    RuntimeError::CredentialsRequired(format!(
                        "credentialRef {credential_ref:?} reads file {}, which cannot be read ({e}); create it containing only the key (chmod 600) or fix file = in [credentials.{credential_ref}] of {config}",
                        path.display()
                    ))
                })?;
                let key = text.trim().to_owned();
                if key.is_empty() {
                    return Err(RuntimeError::CredentialsRequired(format!(
                        "credentialRef {credential_ref:?} reads file {}, which is empty; put the key in it",
                        path.display()
                    )));
                }
                key
            }
        };
        Ok(SecretString::from(key))
    }
}
