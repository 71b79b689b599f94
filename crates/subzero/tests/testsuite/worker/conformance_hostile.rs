//! The worker conformance suite, part 5: a hostile endpoint and a hostile tool, on both
//! workers as the broker starts them (`support::conformance`): a 200 MB answer stops at the
//! response cap with the worker's memory bounded; a silent endpoint fails at the idle timeout;
//! a redirect to another origin is refused and that origin (a second loopback server) gets
//! nothing; the key is in no file the worker wrote (transcript, scratch, Pi's agent
//! directory, the workspace) in any encoding; and a `bash` command cannot read the key from
//! the worker process (Node, for the Pi worker) through `/proc/<pid>/environ`, `cmdline` or
//! `mem`.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::support;
use crate::support::conformance::*;
use crate::support::worker::with_tool_limits;
use serde_json::json;
use subzero_protocol::{ErrorCode, RunSettledStatus};
use subzero_testkit::{RecordedRequest, Reply, ScriptedServer, Step};

const KEY: &str = "sk-test-key-0000";

fn base64(bytes: &[u8], url: bool) -> String {
    let alphabet: &[u8; 64] = if url {
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    } else {
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    };
    let mut out = String::new();
    for group in bytes.chunks(3) {
        let n = group
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..=group.len() {
            out.push(char::from(alphabet[(n >> (18 - 6 * i) & 63) as usize]));
        }
    }
    out
}

/// The key plain, in base64 and base64url at each of the three alignments a surrounding
/// stream may give it (whole 3-byte groups only), and in hex of both cases.
fn key_forms() -> Vec<(String, String)> {
    let bytes = KEY.as_bytes();
    let mut forms = vec![("plain".to_owned(), KEY.to_owned())];
    for skip in 0..3 {
        let whole = (bytes.len() - skip) / 3 * 3;
        let group = &bytes[skip..skip + whole];
        forms.push((format!("base64 +{skip}"), base64(group, false)));
        forms.push((format!("base64url +{skip}"), base64(group, true)));
    }
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    forms.push(("HEX".to_owned(), hex.to_uppercase()));
    forms.push(("hex".to_owned(), hex));
    forms
}

#[test]
fn the_searched_forms_are_the_ones_tools_print() {
    // `printf Man | base64`, `printf sk- | xxd -p`.
    assert_eq!(base64(b"Man", false), "TWFu");
    assert_eq!(base64(b"\xfb\xff", true), "-_8");
    let forms = key_forms();
    assert!(forms.iter().any(|(_, f)| f.starts_with("736b2d")));
    assert!(forms.iter().all(|(_, f)| !f.is_empty()));
}

/// Every form of the key found in `text`.
fn leaks_in(text: &str) -> Vec<String> {
    let joined: String = text.split_whitespace().collect();
    key_forms()
        .into_iter()
        .filter(|(_, form)| text.contains(form.as_str()) || joined.contains(form.as_str()))
        .map(|(name, _)| name)
        .collect()
}

/// Every regular file below `dir` holding a form of the key, with the forms.
fn files_with_the_key(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            found.extend(files_with_the_key(&path));
        } else if meta.is_file() {
            let bytes = std::fs::read(&path).unwrap_or_default();
            let leaks = leaks_in(&String::from_utf8_lossy(&bytes));
            if !leaks.is_empty() {
                found.push(format!("{}: {leaks:?}", path.display()));
            }
        }
    }
    found
}

/// Regular files below `dir`.
fn files_under(dir: &Path) -> Vec<String> {
    let mut all = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            all.extend(files_under(&path));
        } else {
            all.push(path.display().to_string());
        }
    }
    all
}

