//! `server.json` at the repository root is Subzero's entry for the MCP Registry, and it says
//! what is true: it is valid against the registry's published schema (pinned, with its source,
//! in `tests/fixtures/mcp-registry/`, checked offline), and a copy missing a required field is
//! refused, so that check can fail; it names the npm package `subzero-mcp` at the crate's
//! version, started over stdio as `subzero-mcp mcp --workspace .`; `subzero mcp` accepts
//! exactly those arguments and answers an MCP `initialize` when started with them and with
//! every environment variable the entry lists; each of those variables is one the broker's
//! source reads, and every `SUBZERO_*` variable docs/operations.md says `mcp` reads is listed.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::faults::eventually;
use crate::support::prereq::workspace_root;

/// The npm package hosts run (`npx -y subzero-mcp …`).
const NPM_PACKAGE: &str = "subzero-mcp";
/// What the schema file declares itself to be.
const DRAFT_07: &str = "http://json-schema.org/draft-07/schema#";

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

fn server_json() -> Value {
    read_json(&workspace_root().join("server.json"))
}

fn pinned_schema() -> Value {
    read_json(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/mcp-registry/server.schema.json"),
    )
}

/// Every `$ref` in `value`.
fn refs<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                match (key.as_str(), v) {
                    ("$ref", Value::String(r)) => out.push(r),
                    _ => refs(v, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
        _ => {}
    }
}

/// The validator of the pinned schema: draft-07 as it declares, formats checked, and no
/// retriever at all (the crate is built without `resolve-http`/`resolve-file`), so nothing
/// leaves the machine; every `$ref` in it is local, which this asserts.
fn validator() -> jsonschema::Validator {
    let schema = pinned_schema();
    assert_eq!(
        schema["$schema"], DRAFT_07,
        "the pinned schema's draft changed"
    );
    jsonschema::meta::validate(&schema).expect("the pinned schema is a valid draft-07 schema");
    let mut all = Vec::new();
    refs(&schema, &mut all);
    assert!(!all.is_empty(), "the schema is built from definitions");
    let remote: Vec<_> = all.iter().filter(|r| !r.starts_with("#/")).collect();
    assert!(
        remote.is_empty(),
        "remote $refs need pinned copies too: {remote:?}"
    );
    jsonschema::draft7::options()
        .should_validate_formats(true)
        .build(&schema)
        .expect("the pinned schema compiles")
}

