//! A coder's `bash` runs as the broker's OS user, so everything `/proc` shows a process of
//! that user is open to it. The model key must not be readable there in any encoding: not
//! in the broker's or the worker's `environ`, `task/*/environ`, `cmdline` or `mem`, and not
//! in bash's own environment. The broker drops the key from its environment block at
//! startup and both broker and worker are non-dumpable (their `/proc` files are root's).

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::support::mcp::*;
use crate::support::worker::{Shown, snapshot_of};
use serde_json::{Value, json};
use subzero_protocol::{Info, TerminalRunStatus};
use subzero_testkit::Reply;
use subzero_testkit::mcp_client::{BrokerCommand, McpSession, RunAs};

/// The variable the harness's config names for the credential.
const VAR: &str = "SUBZERO_TEST_KEY";
/// `nobody`: the unprivileged user the broker runs as when the tests run as root.
const NOBODY: RunAs = RunAs {
    uid: 65534,
    gid: 65534,
};

/// A key no earlier run left anywhere, with characters that change under URL encoding.
fn fresh_key() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("sk-envleak-{nanos:x}{:08x}+/=Q", std::process::id())
}

/// Every bash route a child could take to the key. Each prints a marker computed by the
/// shell (`ran-42-…`), so its arrival proves the command ran rather than echoing its text.
fn routes() -> Vec<(&'static str, String)> {
    let prelude = format!(
        "W=$PPID; B=$(grep '^PPid:' /proc/$W/status | tr -dc 0-9); V={VAR}; echo \"ran-$((6*7))-$R\";"
    );
    // Readable writable mappings of a process, concatenated (bounded per mapping).
    let memory = "mem() { grep ' rw-p ' /proc/$1/maps 2>/dev/null | while read -r range perms rest; do s=$((16#${range%-*})); e=$((16#${range#*-})); [ $((e-s)) -le 268435456 ] || continue; dd if=/proc/$1/mem bs=4096 skip=$((s/4096)) count=$(((e-s)/4096)) status=none 2>/dev/null; done; };";
    let line = "tr '\\0' '\\n' < /proc/$B/environ | grep -a \"^$V=\"";
    let scripts: Vec<(&str, String)> = vec![
        (
            "broker-environ",
            format!(
                "echo \"broker-pid=$B\"; {line}; {line} | base64 -w0; echo; head -c 24000 /proc/$B/environ | base64 -w0"
            ),
        ),
        (
            "worker-environ",
            "tr '\\0' '\\n' < /proc/$W/environ; base64 -w0 /proc/$W/environ; echo; for f in /proc/$W/task/*/environ; do base64 -w0 \"$f\"; echo; done".to_owned(),
        ),
        ("rev", format!("{line} | rev")),
        ("od", format!("{line} | od -An -tx1")),
        (
            "xxd",
            format!("if command -v xxd >/dev/null; then {line} | xxd -p; else echo no-xxd; fi"),
        ),
        (
            "cmdline",
            "base64 -w0 /proc/$B/cmdline; echo; base64 -w0 /proc/$W/cmdline".to_owned(),
        ),
        (
            "task-environ",
            "for f in /proc/$B/task/*/environ; do tr '\\0' '\\n' < \"$f\" | grep -a \"^$V=\" | base64 -w0; echo; done | sort -u".to_owned(),
        ),
        (
            "mem",
            format!(
                "{memory} cat /proc/$B/maps > /dev/null; for p in $B $W; do mem $p | grep -a -o 'sk-envleak[[:graph:]]*' | sort -u | base64 -w0; echo; done"
            ),
        ),
        (
            "strings",
            format!(
                "{memory} if command -v strings >/dev/null; then for p in $B $W; do mem $p | strings -n 16 | grep -a sk-envleak | sort -u | rev; done; else echo no-strings; fi"
            ),
        ),
        (
            "own-env",
            "env | base64 -w0; echo; printenv | rev".to_owned(),
        ),
        (
            "owners",
            "r() { if [ -r \"$1\" ]; then echo yes; else echo no; fi; }; echo \"environ-readable-$(r /proc/$B/environ)-$(r /proc/$W/environ)\"".to_owned(),
        ),
    ];
    scripts
        .into_iter()
        .map(|(route, script)| (route, format!("R={route}; {prelude} {script}")))
        .collect()
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for group in bytes.chunks(3) {
        let n = group
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..=group.len() {
            out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
        }
        for _ in group.len()..3 {
            out.push('=');
        }
    }
    out
}

