//! Artifact files: bounded previews and chunked reads on character boundaries.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::testsuite::common::{Fixture, TOKEN};
use subzero_core::ErrorCode;
use subzero_runtime::artifacts::{ArtifactFiles, preview};
use subzero_runtime::scope::WorkspaceScope;
use subzero_runtime::store::Settlement;

#[test]
fn a_preview_is_cut_on_a_character_boundary_and_says_so() {
    let p = preview("héllo", 2);
    assert_eq!(p.text, "h");
    assert!(p.truncated);
    let p = preview("héllo", 64);
    assert_eq!(p.text, "héllo");
    assert!(!p.truncated);
}

#[tokio::test]
async fn chunked_reads_cover_the_whole_result_without_splitting_characters() {
    let fx = Fixture::new();
    let (child, run) = fx.spawn_child().await;
    let files = ArtifactFiles::new(&fx.paths);
    let text = "añ€😀z".repeat(50);
    let artifact = files.write(child, &text).unwrap();
    let id = artifact.artifact_id;
    fx.store
        .settle_run(
            child,
            run,
            TOKEN,
            Settlement::Completed {
                preview: preview(&text, 8).text,
                preview_truncated: true,
                artifact,
                leaf: crate::testsuite::common::leaf(child, run, "leaf"),
                budget: None,
            },
        )
        .await
        .unwrap();
    let row = fx.store.artifact(&fx.scope, id).await.unwrap();
    assert_eq!(row.total_bytes, text.len() as u64);

    for length in [1_u64, 2, 3, 5, 7, 64] {
        let mut offset = 0;
        let mut rebuilt = String::new();
        loop {
            let chunk = files.read_chunk(&row, offset, length).unwrap();
            assert_eq!(chunk.total_bytes, text.len() as u64);
            assert!(chunk.next_offset > offset || chunk.eof);
            rebuilt.push_str(&chunk.text);
            offset = chunk.next_offset;
            if chunk.eof {
                break;
            }
        }
        assert_eq!(rebuilt, text, "length {length}");
    }

    let err = files.read_chunk(&row, 2, 10).unwrap_err(); // inside `ñ`
    assert_eq!(err.code(), ErrorCode::InvalidRequest);
    let err = files.read_chunk(&row, 0, 0).unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidRequest);
    let end = files.read_chunk(&row, text.len() as u64, 10).unwrap();
    assert!(end.eof && end.text.is_empty());
}

#[tokio::test]
async fn artifacts_of_another_scope_are_not_found_and_a_missing_file_is_unavailable() {
    let fx = Fixture::new();
    let (child, run) = fx.spawn_child().await;
    let files = ArtifactFiles::new(&fx.paths);
    let artifact = files.write(child, "result").unwrap();
    let id = artifact.artifact_id;
    fx.store
        .settle_run(
            child,
            run,
            TOKEN,
            Settlement::Completed {
                preview: "result".to_owned(),
                preview_truncated: false,
                artifact,
                leaf: crate::testsuite::common::leaf(child, run, "leaf"),
                budget: None,
            },
        )
        .await
        .unwrap();
    let other_dir = fx.dir.path().join("other");
    std::fs::create_dir(&other_dir).unwrap();
    let other = WorkspaceScope::resolve(&other_dir).unwrap();
    let err = fx.store.artifact(&other, id).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::NotFound);

    let row = fx.store.artifact(&fx.scope, id).await.unwrap();
    files.remove_child(child).unwrap();
    let err = files.read_chunk(&row, 0, 10).unwrap_err();
    assert_eq!(err.code(), ErrorCode::ArtifactUnavailable);
}
