//! The npm packages, in the convention hosts use for native MCP servers: the launcher
//! `subzero-mcp` (plain CommonJS, kept in `packaging/npm/subzero-mcp`) with one optional
//! dependency per platform, `@subzero-mcp/linux-x64` and `@subzero-mcp/linux-arm64`, each
//! carrying that platform's three binaries in `bin/`. npm installs only the platform package
//! whose `os` and `cpu` match, and the launcher runs its `bin/subzero`, so
//! `npx -y subzero-mcp mcp --workspace .` starts the broker without a Rust toolchain.
//!
//! This lays the package directories out (the caller runs `npm pack` on them): every one at
//! the workspace's [`VERSION`], the launcher's dependencies pinned to exactly that version.
//! [`lay_out_for_tests`] does it from the debug build for the broker suite's `install::npm`.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::{BINARIES, Target, VERSION, copy};

/// The launcher's package name: what hosts run with `npx`, as `server.json` names it.
pub const LAUNCHER: &str = "subzero-mcp";
/// The launcher's sources, relative to the workspace root.
pub const LAUNCHER_SOURCE: &str = "packaging/npm/subzero-mcp";
/// The licence files every package carries, from the workspace root.
pub const LICENCES: [&str; 2] = ["LICENSE-MIT", "LICENSE-APACHE"];
/// Where [`lay_out_for_tests`] writes, below the target directory.
pub const TEST_DIR: &str = "npm-test";

const LICENSE: &str = "MIT OR Apache-2.0";
const REPOSITORY: &str = "git+https://github.com/subzero-mcp/subzero.git";
const HOMEPAGE: &str = "https://github.com/subzero-mcp/subzero";

/// The platform package's name: `@subzero-mcp/linux-x64`.
pub fn platform_package(target: Target) -> String {
    format!("@subzero-mcp/linux-{}", target.node_arch())
}

/// Its directory in the layout, named as `npm pack` names its tarball:
/// `subzero-mcp-linux-x64`.
pub fn platform_dir_name(target: Target) -> String {
    format!("subzero-mcp-linux-{}", target.node_arch())
}

/// The platform a person reads: `x86-64 Linux`.
fn platform_words(target: Target) -> &'static str {
    match target {
        Target::X86_64 => "x86-64 Linux",
        Target::Aarch64 => "arm64 (aarch64) Linux",
    }
}

/// The platform package's `package.json`.
pub fn platform_manifest(target: Target) -> Value {
    let files: Vec<String> = BINARIES
        .iter()
        .map(|b| format!("bin/{b}"))
        .chain(["README.md".to_owned()])
        .chain(LICENCES.iter().map(|l| (*l).to_owned()))
        .collect();
    json!({
        "name": platform_package(target),
        "version": VERSION,
        "description": format!(
            "Subzero's binaries for {} (subzero, subzero-worker, subzero-hold), run by the \
             subzero-mcp launcher",
            platform_words(target)
        ),
        "license": LICENSE,
        "repository": {"type": "git", "url": REPOSITORY},
        "homepage": HOMEPAGE,
        "os": ["linux"],
        "cpu": [target.node_arch()],
        "files": files,
        "preferUnplugged": true,
        "publishConfig": {"access": "public"}
    })
}

fn platform_readme(target: Target) -> String {
    format!(
        "# {name}\n\n\
         Subzero {VERSION}'s binaries for {words} (`{triple}`, static): `bin/subzero`,\n\
         `bin/subzero-worker` and `bin/subzero-hold`. They work only side by side: `subzero`\n\
         starts the other two from beside itself.\n\n\
         Install [`subzero-mcp`](https://www.npmjs.com/package/subzero-mcp) rather than this\n\
         package: npm adds this one to it on {words}, and its launcher runs `bin/subzero`\n\
         (`npx -y subzero-mcp mcp --workspace .`). See {HOMEPAGE}.\n\n\
         Licensed under MIT OR Apache-2.0 (`LICENSE-MIT`, `LICENSE-APACHE`).\n",
        name = platform_package(target),
        words = platform_words(target),
        triple = target.triple(),
    )
}

