//! Network grants on real worker and `bash` processes, from inside the tools as a
//! prompt-injected child would try: under `none` a raw `/dev/tcp` connect, Python, `curl`
//! and a DNS lookup all fail while the tools' own loopback works; under an allowlist the
//! listed host answers through the worker's proxy and nothing else does — another port,
//! a direct connect, a listed name that resolves to a loopback address (DNS rebinding) —
//! and each refusal reaches the broker as a `network_refused` event; the model endpoint
//! works in every mode (each run completes). "The kernel cannot" is simulated with
//! `subzero-worker worker --network off`, what the broker passes for
//! `[containment] network = "off"`.
//!
//! The listeners these tests start stand on the host's loopback, outside the tools'
//! namespace: 127.0.0.1 for the one no tool may reach, 127.0.0.2 for the allowlisted one
//! (all of 127/8 is the host's loopback).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::support::control::{hello_containment, is_hello, run_settled};
use crate::support::worker::{RunSpec, WorkerProc, coder, tool_messages};
use serde_json::{Value, json};
use subzero_protocol as p;
use subzero_testkit::{Reply, ScriptedServer};

/// A plain HTTP server on `ip`: answers every request with `body`, and counts connections.
struct Listener {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
}

impl Listener {
    fn start(ip: &str, body: &'static str) -> Listener {
        let socket = TcpListener::bind((ip, 0)).expect("a loopback listener");
        let addr = socket.local_addr().expect("its address");
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        std::thread::spawn(move || {
            for stream in socket.incoming() {
                let Ok(mut stream) = stream else { return };
                count.fetch_add(1, Ordering::SeqCst);
                let mut head = [0u8; 4096];
                let _ = stream.read(&mut head);
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        Listener { addr, accepted }
    }

    fn port(&self) -> u16 {
        self.addr.port()
    }

    fn connections(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

fn with_network(mut snapshot: Value, network: Value) -> Value {
    snapshot["network"] = network;
    snapshot
}

/// A worker whose hello says tool processes get a network namespace.
fn namespaced_worker() -> WorkerProc {
    let mut worker = WorkerProc::spawn();
    let hello = worker.expect("hello", is_hello);
    let network = hello_containment(&hello).network.expect("network");
    assert!(
        network.namespace,
        "these tests need network namespaces: {network:#?}"
    );
    worker
}

/// Runs one `bash` call of `command` and a final answer; the command's output.
fn run_bash(
    worker: &mut WorkerProc,
    run_id: &str,
    snapshot: Value,
    workspace: &Path,
    command: &str,
) -> String {
    let state = tempfile::tempdir().expect("tempdir");
    let transcript = state.path().join("t.jsonl");
    let args = json!({ "command": command }).to_string();
    let model = ScriptedServer::start(vec![
        Reply::tool_calls(&[("c1", "bash", args.as_str())]),
        Reply::text("done"),
    ])
    .expect("model server");
    worker
        .send(&RunSpec::new(run_id, model.base_url(), snapshot, workspace, &transcript).message());
    let settled = run_settled(&worker.settled(run_id));
    assert_eq!(
        settled.status,
        p::RunSettledStatus::Completed,
        "the model endpoint is reached: {settled:#?}"
    );
    let requests = model.requests();
    assert_eq!(requests.len(), 2, "one tool turn and the answer");
    tool_messages(&requests[1].json().expect("json")).remove(0)
}

fn python() -> String {
    let out = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("these tests need python3");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn has_curl() -> bool {
    std::process::Command::new("curl")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// `name=<exit code>` lines for each probe of `target` (`host:port`).
fn probes(target: SocketAddr, python: &str, curl: bool) -> String {
    let (host, port) = (target.ip(), target.port());
    let mut command = format!(
        "(exec 3<>/dev/tcp/{host}/{port}) 2>/dev/null; echo \"devtcp=$?\"\n\
         {python} -c 'import urllib.request,sys; urllib.request.urlopen(\"http://{host}:{port}/\", timeout=5)' 2>/dev/null; echo \"python=$?\"\n\
         {python} -c 'import socket; socket.getaddrinfo(\"example.com\", 80)' 2>/dev/null; echo \"dns=$?\"\n"
    );
    if curl {
        command.push_str(&format!(
            "curl -sS --max-time 5 --noproxy '*' http://{host}:{port}/ >/dev/null 2>&1; echo \"curl=$?\"\n"
        ));
    }
    command
}

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

/// A broker whose config adds a `fetcher` (an allowlist of `127.0.0.2:port`) and an
/// `opened` template (`network = "open"`), optionally with namespaces turned off.
fn broker_env(script: Vec<Reply>, port: u16, off: bool) -> crate::support::mcp::Env {
    let env = crate::support::mcp::Env::new(script);
    let mut config = std::fs::read_to_string(env.config()).expect("config");
    config.push_str(&format!(
        "\n[templates.fetcher]\ndescription = \"Fetches\"\ninstructions = \"Fetch.\"\ntools = [\"bash\"]\nnetwork = [\"127.0.0.2:{port}\"]\n\
         \n[templates.opened]\ndescription = \"Open\"\ninstructions = \"Go.\"\ntools = [\"read\"]\nnetwork = \"open\"\n"
    ));
    if off {
        config.push_str("\n[containment]\nnetwork = \"off\"\n");
    }
    std::fs::write(env.config(), config).expect("config");
    env
}

fn network_support(info: &p::Info) -> &p::NetworkSupport {
    info.enforcement
        .containment
        .as_ref()
        .and_then(|c| c.network.as_ref())
        .unwrap_or_else(|| panic!("no network support: {info:#?}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_grant_other_than_open_is_refused_at_spawn_where_namespaces_are_off() {
    use crate::support::mcp::*;
    let env = broker_env(vec![Reply::text("done")], 9, true);
    let mut reaper = crate::support::faults::Reaper::new(env.dir.path());
    let s = env.broker("broker").await;
    reaper.broker(s.pid());

    let info = broker_info(&s).await;
    let support = network_support(&info);
    assert!(!support.namespace, "{support:#?}");
    assert!(
        support.summary.contains("network = \"off\""),
        "{support:#?}"
    );
    let coder = template_named(&info, "coder")
        .network
        .as_ref()
        .expect("coder's grant");
    assert_eq!(coder.mode, p::NetworkMode::None, "the built-in default");
    let fetcher = template_named(&info, "fetcher")
        .network
        .as_ref()
        .expect("grant");
    assert_eq!(fetcher.mode, p::NetworkMode::Allowlist);
    assert_eq!(
        fetcher
            .hosts
            .as_ref()
            .map(|h| h.iter().map(|h| h.to_string()).collect::<Vec<_>>()),
        Some(vec!["127.0.0.2:9".to_owned()])
    );

    for template in ["coder", "researcher", "fetcher"] {
        let code = err(
            &s,
            "subzero_spawn",
            json!({"prompt": "go", "templateId": template, "model": env.model()}),
        )
        .await;
        assert_eq!(code, "unsupported_grant", "{template}");
    }
    assert!(env.server.requests().is_empty(), "no model call was made");
    // A spawn cannot widen the template's grant: there is no argument for it.
    let code = err(
        &s,
        "subzero_spawn",
        json!({"prompt": "go", "templateId": "coder", "model": env.model(), "network": "open"}),
    )
    .await;
    assert_eq!(code, "invalid_request");

    let (child, _run) = spawn(&s, &env, "opened", "go").await;
    let snap = settled(&s, &child, std::time::Duration::from_secs(20)).await;
    let snap = get(&s, json!({"childId": snap.child_id, "containment": true})).await;
    let network = snap
        .containment
        .as_ref()
        .and_then(|c| c.network.as_ref())
        .expect("receipt");
    assert_eq!(network.mode, p::NetworkMode::Open, "{network:#?}");
    s.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_connection_is_an_event_the_parent_sees_and_the_receipt_names_the_proxy() {
    use crate::support::mcp::*;
    let listed = Listener::start("127.0.0.2", "listed-answer");
    let other = Listener::start("127.0.0.2", "other");
    let command = format!(
        "curl -sS --max-time 5 http://127.0.0.2:{}/ ; echo; {} -c 'import urllib.request as u; u.urlopen(\"http://127.0.0.2:{}/?q=s3cr3t\", timeout=5)' 2>&1 | tail -1",
        listed.port(),
        python(),
        other.port()
    );
    let args = json!({ "command": command }).to_string();
    let env = broker_env(
        vec![
            Reply::tool_calls(&[("c1", "bash", args.as_str())]),
            Reply::text("done"),
        ],
        listed.port(),
        false,
    );
    let mut reaper = crate::support::faults::Reaper::new(env.dir.path());
    let s = env.broker("broker").await;
    reaper.broker(s.pid());
    assert!(network_support(&broker_info(&s).await).namespace);

    let (child, _run) = spawn(&s, &env, "fetcher", "fetch").await;
    settled(&s, &child, std::time::Duration::from_secs(30)).await;
    let snap = get(&s, json!({"childId": child, "containment": true})).await;
    let network = snap
        .containment
        .as_ref()
        .and_then(|c| c.network.as_ref())
        .expect("receipt");
    assert_eq!(network.mode, p::NetworkMode::Allowlist, "{network:#?}");
    assert!(network.enforced, "{network:#?}");
    assert!(network.summary.contains("admits 1 host"), "{network:#?}");
    let refused: Vec<(String, u64)> = snap
        .events
        .iter()
        .filter_map(|e| match e {
            p::ChildEvent::NetworkRefused { host, port, .. } => {
                Some((host.to_string(), port.get()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        refused,
        vec![("127.0.0.2".to_owned(), u64::from(other.port()))],
        "{snap:#?}"
    );
    assert_eq!(other.connections(), 0);
    let requests = env.server.requests();
    let results = tool_messages(&requests[1].json().expect("json"));
    if has_curl() {
        assert!(results[0].contains("listed-answer"), "{results:?}");
    }
    assert!(results[0].contains("403"), "{results:?}");
    let events = serde_json::to_string(&snap.events).expect("json");
    assert!(
        !events.contains("s3cr3t"),
        "no event carries the URL: {events}"
    );
    s.close().await.expect("close");
}

/// As `nobody` (as the test's own user when that is not root) the workers have no
/// `CAP_NET_ADMIN`: the tools' namespace is made in a user namespace of its own. In both
/// process modes — a user + PID namespace, and the subreaper fallback — a coder's `bash`
/// reaches nothing outside while its model is reached.
#[tokio::test(flavor = "multi_thread")]
async fn as_nobody_a_coders_bash_reaches_no_network_in_either_process_mode() {
    use crate::support::containment::{Case, NOBODY};
    use crate::support::mcp::*;
    let user = nix::unistd::geteuid().is_root().then_some(NOBODY);
    for subreaper in [false, true] {
        let outside = Listener::start("127.0.0.1", "outside");
        let command = format!(
            "echo \"uid=$(id -u)\"; (exec 3<>/dev/tcp/127.0.0.1/{}) 2>/dev/null; echo \"devtcp=$?\"; getent hosts example.com >/dev/null; echo \"dns=$?\"",
            outside.port()
        );
        let args = json!({ "command": command }).to_string();
        let env = Env::new(vec![
            Reply::tool_calls(&[("c1", "bash", args.as_str())]),
            Reply::text("done"),
        ]);
        if subreaper {
            let config = std::fs::read_to_string(env.config()).expect("config");
            std::fs::write(
                env.config(),
                format!("{config}\n[containment]\nprocess = \"subreaper\"\n"),
            )
            .expect("config");
        }
        let case = Case::with_user(env, user);
        let mut reaper = crate::support::faults::Reaper::new(case.env.dir.path());
        let s = case.broker("broker").await;
        reaper.broker(s.pid());
        let (child, _) = spawn(&s, &case.env, "coder", "probe").await;
        let snap = settled(&s, &child, std::time::Duration::from_secs(60)).await;
        assert_eq!(
            last_status(&snap),
            Some(p::TerminalRunStatus::Completed),
            "{snap:#?}"
        );
        let seen = tool_messages(&case.env.server.requests()[1].json().expect("json")).remove(0);
        let uid = user.map_or_else(|| nix::unistd::geteuid().as_raw(), |u| u.uid);
        assert!(seen.contains(&format!("uid={uid}")), "{seen}");
        assert!(seen.contains("devtcp=1"), "subreaper={subreaper}: {seen}");
        assert!(seen.contains("dns=2"), "subreaper={subreaper}: {seen}");
        assert_eq!(outside.connections(), 0, "subreaper={subreaper}");
        s.close().await.expect("close");
    }
}

/// A package index on the host's loopback, served by Python's `http.server` from a
/// directory: a PEP 503 page and a wheel for `demo-pkg` 1.0, and an npm packument for `demo`.
struct PackageIndex {
    server: std::process::Child,
    port: u16,
    _dir: tempfile::TempDir,
}

const INDEX_FILES: &str = r#"
import json, os, sys, zipfile
root = sys.argv[1]
wheel = "demo_pkg-1.0-py3-none-any.whl"
os.makedirs(os.path.join(root, "simple", "demo-pkg"))
with zipfile.ZipFile(os.path.join(root, wheel), "w") as z:
    z.writestr("demo_pkg/__init__.py", "")
    z.writestr("demo_pkg-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0\n")
    z.writestr("demo_pkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    z.writestr("demo_pkg-1.0.dist-info/RECORD", "")
with open(os.path.join(root, "simple", "demo-pkg", "index.html"), "w") as f:
    f.write('<html><body><a href="/%s">%s</a></body></html>' % (wheel, wheel))
os.makedirs(os.path.join(root, "index", "de", "mo"))
with open(os.path.join(root, "index", "config.json"), "w") as f:
    json.dump({"dl": "http://127.0.0.2/dl/{crate}/{version}/download"}, f)
with open(os.path.join(root, "index", "de", "mo", "demo"), "w") as f:
    f.write(json.dumps({"name": "demo", "vers": "1.0.0", "deps": [], "cksum": "0" * 64,
                        "features": {}, "yanked": False}) + "\n")
with open(os.path.join(root, "demo"), "w") as f:
    json.dump({"name": "demo", "dist-tags": {"latest": "1.0.0"},
               "versions": {"1.0.0": {"name": "demo", "version": "1.0.0",
                                      "dist": {"tarball": "http://127.0.0.2/demo-1.0.0.tgz"}}}}, f)
"#;

impl PackageIndex {
    fn start(python: &str) -> PackageIndex {
        use std::io::BufRead;
        let dir = tempfile::tempdir().expect("tempdir");
        let made = std::process::Command::new(python)
            .args(["-c", INDEX_FILES])
            .arg(dir.path())
            .status()
            .expect("python");
        assert!(made.success(), "the index files were written");
        let mut server = std::process::Command::new(python)
            .args([
                "-u",
                "-m",
                "http.server",
                "0",
                "--bind",
                "127.0.0.2",
                "--directory",
            ])
            .arg(dir.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("http.server");
        let mut line = String::new();
        let stdout = server.stdout.take().expect("stdout");
        std::io::BufReader::new(stdout)
            .read_line(&mut line)
            .expect("its first line");
        let port = line
            .split_whitespace()
            .skip_while(|w| *w != "port")
            .nth(1)
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no port in {line:?}"));
        PackageIndex {
            server,
            port,
            _dir: dir,
        }
    }
}

impl Drop for PackageIndex {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

#[test]
fn package_managers_work_through_the_proxy_with_their_registry_listed() {
    let ws = tempfile::tempdir().expect("tempdir");
    let python = python();
    let index = PackageIndex::start(&python);
    let port = index.port;
    let npm = std::process::Command::new("npm")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let mut command = format!(
        "{python} -m pip download --no-deps --no-cache-dir --disable-pip-version-check -q \
         --index-url http://127.0.0.2:{port}/simple/ -d \"$TMPDIR/dl\" demo-pkg==1.0 >/dev/null 2>&1; echo \"pip=$?\"; \
         ls \"$TMPDIR/dl\"\n"
    );
    if npm {
        command.push_str(&format!(
            "npm view demo version --registry http://127.0.0.2:{port}/ --cache \"$TMPDIR/npm\" --no-update-notifier 2>&1 | tail -1; echo \"npm=$?\"\n"
        ));
    }
    if let Some(cargo) = cargo() {
        // Resolving a lockfile reads the registry's index over HTTP (nothing is downloaded).
        std::fs::write(
            ws.path().join("Cargo.toml"),
            "[package]\nname = \"probe\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\ndemo = { version = \"1\", registry = \"local\" }\n",
        )
        .expect("manifest");
        std::fs::create_dir_all(ws.path().join("src")).expect("src");
        std::fs::write(ws.path().join("src/lib.rs"), "").expect("lib");
        command.push_str(&format!(
            "CARGO_HOME=\"$TMPDIR/cargo\" CARGO_REGISTRIES_LOCAL_INDEX=sparse+http://127.0.0.2:{port}/index/ {cargo} generate-lockfile -q >\"$TMPDIR/cargo.log\" 2>&1; echo \"cargo=$?\"; grep -c 'name = \"demo\"' Cargo.lock; tail -3 \"$TMPDIR/cargo.log\"\n",
            cargo = cargo.display()
        ));
    }
    let mut worker = namespaced_worker();
    let out = run_bash(
        &mut worker,
        "run_0000000000000000000000NT04",
        with_network(
            coder(),
            json!({"mode": "allowlist", "hosts": [format!("127.0.0.2:{port}")]}),
        ),
        ws.path(),
        &command,
    );
    assert!(
        out.contains("pip=0") && out.contains("demo_pkg-1.0-py3-none-any.whl"),
        "{out}"
    );
    if npm {
        assert!(out.contains("1.0.0\nnpm=0"), "{out}");
    }
    if cargo().is_some() {
        assert!(out.contains("cargo=0\n1"), "{out}");
    }
}

/// The real `cargo` binary of the toolchain (not rustup's proxy, which needs its home).
fn cargo() -> Option<std::path::PathBuf> {
    let out = std::process::Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .ok()?;
    let cargo = Path::new(String::from_utf8_lossy(&out.stdout).trim()).join("bin/cargo");
    cargo.exists().then_some(cargo)
}