/// Every form of `key` a leak could take: plain; base64 (and base64url) of the key and
/// of `VAR=key` at each of the three alignments a surrounding stream may give it;
/// reversed; hex in both cases, with and without spaces; URL-encoded.
fn encodings(key: &str) -> Vec<(String, String)> {
    let mut forms = vec![("plain".to_owned(), key.to_owned())];
    for (what, text) in [("key", key.to_owned()), ("entry", format!("{VAR}={key}"))] {
        let bytes = text.as_bytes();
        for skip in 0..3 {
            // Skipping `skip` bytes and keeping whole 3-byte groups gives exactly the text
            // a stream's base64 holds when the secret starts at that alignment.
            let whole = (bytes.len() - skip) / 3 * 3;
            let b64 = base64(&bytes[skip..skip + whole]);
            forms.push((
                format!("base64url of {what} +{skip}"),
                b64.replace('+', "-").replace('/', "_"),
            ));
            forms.push((format!("base64 of {what} +{skip}"), b64));
        }
        forms.push((format!("reversed {what}"), text.chars().rev().collect()));
        let hex: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
        forms.push((format!("hex of {what}"), hex.concat()));
        forms.push((format!("HEX of {what}"), hex.concat().to_uppercase()));
        forms.push((format!("spaced hex of {what}"), hex.join(" ")));
        forms.push((
            format!("spaced HEX of {what}"),
            hex.join(" ").to_uppercase(),
        ));
    }
    let url: String = key
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect();
    forms.push(("url-encoded".to_owned(), url.clone()));
    forms.push(("url-encoded lower".to_owned(), url.to_lowercase()));
    // A key too short for whole base64 groups gives an empty form, which would match anything.
    forms.retain(|(_, pattern)| !pattern.is_empty());
    forms
}

#[test]
fn the_searched_encodings_are_the_ones_the_tools_print() {
    // `printf Man | base64`, `printf Ma | base64`, `printf M | base64`.
    assert_eq!(base64(b"Man"), "TWFu");
    assert_eq!(base64(b"Ma"), "TWE=");
    assert_eq!(base64(b"M"), "TQ==");
    let forms: BTreeMap<String, String> = encodings("k+/").into_iter().collect();
    assert_eq!(forms["url-encoded"], "k%2B%2F");
    assert_eq!(forms["spaced hex of key"], "6b 2b 2f");
    assert_eq!(forms["reversed key"], "/+k");
}

/// What came back from the child: (where, text), each text also with whitespace removed.
struct Haystacks(Vec<(String, String)>);

impl Haystacks {
    fn add(&mut self, place: String, text: String) {
        // Wrapped base64 and od/xxd output span lines; JSON escapes line breaks.
        let joined: String = text
            .replace("\\n", "")
            .replace("\\r", "")
            .replace("\\t", "")
            .split_whitespace()
            .collect();
        self.0.push((place.clone(), joined));
        self.0.push((place, text));
    }

    fn add_json(&mut self, place: String, value: &Value) {
        let mut strings = Vec::new();
        collect_strings(value, &mut strings);
        self.add(place.clone(), strings.join("\n"));
        self.add(place, value.to_string());
    }

    /// Each form of the key that appears, with where.
    fn leaks(&self, forms: &[(String, String)]) -> BTreeSet<String> {
        let mut found = BTreeSet::new();
        for (place, text) in &self.0 {
            for (form, pattern) in forms {
                if text.contains(pattern.as_str()) {
                    found.insert(format!("{form} in {place}"));
                }
            }
        }
        found
    }

    fn contains(&self, needle: &str) -> bool {
        self.0.iter().any(|(_, text)| text.contains(needle))
    }
}

fn collect_strings(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| collect_strings(v, out)),
        Value::Object(map) => map.values().for_each(|v| collect_strings(v, out)),
        _ => {}
    }
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files_under(&path, out);
        } else {
            out.push(path);
        }
    }
}

fn chown_tree(path: &Path, user: RunAs) {
    std::os::unix::fs::chown(path, Some(user.uid), Some(user.gid))
        .unwrap_or_else(|e| panic!("chown {}: {e}", path.display()));
    if path.is_dir() {
        for entry in std::fs::read_dir(path).expect("read dir").flatten() {
            chown_tree(&entry.path(), user);
        }
    }
}