/// Writes the platform package for `target` to `out/<platform_dir_name>/`: its `package.json`,
/// the three binaries copied from `bin_dir` (mode 0755), a README and the licences from
/// `root`. Returns the directory; whatever was there before is replaced.
pub fn lay_out_platform(
    root: &Path,
    target: Target,
    bin_dir: &Path,
    out: &Path,
) -> Result<PathBuf, Vec<String>> {
    let dir = out.join(platform_dir_name(target));
    fresh_dir(&dir)?;
    let bin = dir.join("bin");
    create_dir(&bin)?;
    for name in BINARIES {
        let to = bin.join(name);
        copy(&bin_dir.join(name), &to)?;
        set_mode(&to, 0o755)?;
    }
    write(
        &dir.join("package.json"),
        &manifest_text(&platform_manifest(target)),
    )?;
    write(&dir.join("README.md"), &platform_readme(target))?;
    copy_licences(root, &dir)?;
    Ok(dir)
}

/// Copies the launcher (`packaging/npm/subzero-mcp`) to `out/subzero-mcp/` with the licences,
/// once its `package.json` is checked ([`check_launcher_manifest`], and its `mcpName` is
/// `server.json`'s name). Returns the directory; whatever was there before is replaced.
pub fn lay_out_launcher(root: &Path, out: &Path) -> Result<PathBuf, Vec<String>> {
    let source = root.join(LAUNCHER_SOURCE);
    let manifest = read_json(&source.join("package.json"))?;
    let server = read_json(&root.join("server.json"))?;
    let mut problems = check_launcher_manifest(&manifest).err().unwrap_or_default();
    if manifest["mcpName"] != server["name"] {
        problems.push(format!(
            "{LAUNCHER_SOURCE}/package.json: mcpName is {}, not server.json's name {} (the MCP \
             Registry checks they are equal)",
            manifest["mcpName"], server["name"]
        ));
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let dir = out.join(LAUNCHER);
    fresh_dir(&dir)?;
    copy_tree(&source, &dir)?;
    copy_licences(root, &dir)?;
    Ok(dir)
}

/// The launcher's `package.json` is `subzero-mcp` at [`VERSION`] and depends, optionally, on
/// exactly the platform package of every [`Target`] at exactly [`VERSION`]; otherwise every
/// mismatch, named.
pub fn check_launcher_manifest(manifest: &Value) -> Result<(), Vec<String>> {
    let file = format!("{LAUNCHER_SOURCE}/package.json");
    let workspace = format!("the workspace version {VERSION} (Cargo.toml [workspace.package])");
    let mut problems = Vec::new();
    if manifest["name"] != LAUNCHER {
        problems.push(format!(
            "{file}: name is {}, not {LAUNCHER}",
            manifest["name"]
        ));
    }
    if manifest["version"] != VERSION {
        problems.push(format!(
            "{file}: version is {}, not {workspace}",
            manifest["version"]
        ));
    }
    let deps = manifest["optionalDependencies"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let wanted: Vec<String> = Target::ALL.into_iter().map(platform_package).collect();
    for name in &wanted {
        match deps.get(name) {
            None => problems.push(format!("{file}: optionalDependencies lacks {name}")),
            Some(v) if v != VERSION => problems.push(format!(
                "{file}: optionalDependencies.{name} is {v}, not {workspace}"
            )),
            Some(_) => {}
        }
    }
    for name in deps.keys().filter(|n| !wanted.contains(n)) {
        problems.push(format!(
            "{file}: optionalDependencies.{name} is no platform package ({})",
            wanted.join(", ")
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

/// For the broker suite's `install::npm` (`cargo xtask test` calls it after its build): the
/// launcher and this machine's platform package, from the debug binaries in the target
/// directory, in `<target>/npm-test/`. On a processor Subzero ships no package for it says so
/// and lays out nothing (that test then reports the layout missing).
pub fn lay_out_for_tests(root: &Path) -> Result<(), Vec<String>> {
    let arch = std::env::consts::ARCH;
    let Some(target) = Target::ALL.into_iter().find(|t| t.machine() == arch) else {
        eprintln!("cargo xtask test: no npm platform package for {arch}; install::npm cannot run");
        return Ok(());
    };
    let target_dir = crate::bench::target_dir(root);
    let out = target_dir.join(TEST_DIR);
    fresh_dir(&out)?;
    lay_out_launcher(root, &out)?;
    lay_out_platform(root, target, &target_dir.join("debug"), &out)?;
    Ok(())
}

fn manifest_text(manifest: &Value) -> String {
    let mut text = serde_json::to_string_pretty(manifest).unwrap_or_default();
    text.push('\n');
    text
}

fn read_json(path: &Path) -> Result<Value, Vec<String>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| vec![format!("cannot read {}: {e}", path.display())])?;
    serde_json::from_str(&text).map_err(|e| vec![format!("{} is not JSON: {e}", path.display())])
}

fn copy_licences(root: &Path, dir: &Path) -> Result<(), Vec<String>> {
    for name in LICENCES {
        copy(&root.join(name), &dir.join(name))?;
    }
    Ok(())
}

/// Copies the files below `from` into `to` (which exists), keeping their modes.
fn copy_tree(from: &Path, to: &Path) -> Result<(), Vec<String>> {
    let entries = std::fs::read_dir(from)
        .map_err(|e| vec![format!("cannot list {}: {e}", from.display())])?;
    for entry in entries {
        let entry = entry.map_err(|e| vec![format!("cannot list {}: {e}", from.display())])?;
        let (source, dest) = (entry.path(), to.join(entry.file_name()));
        if source.is_dir() {
            create_dir(&dest)?;
            copy_tree(&source, &dest)?;
        } else {
            copy(&source, &dest)?;
        }
    }
    Ok(())
}

/// `dir`, emptied: removed with everything in it, then made again.
fn fresh_dir(dir: &Path) -> Result<(), Vec<String>> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(vec![format!("cannot remove {}: {e}", dir.display())]),
    }
    std::fs::create_dir_all(dir).map_err(|e| vec![format!("cannot create {}: {e}", dir.display())])
}

fn create_dir(dir: &Path) -> Result<(), Vec<String>> {
    std::fs::create_dir_all(dir).map_err(|e| vec![format!("cannot create {}: {e}", dir.display())])
}

fn set_mode(path: &Path, mode: u32) -> Result<(), Vec<String>> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| vec![format!("cannot chmod {}: {e}", path.display())])
}

