//! A recorded change's patch, read in bounded pages.

use super::support::Repo;
use subzero_runtime::checkout::diff_chunk;

#[test]
fn pages_cover_the_whole_patch_and_end_on_line_boundaries() {
    let repo = Repo::with(&[("a.txt", "1\n2\n3\n"), ("b.bin", "\0\x01")]);
    let prepared = repo.prepare("c1");
    let long: String = (0..200).map(|i| format!("line {i}\n")).collect();
    repo.child_write("c1", "a.txt", long.as_bytes());
    repo.child_write("c1", "b.bin", b"\0\x02\x03");
    let change = repo.record_change("c1", &prepared);
    let whole = diff_chunk(repo.path(), &prepared.base, &change.head, 0, 1 << 20).unwrap();
    assert_eq!(whole.next_offset, None);
    assert_eq!(whole.total_bytes, whole.text.len() as u64);
    let text = String::from_utf8_lossy(&whole.text);
    assert!(text.starts_with("diff --git a/a.txt b/a.txt\n"), "{text}");
    assert!(text.contains("GIT binary patch"), "{text}");
    let mut joined = Vec::new();
    let mut offset = Some(0);
    let mut pages = 0;
    while let Some(at) = offset {
        let page = diff_chunk(repo.path(), &prepared.base, &change.head, at, 100).unwrap();
        assert!(page.text.len() <= 100);
        assert_eq!(page.total_bytes, whole.total_bytes);
        if page.next_offset.is_some() {
            assert_eq!(page.text.last(), Some(&b'\n'), "page {pages} ends mid-line");
        }
        joined.extend_from_slice(&page.text);
        offset = page.next_offset;
        pages += 1;
    }
    assert!(pages > 10);
    assert_eq!(joined, whole.text);
}

#[test]
fn an_offset_past_the_end_reads_nothing() {
    let repo = Repo::with(&[("a.txt", "a\n")]);
    let prepared = repo.prepare("c1");
    repo.child_write("c1", "a.txt", b"b\n");
    let change = repo.record_change("c1", &prepared);
    let page = diff_chunk(repo.path(), &prepared.base, &change.head, 1 << 30, 100).unwrap();
    assert!(page.text.is_empty());
    assert_eq!(page.next_offset, None);
    assert!(page.total_bytes > 0);
}