/// The peak resident set (`VmHWM`, KiB) of the process holding the key: the worker itself,
/// or for the Pi worker the Node it started.
fn key_holder_peak_kib(engine: Engine, worker: &Conn) -> u64 {
    let pid = match engine {
        Engine::Rust => worker.pid(),
        Engine::Pi => node_of(worker.pid()).expect("Node under the Pi worker's init"),
    };
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

/// The child of `init` running Node.
fn node_of(init: i32) -> Option<i32> {
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let parent = stat
            .rsplit(')')
            .next()
            .and_then(|rest| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<i32>().ok());
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
        if parent == Some(init) && exe.ends_with("node") {
            return Some(pid);
        }
    }
    None
}

fn text_chunk(text: &str) -> String {
    json!({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
        .to_string()
}

#[test]
fn a_200_mb_answer_stops_at_the_response_cap_and_the_key_holders_memory_stays_bounded() {
    each_engine(|engine| {
        let place = Place::new();
        let piece = "x".repeat(16 * 1024);
        let server = ScriptedServer::start(vec![Reply::Sse(vec![
            Step::repeat_data(&text_chunk(&piece), 200 * 64),
            Step::finish("stop"),
            Step::done(),
        ])])
        .expect("server");
        let id = engine.run_id(51);
        let mut worker = place.worker(engine, &researcher());
        let start = place.start_with(&id, server.base_url(), researcher(), "Say a lot.", |spec| {
            spec.stream_limits = Some(json!({"maxResponseBytes": 1048576, "maxToolArgumentBytes": 1048576, "idleTimeoutMs": 180000}));
        });
        let started = Instant::now();
        worker.send(&start);
        let settled = worker.run_settled(&id);
        let peak = key_holder_peak_kib(engine, &worker);
        eprintln!(
            "{engine:?}: the key holder's peak resident set after 200 MB offered: {peak} KiB"
        );
        assert!(started.elapsed() < Duration::from_secs(20), "{engine:?}");
        assert_eq!(
            settled.status,
            RunSettledStatus::Failed,
            "{engine:?}: {settled}"
        );
        assert_eq!(
            settled.code(),
            ErrorCode::LimitExceeded,
            "{engine:?}: {settled}"
        );
        assert_eq!(
            settled.details().limit.as_deref(),
            Some("model_response_bytes")
        );
        let partial = settled.result.as_deref().unwrap_or_default();
        assert!(
            partial.starts_with("xxxx") && partial.len() <= 1024 * 1024,
            "{engine:?}: the partial text is kept, within the cap: {} bytes",
            partial.len()
        );
        // Node alone takes ~100 MB; 200 MB read whole would show far above this.
        assert!(
            peak < 300 * 1024,
            "{engine:?}: peak resident set {peak} KiB"
        );
        server.wait_for_requests(2, RETRY);
        assert_eq!(server.requests().len(), 1, "{engine:?}: nothing is retried");
    });
}

#[test]
fn a_silent_endpoint_fails_the_run_at_the_idle_timeout_before_and_after_the_headers() {
    each_engine(|engine| {
        let place = Place::new();
        let server = ScriptedServer::start(vec![
            Reply::Hang,
            Reply::Sse(vec![Step::text("Reading the project… "), Step::Hang]),
        ])
        .expect("server");
        let mut worker = place.worker(engine, &researcher());
        for (n, what) in [(52, "before the headers"), (53, "mid-stream")] {
            let id = engine.run_id(n);
            let start = place.start_with(&id, server.base_url(), researcher(), "Read it.", |spec| {
                spec.stream_limits = Some(json!({"maxResponseBytes": 8388608, "maxToolArgumentBytes": 1048576, "idleTimeoutMs": 1000}));
            });
            let started = Instant::now();
            worker.send(&start);
            let settled = worker.run_settled(&id);
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "{engine:?} {what}"
            );
            assert_eq!(
                settled.status,
                RunSettledStatus::Failed,
                "{engine:?} {what}: {settled}"
            );
            assert_eq!(
                settled.code(),
                ErrorCode::ModelRequestFailed,
                "{engine:?} {what}"
            );
            assert_eq!(
                settled.details().idle_timeout_ms,
                Some(1000),
                "{engine:?} {what}: {settled}"
            );
            let message = settled.message();
            assert!(
                message.contains("sent nothing for 1000 ms")
                    && message.contains("model_idle_timeout_ms"),
                "{engine:?} {what}: {message}"
            );
        }
        assert_eq!(server.requests().len(), 2, "{engine:?}: nothing is retried");
    });
}

#[test]
fn a_redirect_to_another_origin_is_refused_and_that_origin_gets_nothing() {
    each_engine(|engine| {
        let place = Place::new();
        let other = ScriptedServer::start(vec![Reply::text("stolen"), Reply::text("stolen")])
            .expect("the other origin");
        let other_origin = other.base_url().trim_end_matches("/v1").to_owned();
        let server = ScriptedServer::start(vec![Reply::redirect(
            307,
            &format!("{}/chat/completions?token=stolen", other.base_url()),
        )])
        .expect("server");
        let id = engine.run_id(54);
        let mut worker = place.worker(engine, &researcher());
        worker.send(&place.start(&id, server.base_url(), researcher(), "SECRET-PROMPT-4a1"));
        let settled = worker.run_settled(&id);
        assert_eq!(
            settled.status,
            RunSettledStatus::Failed,
            "{engine:?}: {settled}"
        );
        assert_eq!(settled.code(), ErrorCode::ModelRequestFailed, "{engine:?}");
        assert_eq!(
            settled.details().redirect.as_deref(),
            Some(other_origin.as_str()),
            "{engine:?}: {settled}"
        );
        let message = settled.message();
        assert!(
            message.contains(&format!("redirected to another origin, {other_origin};")),
            "{engine:?}: {message}"
        );
        assert!(
            !message.contains("token=stolen") && !message.contains(KEY),
            "{message}"
        );
        // A request to the other origin would arrive within this time.
        other.wait_for_requests(1, RETRY);
        let seen: Vec<RecordedRequest> = other.requests();
        assert!(
            seen.is_empty(),
            "{engine:?}: the other origin got {} request(s): {:?}",
            seen.len(),
            seen.first().map(|r| (&r.path, &r.headers))
        );
        assert_eq!(server.requests().len(), 1, "{engine:?}: nothing is retried");
    });
}

#[test]
fn the_key_is_in_no_file_the_worker_wrote_in_any_encoding() {
    each_engine(|engine| {
        let place = Place::new();
        // The endpoint knows the key and puts it everywhere it can: in the text (split
        // across deltas), in a command's arguments, in that command's long output (which Pi
        // would keep whole in a file of its own) and in a file the command writes.
        let command = format!(
            "echo {KEY} > key-copy.txt; echo {KEY}; for i in $(seq 1 3000); do echo line $i {KEY}; done"
        );
        let server = ScriptedServer::start(vec![
            Reply::tool_call("call_1", "bash", &json!({ "command": command }).to_string()),
            Reply::text_deltas(&["done; the key was sk-test-", "key-0000 all along"]),
        ])
        .expect("server");
        let id = engine.run_id(55);
        let mut worker = place.worker(engine, &coder());
        worker.send(&place.start(&id, server.base_url(), coder(), "Work."));
        let settled = worker.run_settled(&id);
        assert_eq!(
            settled.status,
            RunSettledStatus::Completed,
            "{engine:?}: {settled}"
        );
        // While the worker still runs (its scratch directory and Pi's agent directory are
        // there) and after it is gone.
        let state = place.state.path().to_path_buf();
        let alive = files_with_the_key(&state);
        let listed = files_under(&state);
        assert!(
            listed.iter().any(|f| f.contains("transcripts")),
            "{engine:?}: {listed:?}"
        );
        drop(worker);
        let after = files_with_the_key(&state);
        assert!(
            alive.is_empty(),
            "{engine:?}: the key on disk while it ran: {alive:?}"
        );
        assert!(after.is_empty(), "{engine:?}: the key on disk: {after:?}");
        // The command's own file holds it: the workspace is the child's to write.
        assert!(
            std::fs::read_to_string(place.workspace().join("key-copy.txt"))
                .is_ok_and(|t| t.contains(KEY)),
            "{engine:?}: the command ran"
        );
    });
}

#[test]
fn a_bash_command_cannot_read_the_key_from_the_key_holders_proc_files() {
    each_engine(|engine| {
        let place = Place::new();
        // $PPID is the process that started the shell: the Rust worker, or Node.
        let command = "echo HOLDER:$(tr '\\0' ' ' < /proc/$PPID/cmdline | head -c 200); \
             echo ENVIRON:$(base64 -w0 /proc/$PPID/environ 2>&1); \
             echo ENVIRON-PLAIN:$(tr '\\0' ' ' < /proc/$PPID/environ 2>&1); \
             echo CMDLINE:$(base64 -w0 /proc/$PPID/cmdline 2>&1); \
             echo MAPS:$(head -c 300 /proc/$PPID/maps 2>&1); \
             echo MEM:$(dd if=/proc/$PPID/mem of=/dev/null bs=4096 count=1 skip=16 2>&1 | head -c 200); \
             echo TASKS:$(for t in /proc/$PPID/task/*/environ; do base64 -w0 $t 2>&1; done | head -c 2000)";
        let server = ScriptedServer::start(vec![
            Reply::tool_call("call_1", "bash", &json!({ "command": command }).to_string()),
            Reply::text("done"),
        ])
        .expect("server");
        let id = engine.run_id(56);
        let mut worker = place.worker(engine, &coder());
        worker.send(&place.start(&id, server.base_url(), coder(), "Look."));
        let settled = worker.run_settled(&id);
        assert_eq!(
            settled.status,
            RunSettledStatus::Completed,
            "{engine:?}: {settled}"
        );
        let out = support::worker::tool_results(&server.requests()[1]).join("\n");
        let holder = match engine {
            Engine::Rust => "worker --lock-fd 3",
            Engine::Pi => "workers/pi/src/main.js",
        };
        assert!(
            out.contains("HOLDER:") && out.contains(holder),
            "{engine:?}: the command ran against the key holder: {out}"
        );
        assert!(
            out.lines()
                .any(|l| l.starts_with("MEM:") && l.contains("Permission denied")),
            "{engine:?}: the memory is closed: {out}"
        );
        let leaks = leaks_in(&out);
        assert!(
            leaks.is_empty(),
            "{engine:?}: the key reached the command as {leaks:?}: {out}"
        );
    });
}

#[test]
fn a_commands_file_past_the_file_size_bound_fails_and_the_run_goes_on() {
    each_engine(|engine| {
        let place = Place::new();
        let command =
            "head -c 2000000 /dev/zero > big.bin; echo EXIT:$?; echo SIZE:$(stat -c %s big.bin)";
        let server = ScriptedServer::start(vec![
            Reply::tool_call("call_1", "bash", &json!({ "command": command }).to_string()),
            Reply::text("done"),
        ])
        .expect("server");
        let grant = with_tool_limits(
            coder(),
            json!({"processes": 4096, "memoryBytes": 4294967296_u64, "fileSizeBytes": 1048576, "openFiles": 8192}),
        );
        let id = engine.run_id(57);
        let mut worker = place.worker(engine, &grant);
        worker.send(&place.start(&id, server.base_url(), grant.clone(), "Write."));
        let settled = worker.run_settled(&id);
        assert_eq!(
            settled.status,
            RunSettledStatus::Completed,
            "{engine:?}: {settled}"
        );
        let out = support::worker::tool_results(&server.requests()[1]).join("\n");
        assert!(
            out.contains("File too large") && out.contains("SIZE:1048576"),
            "{engine:?}: the write stopped at the bound: {out}"
        );
    });
}