/// The `subzero` binary, or a copy of it other users can run when some directory above
/// it (e.g. a home directory) is closed to them.
fn binary_for_others(spare: &Path) -> PathBuf {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_subzero"));
    let open = exe
        .ancestors()
        .all(|p| std::fs::metadata(p).is_ok_and(|m| m.mode() & 0o001 != 0));
    if open {
        return exe;
    }
    // The broker starts its workers and lock holders from the binaries next to its own.
    std::fs::set_permissions(spare, std::fs::Permissions::from_mode(0o755)).expect("chmod dir");
    for name in ["subzero", "subzero-worker", "subzero-hold"] {
        let copy = spare.join(name);
        std::fs::copy(exe.with_file_name(name), &copy).expect("copy a subzero binary");
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).expect("chmod exe");
    }
    spare.join("subzero")
}

fn with_key(mut cmd: BrokerCommand, key: &str) -> BrokerCommand {
    cmd.env.retain(|(name, _)| name != VAR);
    cmd.env.push((OsString::from(VAR), OsString::from(key)));
    cmd
}

/// Every event of `child`, page by page.
async fn all_events(s: &McpSession, child: &str) -> Vec<Value> {
    let mut pages = Vec::new();
    let mut cursor = 0;
    for _ in 0..100 {
        let page = ok(
            s,
            "subzero_get",
            json!({"childId": child, "cursor": cursor, "eventLimit": 50}),
        )
        .await;
        let typed = snapshot_of(&page);
        let (next, empty) = (typed.next_cursor, typed.events.is_empty());
        pages.push(page);
        if empty || next == cursor {
            break;
        }
        cursor = next;
    }
    pages
}

