//! Shared fixtures for the runtime's integration tests.
//!
//! The runtime mints capability tokens only where a worker or a transcript shows the
//! evidence; these tests have neither, so the fixtures here mint what the scripted
//! worker would have reported (the only mint point of the runtime's tests).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use serde_json::json;
use subzero_core::lifecycle::{LeafRecorded, LeafRef, ObservedLeaf, Supervisor};
use subzero_core::{ChildId, RunId};
use subzero_runtime::paths::StatePaths;
use subzero_runtime::scope::WorkspaceScope;
use subzero_runtime::store::{AdmitFollowup, AdmitSpawn, ModelRow, NewChild, Store, StoreOptions};
use tempfile::TempDir;

pub const TOKEN: &str = "bk_TESTBROKER";

pub struct Fixture {
    pub dir: TempDir,
    pub paths: StatePaths,
    pub store: Store,
    pub workspace: PathBuf,
    pub scope: WorkspaceScope,
}

impl Fixture {
    pub fn new() -> Fixture {
        Fixture::with_options(StoreOptions::default())
    }

    pub fn with_options(options: StoreOptions) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let paths = StatePaths::create(dir.path().join("state")).unwrap();
        let workspace = dir.path().join("workspace");
        std::fs::create_dir_all(&workspace).unwrap();
        let scope = WorkspaceScope::resolve(&workspace).unwrap();
        let store = Store::open(&paths.database(), options).unwrap();
        Fixture {
            dir,
            paths,
            store,
            workspace,
            scope,
        }
    }

    pub fn raw(&self) -> rusqlite::Connection {
        rusqlite::Connection::open(self.paths.database()).unwrap()
    }

    pub fn count(&self, sql: &str) -> i64 {
        self.raw().query_row(sql, [], |r| r.get(0)).unwrap()
    }

    pub fn inject_event_failure(&self) {
        self.raw()
            .execute_batch(
                "CREATE TRIGGER inject BEFORE INSERT ON events BEGIN SELECT RAISE(ABORT, 'injected failure'); END;",
            )
            .unwrap();
    }

    pub fn clear_injection(&self) {
        self.raw().execute_batch("DROP TRIGGER inject;").unwrap();
    }

    /// Spawn a child owned by TOKEN; returns (child, first run).
    pub async fn spawn_child(&self) -> (ChildId, RunId) {
        let input = spawn_input(&self.scope, TOKEN);
        let (child, run) = (input.child.child_id, input.run_id);
        match self.store.admit_spawn(input).await.unwrap() {
            subzero_runtime::store::Admit::New(_) => {}
            other => panic!("unexpected {other:?}"),
        }
        (child, run)
    }

    /// The child's recorded last leaf, as the store holds it.
    pub async fn recorded_leaf(&self, child: ChildId) -> Option<LeafRef> {
        let row = self
            .store
            .child(&self.scope, child)
            .await
            .expect("child row");
        row.last_leaf.map(|l| {
            let digest = subzero_core::Sha256Digest::parse(&l.digest).expect("stored digest");
            LeafRef::new(&l.leaf_id, digest).expect("stored leaf")
        })
    }

    /// What a transcript that agrees with the store would show at the child's recorded
    /// leaf (the broker reads it from the transcript; these tests have none).
    pub async fn observed_leaf(&self, child: ChildId) -> Option<ObservedLeaf> {
        let recorded = self.recorded_leaf(child).await;
        recorded.map(|leaf| observed(child, leaf))
    }

    pub async fn queue_followup(&self, child: ChildId, prompt: &str) -> RunId {
        let run = RunId::generate();
        self.store
            .admit_followup(
                &self.scope,
                AdmitFollowup {
                    child_id: child,
                    run_id: run,
                    prompt: prompt.to_owned(),
                    owner_token: TOKEN.to_owned(),
                    receipt: None,
                },
            )
            .await
            .unwrap();
        run
    }
}

pub fn model() -> ModelRow {
    ModelRow {
        url: "https://api.example.com/v1".to_owned(),
        model: "example-model".to_owned(),
        api: subzero_runtime::store::ModelApi::OpenaiCompletions,
        credential_ref: "example".to_owned(),
        context_window: None,
    }
}

pub fn new_child(scope: &WorkspaceScope, child_id: ChildId) -> NewChild {
    NewChild {
        child_id,
        label: "look around".to_owned(),
        scope: scope.clone(),
        template_id: "researcher".to_owned(),
        snapshot: json!({"templateId": "researcher", "tools": ["read"], "writeCapable": false}),
        write_capable: false,
        model: model(),
    }
}

pub fn spawn_input(scope: &WorkspaceScope, token: &str) -> AdmitSpawn {
    AdmitSpawn {
        child: new_child(scope, ChildId::generate()),
        run_id: RunId::generate(),
        prompt: "look around".to_owned(),
        owner_token: token.to_owned(),
        receipt: None,
    }
}

/// The supervisor's proof that `run` of `child` committed transcript leaf `leaf_id`.
/// The minting authority: these tests stand in for the supervisor. The suite shares its
/// process with the runtime's unit tests, so it borrows the authority the runtime takes.
pub fn supervisor() -> &'static Supervisor {
    subzero_runtime::supervisor::proof::authority().expect("the runtime takes the authority")
}

pub fn leaf(child: ChildId, run: RunId, leaf_id: &str) -> LeafRecorded {
    let leaf = LeafRef::new(leaf_id, subzero_core::Sha256Digest::of(leaf_id.as_bytes())).unwrap();
    // Stands for the scripted worker's `leaf_committed` for `run`.
    supervisor().leaf_recorded(child, run, leaf)
}

/// A `stopped` settlement carrying the supervisor's confirmation for `run` of `child`.
pub fn stopped(child: ChildId, run: RunId, reaped: u32) -> subzero_runtime::store::Settlement {
    // Stands for the scripted worker's `cancel_confirmed` for `run`.
    let confirmed = supervisor().confirm_stop(child, run, reaped);
    subzero_runtime::store::Settlement::Stopped { confirmed }
}

/// `leaf` as if just read from `child`'s transcript.
pub fn observed(child: ChildId, leaf: LeafRef) -> ObservedLeaf {
    // Stands for the broker's read of `child`'s transcript.
    supervisor().observed_leaf(child, leaf)
}

/// A result file a completed run registers (the store records the row; these tests write
/// no file).
pub fn result_artifact() -> subzero_runtime::store::NewArtifact {
    subzero_runtime::store::NewArtifact {
        artifact_id: subzero_core::ArtifactId::generate(),
        file_name: "result.md".to_owned(),
        total_bytes: 4,
    }
}
