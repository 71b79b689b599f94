//! The transcript's own tests.

use super::*;

#[test]
fn branch_keeps_later_entries_and_a_wrong_digest_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.jsonl");
    let mut t = Transcript::open(&path, None, None).expect("create");
    let root = t.leaf().to_owned();
    let mut prompt = Entry::new(EntryType::Prompt, "user");
    prompt.content = Some("hello".into());
    t.append(prompt.clone()).expect("append");
    let (leaf, digest) = t.commit().expect("commit");
    t.append(prompt.clone()).expect("append interrupted");
    drop(t);

    let before = std::fs::read(&path).expect("read");
    let err = Transcript::open(&path, Some(&leaf), Some("sha256:00")).expect_err("refused");
    assert!(matches!(err, TranscriptError::Incompatible(_)));
    assert_eq!(before, std::fs::read(&path).expect("read"));

    let mut t = Transcript::open(&path, Some(&leaf), Some(&digest)).expect("resume");
    t.append(prompt.clone()).expect("append");
    assert_eq!(t.path().len(), 3);
    drop(t);
    let text = std::fs::read_to_string(&path).expect("read");
    assert_eq!(text.lines().count(), 4, "the interrupted entry is kept");

    let t = Transcript::open(&path, Some(&root), None).expect("root is a leaf");
    assert_eq!(t.path().len(), 1);
}

/// Every line of the file is a readable entry (what the broker's checkpoint check and
/// a later open require).
fn every_line_reads(path: &Path) -> usize {
    let text = std::fs::read_to_string(path).expect("read");
    assert!(text.ends_with('\n'), "the file ends at a whole line");
    for line in text.lines() {
        serde_json::from_str::<Entry>(line)
            .unwrap_or_else(|e| panic!("a malformed line was left ({e}): {line:.80}"));
    }
    text.lines().count()
}

#[test]
fn a_torn_last_line_is_cut_off_at_open_and_never_becomes_a_malformed_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.jsonl");
    let mut t = Transcript::open(&path, None, None).expect("create");
    let mut prompt = Entry::new(EntryType::Prompt, "user");
    prompt.content = Some("hello".into());
    t.append(prompt.clone()).expect("append");
    let (leaf, digest) = t.commit().expect("commit");
    drop(t);
    // What a write cut short leaves: the start of a line, no newline.
    let mut file = OpenOptions::new().append(true).open(&path).expect("open");
    file.write_all(br#"{"type":"assistant","id":"e_torn","parentId":"#)
        .expect("torn write");
    drop(file);

    // The next run continues from the recorded leaf; the torn bytes are gone.
    let mut t = Transcript::open(&path, Some(&leaf), Some(&digest)).expect("resume");
    assert_eq!(every_line_reads(&path), 2);
    t.append(prompt.clone()).expect("append");
    let (next, next_digest) = t.commit().expect("commit");
    drop(t);
    assert_eq!(every_line_reads(&path), 3);
    // And a later open (a resume verifying its checkpoint) reads the file whole.
    let t = Transcript::open(&path, Some(&next), Some(&next_digest)).expect("reopen");
    assert_eq!(t.path().len(), 3);
    // Continuing from the end finds the last whole entry, never the torn one.
    drop(t);
    let t = Transcript::open(&path, None, None).expect("from the end");
    assert_eq!(t.leaf(), next);
}

#[test]
fn continuing_from_the_end_skips_a_model_turn_whose_calls_were_not_answered() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.jsonl");
    let mut t = Transcript::open(&path, None, None).expect("create");
    let prompt = t
        .append(Entry::new(EntryType::Prompt, "user"))
        .expect("prompt");
    let mut turn = Entry::new(EntryType::Assistant, "assistant");
    turn.tool_calls = vec![
        ToolCallRecord {
            id: "call_1".into(),
            name: "bash".into(),
            arguments: "{}".into(),
        },
        ToolCallRecord {
            id: "call_2".into(),
            name: "read".into(),
            arguments: "{}".into(),
        },
    ];
    t.append(turn.clone()).expect("turn");
    let mut result = Entry::new(EntryType::ToolResult, "tool");
    result.tool_call_id = Some("call_1".into());
    t.append(result).expect("first result");
    // The second result was never written (the disk was full).
    drop(t);
    let t = Transcript::open(&path, None, None).expect("open");
    assert_eq!(t.leaf(), prompt, "the unanswered turn is off the path");
    drop(t);

    // A turn whose calls were all answered is continued from its last result.
    let mut t = Transcript::open(&path, None, None).expect("open");
    t.append(turn).expect("turn again");
    for id in ["call_1", "call_2"] {
        let mut result = Entry::new(EntryType::ToolResult, "tool");
        result.tool_call_id = Some(id.into());
        t.append(result).expect("result");
    }
    let (end, _) = t.commit().expect("commit");
    drop(t);
    let t = Transcript::open(&path, None, None).expect("open");
    assert_eq!(t.leaf(), end);
}

#[test]
fn a_torn_header_starts_the_transcript_over() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.jsonl");
    std::fs::write(&path, br#"{"type":"header","id":"e_01"#).expect("torn header");
    let t = Transcript::open(&path, None, None).expect("started over");
    assert_eq!(t.path().len(), 1);
    drop(t);
    assert_eq!(every_line_reads(&path), 1);
}

#[test]
fn a_whole_last_entry_without_its_newline_is_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.jsonl");
    let mut t = Transcript::open(&path, None, None).expect("create");
    t.append(Entry::new(EntryType::Prompt, "user"))
        .expect("append");
    let (leaf, _) = t.commit().expect("commit");
    drop(t);
    let mut bytes = std::fs::read(&path).expect("read");
    assert_eq!(bytes.pop(), Some(b'\n'));
    std::fs::write(&path, &bytes).expect("newline lost");
    let t = Transcript::open(&path, None, None).expect("open");
    assert_eq!(t.leaf(), leaf);
    drop(t);
    assert_eq!(every_line_reads(&path), 2);
}