fn write(path: &Path, text: &str) -> Result<(), Vec<String>> {
    std::fs::write(path, text).map_err(|e| vec![format!("cannot write {}: {e}", path.display())])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn launcher_manifest() -> Value {
        let path = crate::workspace_root()
            .join(LAUNCHER_SOURCE)
            .join("package.json");
        read_json(&path).expect("the launcher's package.json")
    }

    #[test]
    fn the_platform_manifest_names_the_package_its_platform_and_the_three_binaries() {
        let manifest = platform_manifest(Target::Aarch64);
        assert_eq!(manifest["name"], "@subzero-mcp/linux-arm64");
        assert_eq!(manifest["version"], VERSION);
        assert_eq!(manifest["license"], "MIT OR Apache-2.0");
        assert_eq!(manifest["os"], json!(["linux"]));
        assert_eq!(manifest["cpu"], json!(["arm64"]));
        assert_eq!(
            manifest["files"],
            json!([
                "bin/subzero",
                "bin/subzero-worker",
                "bin/subzero-hold",
                "README.md",
                "LICENSE-MIT",
                "LICENSE-APACHE"
            ])
        );
        assert!(
            manifest.get("bin").is_none(),
            "the launcher owns the commands"
        );
        assert_eq!(platform_manifest(Target::X86_64)["cpu"], json!(["x64"]));
    }

    #[test]
    fn a_platform_package_is_laid_out_with_executable_binaries_and_its_generated_manifest() {
        let dir = tempfile::tempdir().expect("temp dir");
        let bin_dir = dir.path().join("built");
        std::fs::create_dir_all(&bin_dir).expect("bin dir");
        for name in BINARIES {
            std::fs::write(bin_dir.join(name), format!("#!/bin/sh\necho {name}\n")).expect("bin");
        }
        let out = dir.path().join("out");
        let root = crate::workspace_root();
        let laid = lay_out_platform(&root, Target::X86_64, &bin_dir, &out).expect("laid out");
        assert_eq!(laid, out.join("subzero-mcp-linux-x64"));
        for name in BINARIES {
            let meta = std::fs::metadata(laid.join("bin").join(name)).expect("binary");
            assert_eq!(meta.permissions().mode() & 0o777, 0o755, "{name}");
        }
        let written = read_json(&laid.join("package.json")).expect("manifest");
        assert_eq!(written, platform_manifest(Target::X86_64));
        for file in ["README.md", "LICENSE-MIT", "LICENSE-APACHE"] {
            assert!(laid.join(file).is_file(), "{file} missing");
        }
        let readme = std::fs::read_to_string(laid.join("README.md")).expect("readme");
        assert!(
            readme.contains("npx -y subzero-mcp mcp --workspace ."),
            "{readme}"
        );
    }

    #[test]
    fn a_missing_binary_is_named() {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = crate::workspace_root();
        let err = lay_out_platform(&root, Target::X86_64, dir.path(), &dir.path().join("out"))
            .expect_err("nothing to copy");
        assert!(err[0].contains("subzero"), "{err:?}");
    }

    #[test]
    fn the_launcher_in_the_repository_is_at_the_workspace_version() {
        assert_eq!(check_launcher_manifest(&launcher_manifest()), Ok(()));
        let dir = tempfile::tempdir().expect("temp dir");
        let laid = lay_out_launcher(&crate::workspace_root(), dir.path()).expect("laid out");
        let script = laid.join("bin/subzero-mcp.js");
        let mode = std::fs::metadata(&script)
            .expect("launcher")
            .permissions()
            .mode();
        assert_eq!(mode & 0o111, 0o111, "the launcher is executable");
        assert_eq!(
            read_json(&laid.join("package.json")),
            Ok(launcher_manifest())
        );
        for file in ["README.md", "LICENSE-MIT", "LICENSE-APACHE"] {
            assert!(laid.join(file).is_file(), "{file} missing");
        }
    }

    #[test]
    fn a_launcher_at_another_version_than_its_platforms_is_refused_naming_each_mismatch() {
        let mut manifest = launcher_manifest();
        manifest["version"] = json!("0.0.9");
        manifest["optionalDependencies"]["@subzero-mcp/linux-arm64"] = json!("^0.1.0");
        let problems = check_launcher_manifest(&manifest).expect_err("refused");
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems[0].contains("version is \"0.0.9\"") && problems[0].contains(VERSION),
            "{problems:?}"
        );
        assert!(
            problems[1].contains("@subzero-mcp/linux-arm64 is \"^0.1.0\""),
            "{problems:?}"
        );
    }

    #[test]
    fn a_launcher_missing_a_platform_or_naming_another_is_refused() {
        let mut manifest = launcher_manifest();
        let deps = manifest["optionalDependencies"]
            .as_object_mut()
            .expect("optionalDependencies");
        deps.remove("@subzero-mcp/linux-x64");
        deps.insert("@subzero-mcp/darwin-arm64".into(), json!(VERSION));
        let problems = check_launcher_manifest(&manifest).expect_err("refused");
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems[0].contains("lacks @subzero-mcp/linux-x64"),
            "{problems:?}"
        );
        assert!(problems[1].contains("@subzero-mcp/darwin-arm64 is no platform package"));
    }
}
