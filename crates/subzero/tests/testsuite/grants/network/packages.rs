//! `pip`, `npm` and `cargo` through the proxy, against a package index on the host's loopback.

use serde_json::json;

use super::*;
use crate::support::worker::coder;
use std::path::Path;

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