fn violations(validator: &jsonschema::Validator, instance: &Value) -> Vec<String> {
    validator
        .iter_errors(instance)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

/// The one package of the entry: the npm one.
fn npm_package(entry: &Value) -> &Value {
    let packages = entry["packages"]
        .as_array()
        .expect("server.json lists packages");
    assert_eq!(
        packages.len(),
        1,
        "one package, the npm launcher: {packages:#?}"
    );
    &packages[0]
}

fn env_names(package: &Value) -> Vec<String> {
    package["environmentVariables"]
        .as_array()
        .expect("the package lists its environment variables")
        .iter()
        .map(|v| {
            v["name"]
                .as_str()
                .expect("each variable has a name")
                .to_owned()
        })
        .collect()
}

/// The command line the entry's `packageArguments` make, after the package's own command.
fn package_argv(package: &Value) -> Vec<String> {
    let mut argv = Vec::new();
    for arg in package["packageArguments"]
        .as_array()
        .expect("packageArguments")
    {
        let value = arg["value"]
            .as_str()
            .expect("every argument has a fixed value");
        match arg["type"].as_str() {
            Some("positional") => argv.push(value.to_owned()),
            Some("named") => {
                argv.push(
                    arg["name"]
                        .as_str()
                        .expect("a named argument's name")
                        .to_owned(),
                );
                argv.push(value.to_owned());
            }
            other => panic!("an argument of unknown type {other:?}: {arg}"),
        }
    }
    argv
}

#[test]
fn the_registry_entry_is_valid_against_the_pinned_schema() {
    let schema = pinned_schema();
    let entry = server_json();
    assert_eq!(
        entry["$schema"], schema["$id"],
        "server.json names the schema version that is pinned (tests/fixtures/mcp-registry/README.md)"
    );
    let validator = validator();
    let errors = violations(&validator, &entry);
    assert!(
        errors.is_empty(),
        "server.json breaks the registry schema:\n{}",
        errors.join("\n")
    );
}

#[test]
fn the_schema_check_refuses_an_entry_missing_a_required_field() {
    let validator = validator();
    for field in ["name", "description", "version"] {
        let mut entry = server_json();
        entry
            .as_object_mut()
            .expect("server.json is an object")
            .remove(field)
            .unwrap_or_else(|| panic!("server.json has `{field}`"));
        assert!(
            !validator.is_valid(&entry),
            "an entry without `{field}` passed the schema check"
        );
    }
    let mut entry = server_json();
    entry["description"] = json!("x".repeat(101));
    assert!(
        !validator.is_valid(&entry),
        "a 101-character description passed"
    );
    let mut entry = server_json();
    entry["packages"][0]["packageArguments"][0] = json!({"type": "positional"});
    assert!(
        !validator.is_valid(&entry),
        "a positional argument without a value passed"
    );
}

#[test]
fn the_registry_entry_names_the_npm_package_stdio_and_the_mcp_command() {
    let version = env!("CARGO_PKG_VERSION");
    let entry = server_json();
    assert_eq!(entry["name"], "io.github.subzero-mcp/subzero");
    assert_eq!(
        entry["version"], version,
        "server.json's version is the crate's"
    );
    let package = npm_package(&entry);
    assert_eq!(package["registryType"], "npm");
    assert_eq!(package["identifier"], NPM_PACKAGE);
    assert_eq!(
        package["version"], version,
        "the npm package's version is the crate's"
    );
    assert_eq!(package["transport"], json!({"type": "stdio"}));
    assert_eq!(package_argv(package), ["mcp", "--workspace", "."]);
    let workspace = &package["packageArguments"][1];
    let described = workspace["description"].as_str().unwrap_or_default();
    assert!(
        described.contains("project directory"),
        "--workspace is explained: {workspace}"
    );
    for var in package["environmentVariables"]
        .as_array()
        .expect("variables")
    {
        assert_eq!(
            var["isRequired"], false,
            "subzero mcp runs on embedded defaults: {var}"
        );
        // Keys are read from variables the config file names, none of them fixed here.
        assert_eq!(
            var["isSecret"], false,
            "only a key variable is secret: {var}"
        );
    }
}

#[test]
fn the_registry_entry_names_the_workspace_repository() {
    let manifest = workspace_root().join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).expect("the workspace Cargo.toml");
    let doc: toml_edit::DocumentMut = text.parse().expect("the workspace Cargo.toml is TOML");
    let repository = doc["workspace"]["package"]["repository"]
        .as_str()
        .expect("[workspace.package] repository");
    let entry = server_json();
    assert_eq!(entry["repository"]["source"], "github");
    assert_eq!(
        entry["repository"]["url"], repository,
        "server.json's repository is the workspace's `repository`"
    );
}

#[test]
fn subzero_mcp_help_names_the_arguments_the_entry_passes() {
    let entry = server_json();
    let argv = package_argv(npm_package(&entry));
    let help = Command::new(env!("CARGO_BIN_EXE_subzero"))
        .args([argv[0].as_str(), "--help"])
        .env_remove("SUBZERO_LOG")
        .output()
        .expect("subzero mcp --help runs");
    assert!(
        help.status.success(),
        "subzero {} --help: {help:?}",
        argv[0]
    );
    let usage = String::from_utf8_lossy(&help.stdout);
    for flag in argv.iter().filter(|a| a.starts_with("--")) {
        assert!(
            usage.contains(flag.as_str()),
            "`subzero mcp` accepts {flag}:\n{usage}"
        );
    }
}

/// `subzero` started with a command line and an environment, spoken to over JSON-RPC lines.
struct Broker {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<Value>,
}

