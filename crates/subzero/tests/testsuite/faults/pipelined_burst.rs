//! A host that pipelines 1,000 requests and reads the answers late: the real
//! `subzero mcp` answers every one, in bounded memory, and gives the memory back.
//!
//! Each request is `tools/list`, whose answer carries every tool's schemas (tens of KiB),
//! so 1,000 unread answers held in the broker would be tens of MiB. The host writes all
//! requests at once from one thread and starts reading only once the broker has stopped
//! reading (the answers it wrote fill the pipe); the broker's
//! resident memory is sampled from `/proc/<pid>/status` throughout.

use std::io::{BufRead, BufReader, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::support;
use crate::support::mcp::Env;
use serde_json::{Value, json};

const BURST: u64 = 1_000;

/// The resident set of `pid` in KiB (`VmRSS`).
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Bytes `pid` has read (`rchar` of `/proc/<pid>/io`): its stdin and everything else.
fn read_bytes(pid: u32) -> Option<u64> {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).ok()?;
    io.lines()
        .find_map(|l| l.strip_prefix("rchar:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Waits (bounded) until `sample` gives the same value five times 20 ms apart, and returns
/// it: the broker's memory has settled, or it has stopped reading.
fn steady(what: &str, sample: impl Fn() -> Option<u64>) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last = sample().unwrap_or_else(|| panic!("no {what}"));
    let mut same = 0;
    while same < 5 {
        assert!(
            Instant::now() < deadline,
            "{what} never settled (last {last})"
        );
        std::thread::sleep(Duration::from_millis(20));
        let now = sample().unwrap_or_else(|| panic!("no {what}"));
        same = if now == last { same + 1 } else { 0 };
        last = now;
    }
    last
}

#[test]
fn a_thousand_pipelined_requests_read_late_are_all_answered_in_bounded_memory() {
    let env = Env::new(Vec::new());
    let cmd = env.command("burst");
    let mut child = support::faults::mcp_command(&cmd)
        .spawn()
        .expect("subzero mcp starts");
    let pid = child.id();
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));

    let mut line = String::new();
    let handshake = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "burst", "version": "0"}}});
    writeln!(stdin, "{handshake}").unwrap();
    stdout.read_line(&mut line).expect("initialize answered");
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
    )
    .unwrap();
    // One answer first, so the baseline is a broker that has served a tools/list.
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    )
    .unwrap();
    line.clear();
    stdout.read_line(&mut line).expect("tools/list answered");
    let answer_bytes = line.len() as u64;
    let baseline = steady("broker rss", || rss_kib(pid));

    // Sample the broker's memory for the whole burst.
    let peak = Arc::new(AtomicU64::new(baseline));
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (peak, sampling) = (Arc::clone(&peak), Arc::clone(&sampling));
        std::thread::spawn(move || {
            while sampling.load(Ordering::SeqCst) {
                if let Some(kib) = rss_kib(pid) {
                    peak.fetch_max(kib, Ordering::SeqCst);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };

    // The host writes every request at once (blocking when the broker stops reading)...
    let writer = std::thread::spawn(move || {
        let mut burst = String::new();
        for id in 0..BURST {
            let request = json!({"jsonrpc": "2.0", "id": 100 + id, "method": "tools/list"});
            burst.push_str(&request.to_string());
            burst.push('\n');
        }
        stdin.write_all(burst.as_bytes()).expect("write the burst");
        stdin.flush().expect("flush");
        stdin
    });
    // ...and reads only once the broker has stopped reading (its answers fill the pipe).
    steady("broker reads", || read_bytes(pid));
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut answered = std::collections::BTreeSet::new();
    while (answered.len() as u64) < BURST && Instant::now() < deadline {
        line.clear();
        if stdout.read_line(&mut line).expect("read an answer") == 0 {
            break;
        }
        let answer: Value = serde_json::from_str(&line).expect("an answer is JSON");
        assert!(answer.get("result").is_some(), "{answer}");
        answered.insert(answer["id"].as_u64().expect("numeric id"));
    }
    let stdin = writer.join().expect("the burst was written");
    assert_eq!(answered.len() as u64, BURST, "every request is answered");
    assert_eq!(answered.first(), Some(&100));
    assert_eq!(answered.last(), Some(&(100 + BURST - 1)));

    let after = steady("broker rss after", || rss_kib(pid));
    sampling.store(false, Ordering::SeqCst);
    sampler.join().unwrap();
    let peak = peak.load(Ordering::SeqCst);
    let held_if_unbounded = BURST * answer_bytes / 1024;
    eprintln!(
        "burst: answer {answer_bytes} B; rss baseline {baseline} KiB, peak {peak} KiB, after {after} KiB (all answers held would be ~{held_if_unbounded} KiB)"
    );
    // Bounded: the broker never holds a fraction of the unread answers worth mentioning.
    assert!(
        peak - baseline < held_if_unbounded / 8,
        "the broker's memory grew by {} KiB during the burst (1,000 answers are ~{held_if_unbounded} KiB)",
        peak - baseline
    );
    // And released: what it holds afterwards is close to where it started.
    assert!(
        after.saturating_sub(baseline) < 6 * 1024,
        "the broker kept {} KiB after the burst",
        after.saturating_sub(baseline)
    );
    drop(stdin);
    let _ = child.wait();
}
