//! A run with a resolved credential leaves no trace of the key on disk or in logs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::testsuite::common::{Fixture, TOKEN};
use secrecy::ExposeSecret;
use subzero_core::ErrorCode;
use subzero_core::events::{EventBody, ToolState};
use subzero_runtime::artifacts::{ArtifactFiles, preview};
use subzero_runtime::config::Config;
use subzero_runtime::credentials::CredentialResolver;
use subzero_runtime::store::Settlement;

const KEY: &str = "sk-live-SUBZERO-NEEDLE-7f3a9c2e51d04b86";

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn files_under(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files_under(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// Admission, worker events, a follow-up and settlements (one with an artifact).
async fn a_whole_run(fx: &Fixture) {
    let (child, run) = fx.spawn_child().await;
    let events = vec![
        EventBody::Tool {
            run_id: run,
            name: "bash".to_owned(),
            state: ToolState::Started,
        },
        EventBody::Text {
            run_id: run,
            text: "working".to_owned(),
            truncated: false,
        },
    ];
    fx.store.append_events(child, TOKEN, events).await.unwrap();
    let next = fx.queue_followup(child, "and then").await;
    let result = "the full result ".repeat(400);
    let files = ArtifactFiles::new(&fx.paths);
    let artifact = files.write(child, &result).unwrap();
    let p = preview(&result, 2048);
    fx.store
        .settle_run(
            child,
            run,
            TOKEN,
            Settlement::Completed {
                preview: p.text,
                preview_truncated: p.truncated,
                artifact,
                leaf: crate::testsuite::common::leaf(child, run, "leaf"),
                budget: None,
            },
        )
        .await
        .unwrap();
    fx.store
        .settle_run(
            child,
            next,
            TOKEN,
            Settlement::Failed {
                code: ErrorCode::ModelRequestFailed,
                message: "model said 401".to_owned(),
                partial: None,
                details: None,
            },
        )
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_is_never_written_to_the_database_wal_artifacts_or_logs() {
    let logs = Captured::default();
    let writer = logs.clone();
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .init();

    let fx = Fixture::new();
    let config_path = fx.dir.path().join("config.toml");
    let config = Config::parse(
        "[credentials.example]\nenv = \"EXAMPLE_KEY\"\norigins = [\"https://api.example.com:443\"]\n",
        &config_path,
    )
    .unwrap();
    let resolver = CredentialResolver::with_env(&config, &config_path, |name| {
        (name == "EXAMPLE_KEY").then(|| KEY.into())
    })
    .unwrap();
    let key = resolver
        .resolve("example", "https://api.example.com/v1")
        .unwrap();
    assert_eq!(key.expose_secret(), KEY);
    tracing::info!(?key, "resolved credential");
    let err = resolver
        .resolve("example", "https://elsewhere.example.com")
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::CredentialsRequired);
    tracing::warn!(%err, "refused credential");

    // A whole run: admission, worker events, a follow-up, settlement with an artifact.
    a_whole_run(&fx).await;

    let scan = |when: &str| {
        let mut files = Vec::new();
        files_under(fx.paths.root(), &mut files);
        assert!(files.iter().any(|f| f.ends_with("subzero.db")));
        for file in &files {
            let bytes = std::fs::read(file).unwrap();
            assert!(
                !contains(&bytes, KEY.as_bytes()),
                "key found in {} ({when})",
                file.display()
            );
        }
        files.len()
    };
    let with_wal = scan("while open");
    fx.store.close();
    scan("after close");
    assert!(with_wal >= 3, "database, WAL and artifact expected");

    let logged = logs.0.lock().unwrap().clone();
    assert!(!logged.is_empty());
    assert!(contains(&logged, b"resolved credential"));
    assert!(!contains(&logged, KEY.as_bytes()), "key found in logs");
}
