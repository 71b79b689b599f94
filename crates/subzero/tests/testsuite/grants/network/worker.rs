//! The grants on a bare worker, as the broker starts it.

use serde_json::{Value, json};
use subzero_protocol as p;
use subzero_testkit::{Reply, ScriptedServer};

use super::*;
use crate::support::control::run_settled;
use crate::support::worker::{RunSpec, coder};

#[test]
fn under_none_every_way_out_fails_and_the_tools_own_loopback_works() {
    let ws = tempfile::tempdir().expect("tempdir");
    let outside = Listener::start("127.0.0.1", "outside");
    let mut worker = namespaced_worker();
    let python = python();
    let curl = has_curl();
    let command = format!(
        "{}\n\
         {python} -c 'import socket; s=socket.socket(); s.bind((\"127.0.0.1\", 8765)); s.listen(); c=socket.create_connection((\"127.0.0.1\", 8765)); print(\"own-loopback=ok\")'",
        probes(outside.addr, &python, curl)
    );
    let out = run_bash(
        &mut worker,
        "run_0000000000000000000000NT01",
        with_network(coder(), json!({"mode": "none"})),
        ws.path(),
        &command,
    );
    for step in ["devtcp=1", "python=1", "dns=1"] {
        assert!(out.contains(step), "{step} expected in {out}");
    }
    if curl {
        assert!(out.contains("curl=7"), "curl cannot connect: {out}");
    }
    assert!(out.contains("own-loopback=ok"), "{out}");
    assert_eq!(
        outside.connections(),
        0,
        "nothing reached the host's loopback"
    );
}

/// What a tool tries through the proxy it was given: the listed host (plain HTTP and a
/// CONNECT tunnel), the same address on another port, and `localhost` — listed by name,
/// but it resolves to 127.0.0.1, which is not.
const THROUGH_THE_PROXY: &str = r#"
import os, socket, urllib.request
def get(url):
    try:
        return urllib.request.urlopen(url, timeout=5).read().decode()
    except Exception as e:
        return 'refused:' + str(getattr(e, 'code', e))
def tunnel(host, port):
    s = socket.create_connection(('127.0.0.1', 3128))
    s.sendall(b'CONNECT %s:%d HTTP/1.1\r\n\r\n' % (host.encode(), port))
    answer = s.recv(4096).split(b'\r\n')[0].decode()
    if ' 200 ' not in answer:
        return 'tunnel:' + answer
    s.sendall(b'GET / HTTP/1.1\r\nHost: x\r\n\r\n')
    reply = b''
    while chunk := s.recv(4096):
        reply += chunk
    return 'tunnel:' + reply.decode().split('\r\n\r\n')[-1]
print('proxy-env=' + os.environ.get('HTTP_PROXY', ''))
print('listed=' + get('http://127.0.0.2:LISTED/path?secret=s3cr3t'))
print('other-port=' + get('http://127.0.0.2:OTHER/'))
print(tunnel('127.0.0.2', LISTED))
print('rebound=' + tunnel('localhost', LISTED))
"#;

#[test]
fn under_an_allowlist_only_the_listed_host_answers_and_each_refusal_is_an_event() {
    let ws = tempfile::tempdir().expect("tempdir");
    let listed = Listener::start("127.0.0.2", "listed-answer");
    let other_port = Listener::start("127.0.0.2", "other-port");
    let outside = Listener::start("127.0.0.1", "outside");
    let mut worker = namespaced_worker();
    let python = python();
    let (listed_port, other) = (listed.port(), other_port.port());
    let grant = json!({
        "mode": "allowlist",
        "hosts": [format!("127.0.0.2:{listed_port}"), "localhost"],
    });
    let script = THROUGH_THE_PROXY
        .replace("LISTED", &listed_port.to_string())
        .replace("OTHER", &other.to_string());
    let command = format!(
        "{python} - <<'EOF'\n{script}EOF\n{}",
        probes(outside.addr, &python, false)
    );
    let out = run_bash(
        &mut worker,
        "run_0000000000000000000000NT02",
        with_network(coder(), grant),
        ws.path(),
        &command,
    );
    assert!(out.contains("proxy-env=http://127.0.0.1:3128"), "{out}");
    assert!(out.contains("listed=listed-answer"), "{out}");
    assert!(out.contains("other-port=refused:403"), "{out}");
    assert!(out.contains("tunnel:listed-answer"), "{out}");
    assert!(out.contains("rebound=tunnel:HTTP/1.1 403"), "{out}");
    for step in ["devtcp=1", "python=1", "dns=1"] {
        assert!(
            out.contains(step),
            "a direct way out fails too: {step} expected in {out}"
        );
    }
    assert_eq!(other_port.connections(), 0, "{out}");
    assert_eq!(outside.connections(), 0, "{out}");
    assert_eq!(listed.connections(), 2, "{out}");
    let stdout = worker.stdout_text();
    let refusals: Vec<(String, u64)> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["event"]["kind"] == "network_refused")
        .map(|v| {
            (
                v["event"]["host"].as_str().unwrap_or("").to_owned(),
                v["event"]["port"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert!(
        refusals.contains(&("127.0.0.2".to_owned(), u64::from(other))),
        "{refusals:?}"
    );
    assert!(
        refusals.contains(&("localhost".to_owned(), u64::from(listed_port))),
        "{refusals:?}"
    );
    assert!(!stdout.contains("s3cr3t"), "no event carries a URL");
}

#[test]
fn a_grant_that_needs_a_namespace_fails_typed_where_the_worker_cannot_make_one() {
    let ws = tempfile::tempdir().expect("tempdir");
    let mut worker = WorkerProc::spawn_with_args(&["--network", "off"]);
    let hello = worker.expect("hello", is_hello);
    let network = hello_containment(&hello).network.expect("network");
    assert!(!network.namespace, "{network:#?}");
    assert!(
        network.summary.as_str().starts_with("none: turned off"),
        "{network:#?}"
    );
    let state = tempfile::tempdir().expect("tempdir");
    let model = ScriptedServer::start(vec![Reply::text("never asked")]).expect("model");
    let run = "run_0000000000000000000000NT03";
    worker.send(
        &RunSpec::new(
            run,
            model.base_url(),
            with_network(coder(), json!({"mode": "none"})),
            ws.path(),
            &state.path().join("t.jsonl"),
        )
        .message(),
    );
    let settled = run_settled(&worker.settled(run));
    assert_eq!(settled.status, p::RunSettledStatus::Failed, "{settled:#?}");
    let error = settled.error.expect("an error");
    assert_eq!(error.code, p::ErrorCode::UnsupportedGrant, "{error:#?}");
    assert!(
        error.message.as_str().contains("network namespace"),
        "{error:#?}"
    );
    assert!(model.requests().is_empty(), "no model call");
}