impl Broker {
    fn start(argv: &[String], cwd: &Path, env: &[(String, PathBuf)]) -> Broker {
        let mut command = Command::new(env!("CARGO_BIN_EXE_subzero"));
        // Only what `env` says (and PATH): nothing of this user's HOME or XDG directories.
        command.args(argv).current_dir(cwd).env_clear();
        command.env("PATH", std::env::var_os("PATH").unwrap_or_default());
        command.envs(env.iter().map(|(k, v)| (k, v)));
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("subzero starts");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let frame = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("a non-JSON line on stdout ({e}): {line}"));
                if tx.send(frame).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Broker {
            child,
            stdin,
            lines,
        }
    }

    fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        writeln!(stdin, "{message}").expect("write to the broker");
        stdin.flush().expect("flush");
    }

    /// The response to request `id` (20 s at most).
    fn response(&mut self, id: u64) -> Value {
        loop {
            let frame = self
                .lines
                .recv_timeout(Duration::from_secs(20))
                .unwrap_or_else(|e| panic!("no response to request {id}: {e}"));
            if frame["id"] == id {
                return frame;
            }
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A value for each variable the entry lists, all inside `dir`. A variable added to
/// server.json needs one here, so this test starts the broker with it.
fn test_env(names: &[String], dir: &Path) -> Vec<(String, PathBuf)> {
    names
        .iter()
        .map(|name| {
            let value = match name.as_str() {
                "SUBZERO_STATE_DIR" => dir.join("state"),
                "SUBZERO_CONFIG" => dir.join("config/config.toml"),
                "SUBZERO_LOG" => PathBuf::from("warn"),
                other => panic!("give {other} a value for the broker this test starts"),
            };
            (name.clone(), value)
        })
        .collect()
}

#[test]
fn subzero_started_as_the_entry_says_answers_initialize() {
    let entry = server_json();
    let package = npm_package(&entry);
    let dir = tempfile::tempdir().expect("temp dir");
    let workspace = dir.path().join("project");
    std::fs::create_dir_all(&workspace).expect("workspace");
    let mut env = test_env(&env_names(package), dir.path());
    env.push(("HOME".into(), dir.path().join("home")));
    let mut broker = Broker::start(&package_argv(package), &workspace, &env);

    broker.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "server-json", "version": "0"},
        }}),
    );
    let init = broker.response(1);
    assert_eq!(init["result"]["serverInfo"]["name"], "subzero", "{init}");
    assert_eq!(
        init["result"]["serverInfo"]["version"],
        env!("CARGO_PKG_VERSION"),
        "{init}"
    );
    broker.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    broker.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "subzero_list", "arguments": {}}}));
    let listed = broker.response(2);
    assert_eq!(
        listed["result"]["isError"],
        json!(false),
        "subzero_list: {listed}"
    );

    // The state went where SUBZERO_STATE_DIR said, not under HOME.
    assert!(
        dir.path().join("state/subzero.db").is_file(),
        "the state dir was not used"
    );
    assert!(
        !dir.path().join("home/.local").exists(),
        "the broker wrote under HOME"
    );
    broker.stdin.take();
    let mut status = None;
    eventually(Duration::from_secs(10), || {
        status = broker.child.try_wait().ok().flatten();
        status.is_some()
    });
    assert!(
        status.is_some_and(|s| s.success()),
        "the broker exits 0 at EOF: {status:?}"
    );
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).expect("a source file");
            out.push((path, text));
        }
    }
}

#[test]
fn every_variable_the_entry_lists_is_read_by_the_broker() {
    let root = workspace_root();
    let mut files = Vec::new();
    for krate in ["crates/subzero/src", "crates/subzero-runtime/src"] {
        sources(&root.join(krate), &mut files);
    }
    let reading: Vec<_> = files
        .iter()
        .filter(|(_, t)| t.contains("std::env::var"))
        .collect();
    let entry = server_json();
    let listed = env_names(npm_package(&entry));
    for name in &listed {
        let quoted = format!("\"{name}\"");
        let readers: Vec<_> = reading
            .iter()
            .filter(|(_, t)| t.contains(&quoted))
            .collect();
        assert!(!readers.is_empty(), "no source of the broker reads {name}");
    }

    // And the other way: what operations.md says `subzero mcp` reads is listed.
    let ops = std::fs::read_to_string(root.join("docs/operations.md")).expect("operations.md");
    let documented: Vec<&str> = ops
        .lines()
        .filter_map(|l| l.strip_prefix("| `SUBZERO_"))
        .filter(|rest| {
            rest.split('|')
                .nth(1)
                .is_some_and(|by| by.contains("`mcp`"))
        })
        .filter_map(|rest| rest.split('`').next())
        .collect();
    assert!(
        !documented.is_empty(),
        "operations.md's environment table was not found"
    );
    for tail in documented {
        let name = format!("SUBZERO_{tail}");
        assert!(
            listed.contains(&name),
            "{name} (operations.md: read by `mcp`) is not listed"
        );
    }
}