#[tokio::test(flavor = "multi_thread")]
async fn a_coders_bash_cannot_read_the_key_in_any_encoding_from_processes_of_its_user() {
    let key = fresh_key();
    let routes = routes();
    let mut script: Vec<Reply> = routes
        .iter()
        .enumerate()
        .map(|(n, (_, command))| {
            Reply::tool_call(
                &format!("call_{n}"),
                "bash",
                &json!({ "command": command }).to_string(),
            )
        })
        .collect();
    script.push(Reply::text("done probing"));
    let env = Env::new(script);
    // In a PID namespace (the default) the worker's bash cannot even see the broker
    // (`containment/pidns.rs`); these routes need it visible, so this test runs the
    // subreaper fallback, where non-dumpability and the scrub are what protect the key.
    let config = std::fs::read_to_string(env.config()).expect("config");
    std::fs::write(
        env.config(),
        format!("{config}\n[containment]\nprocess = \"subreaper\"\n"),
    )
    .expect("config");
    let spare = tempfile::tempdir().expect("spare dir");
    // As root, /proc hides nothing: run the broker as an unprivileged user.
    let user = nix::unistd::geteuid().is_root().then_some(NOBODY);
    let exe = match user {
        Some(user) => {
            chown_tree(env.dir.path(), user);
            binary_for_others(spare.path())
        }
        None => PathBuf::from(env!("CARGO_BIN_EXE_subzero")),
    };
    let mut cmd = with_key(env.command("broker"), &key);
    cmd.exe = exe;
    let s = McpSession::start_as(&cmd, user)
        .await
        .expect("broker starts");
    let broker_pid = s.pid().expect("broker pid");
    let (child, _) = spawn(&s, &env, "coder", "probe the environment").await;
    let snap = snapshot_of(&settle(&s, &child, Duration::from_secs(120)).await);
    assert_eq!(snap.last().status, TerminalRunStatus::Completed, "{snap:#}");

    let mut haystacks = Haystacks(Vec::new());
    for (n, request) in env.server.requests().iter().enumerate() {
        match request.json() {
            Some(body) => haystacks.add_json(format!("model request {n}"), &body),
            None => haystacks.add(format!("model request {n}"), request.body.clone()),
        }
    }
    for (n, page) in all_events(&s, &child).await.iter().enumerate() {
        haystacks.add_json(format!("subzero_get page {n}"), page);
    }
    s.close().await.expect("close");
    let mut files = Vec::new();
    files_under(env.dir.path(), &mut files);
    for file in &files {
        if let Ok(bytes) = std::fs::read(file) {
            haystacks.add(
                file.display().to_string(),
                String::from_utf8_lossy(&bytes).into_owned(),
            );
        }
    }

    // Every route ran, and the routes reached the broker itself.
    for (route, _) in &routes {
        assert!(
            haystacks.contains(&format!("ran-42-{route}")),
            "bash route {route} never reported back"
        );
    }
    assert!(
        haystacks.contains(&format!("broker-pid={broker_pid}")),
        "bash did not find the broker (pid {broker_pid}) as its worker's parent"
    );
    let leaks = haystacks.leaks(&encodings(&key));
    assert!(
        leaks.is_empty(),
        "a coder's bash read the key ({} findings), e.g.:\n  {}",
        leaks.len(),
        leaks
            .iter()
            .take(25)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n  ")
    );
    // Non-dumpable: the broker's and the worker's /proc files belong to root, so the tool
    // cannot open them (it asks `access`: inside its own user namespace root's files show
    // as `nobody`, so their owner alone would not say).
    assert!(
        haystacks.contains("environ-readable-no-no"),
        "the broker's or the worker's /proc/<pid>/environ is readable by a tool"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_broker_drops_the_key_from_its_environ_and_still_uses_it() {
    let key = fresh_key();
    let env = Env::new(vec![Reply::text("hello")]);
    let s = McpSession::start(&with_key(env.command("broker"), &key))
        .await
        .expect("broker starts");
    let pid = s.pid().expect("broker pid");

    if let Some(environ) = environ_of(pid) {
        let entries: Vec<&[u8]> = environ.split(|b| *b == 0).collect();
        let entry = format!("{VAR}={key}");
        assert!(
            !environ.windows(key.len()).any(|w| w == key.as_bytes()),
            "the key is still in /proc/{pid}/environ"
        );
        assert!(!entries.contains(&entry.as_bytes()));
        // Only the secret went: the block is the broker's and the rest is intact.
        assert!(entries.contains(&&b"SUBZERO_LOG=debug"[..]), "{entries:?}");
    }

    let info: Shown<Info> = Shown::new(&ok(&s, "subzero_info", json!({})).await);
    let refs: BTreeMap<String, bool> = info
        .credential_refs
        .iter()
        .map(|c| (c.name.to_string(), c.available))
        .collect();
    assert_eq!(refs.get(CRED), Some(&true), "{info:#}");
    let (child, _) = spawn(&s, &env, "researcher", "say hello").await;
    let snap = snapshot_of(&settle(&s, &child, Duration::from_secs(30)).await);
    assert_eq!(snap.last().status, TerminalRunStatus::Completed, "{snap:#}");
    let requests = env.server.requests();
    let bearer = format!("Bearer {key}");
    assert_eq!(
        requests.last().and_then(|r| r.header("authorization")),
        Some(bearer.as_str()),
        "the model was not called with the captured key"
    );
    s.close().await.expect("close");
}

/// Reads `/proc/<pid>/environ` of a broker started as this user. `None` when it is closed
/// to us, which only a non-root test sees (a non-dumpable process's environ is root's).
fn environ_of(pid: u32) -> Option<Vec<u8>> {
    match std::fs::read(format!("/proc/{pid}/environ")) {
        Ok(environ) => Some(environ),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            assert!(!nix::unistd::geteuid().is_root());
            None
        }
        Err(e) => panic!("cannot read /proc/{pid}/environ: {e}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_mcp_env_reference_is_served_from_the_value_captured_before_the_scrub() {
    const TOKEN_VAR: &str = "SUBZERO_TEST_MCP_TOKEN";
    let token = format!("mcp-{}", fresh_key());
    let env = Env::new(vec![Reply::text("hello")]);
    let mut config = std::fs::read_to_string(env.config()).expect("config");
    config.push_str(&format!(
        "\n[templates.probe]\ndescription = \"probe\"\ninstructions = \"probe\"\ntools = [\"read\"]\n\n[[templates.probe.mcp_servers]]\nname = \"tokens\"\ncommand = \"true\"\nenv = {{ TOKEN = \"env:{TOKEN_VAR}\" }}\nallowed_tools = [\"list\"]\n"
    ));
    std::fs::write(env.config(), config).expect("config");
    let spawn_probe = json!({"prompt": "probe", "templateId": "probe", "model": env.model()});

    let mut cmd = env.command("broker");
    cmd.env
        .push((OsString::from(TOKEN_VAR), OsString::from(&token)));
    let s = McpSession::start(&cmd).await.expect("broker starts");
    if let Some(environ) = environ_of(s.pid().expect("broker pid")) {
        assert!(
            !environ.windows(token.len()).any(|w| w == token.as_bytes()),
            "the MCP token is still in the broker's environ"
        );
    }
    // Admission resolves every reference; the live environment no longer has it.
    let admitted = call(&s, "subzero_spawn", spawn_probe.clone()).await;
    assert!(!admitted.is_error, "{}", admitted.text);
    s.close().await.expect("close");

    let unset = env.broker("unset").await;
    assert_eq!(
        err(&unset, "subzero_spawn", spawn_probe).await,
        "credentials_required"
    );
    unset.close().await.expect("close");
}
