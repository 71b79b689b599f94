//! `cargo xtask dist`: release archives of the three binaries for x86-64 and arm64 Linux,
//! static against musl (they run on any distribution, Alpine's among them), cross-built with
//! `cargo zigbuild`, each with the licences and a short README, checksums beside them; and the
//! npm packages that carry the same binaries ([`npm`]).

pub mod npm;

/// The version every artifact carries: the workspace's (xtask shares it).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// A platform Subzero ships prebuilt for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// x86-64 Linux.
    X86_64,
    /// arm64 (aarch64) Linux.
    Aarch64,
}

impl Target {
    /// Every shipped platform.
    pub const ALL: [Target; 2] = [Target::X86_64, Target::Aarch64];

    /// The Rust target triple it is built for.
    pub fn triple(self) -> &'static str {
        match self {
            Target::X86_64 => "x86_64-unknown-linux-musl",
            Target::Aarch64 => "aarch64-unknown-linux-musl",
        }
    }

    /// Node's name for its processor (`process.arch`, a package's `cpu` field).
    pub fn node_arch(self) -> &'static str {
        match self {
            Target::X86_64 => "x64",
            Target::Aarch64 => "arm64",
        }
    }

    /// `uname -m`'s name for it, as archive names use.
    pub fn machine(self) -> &'static str {
        match self {
            Target::X86_64 => "x86_64",
            Target::Aarch64 => "aarch64",
        }
    }

    /// The archive's name without its extension: `subzero-0.1.0-x86_64-linux-musl`.
    pub fn archive_stem(self) -> String {
        format!("subzero-{VERSION}-{}-linux-musl", self.machine())
    }
}

/// The three binaries that ship together (`subzero` starts the other two from beside itself).
pub const BINARIES: [&str; 3] = ["subzero", "subzero-worker", "subzero-hold"];

mod archive;
mod tools;

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::bench::target_dir;

/// What `cargo xtask dist` was asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub targets: Vec<Target>,
    /// The cargo profile: `release` ships; the suite's arm64 check builds `dist-check`
    /// (unoptimised, minutes less), the same sources and the same static linking.
    pub profile: String,
}

impl Request {
    /// `[--target x86_64|aarch64|all] [--profile NAME]`; every target, `release`, by default.
    pub fn parse(args: &[String]) -> Result<Request, Vec<String>> {
        let mut request = Request {
            targets: Target::ALL.to_vec(),
            profile: "release".to_owned(),
        };
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            let value = args.next();
            match (arg.as_str(), value.map(String::as_str)) {
                ("--target", Some("all")) => request.targets = Target::ALL.to_vec(),
                ("--target", Some(name)) => request.targets = vec![Target::named(name)?],
                ("--profile", Some(profile)) => request.profile = profile.to_owned(),
                _ => {
                    return Err(vec![format!(
                        "cargo xtask dist: unexpected `{arg}`; usage: cargo xtask dist \
                         [--target x86_64|aarch64|all] [--profile release|dist-check]"
                    )]);
                }
            }
        }
        Ok(request)
    }
}

impl Target {
    /// `x86_64` or `aarch64` (the triple and Node's name are taken too).
    pub fn named(name: &str) -> Result<Target, Vec<String>> {
        Target::ALL
            .into_iter()
            .find(|t| [t.machine(), t.triple(), t.node_arch()].contains(&name))
            .ok_or_else(|| vec![format!("unknown target `{name}`: x86_64 or aarch64")])
    }

    /// The platform this xtask runs on, if Subzero ships for it.
    pub fn host() -> Option<Target> {
        Target::named(std::env::consts::ARCH).ok()
    }
}

/// `target/dist/<profile>/`, where archives, checksums and npm packages go.
pub fn out_dir(root: &Path, profile: &str) -> PathBuf {
    target_dir(root).join("dist").join(profile)
}

/// `cargo xtask dist ARGS…`: build each target, archive it, lay out its npm package, then
/// the launcher package and `SHA256SUMS`.
pub fn dist(root: &Path, args: &[String]) -> Result<(), Vec<String>> {
    let request = Request::parse(args)?;
    let out = out_dir(root, &request.profile);
    std::fs::create_dir_all(&out).map_err(|e| vec![format!("cannot create {out:?}: {e}")])?;
    let mut archives = Vec::new();
    for &target in &request.targets {
        let bin_dir = build(root, target, &request.profile)?;
        archives.push(archive::write(root, target, &bin_dir, &out)?);
        let package = npm::lay_out_platform(root, target, &bin_dir, &out.join("npm"))?;
        eprintln!("cargo xtask dist: {}", package.display());
    }
    let launcher = npm::lay_out_launcher(root, &out.join("npm"))?;
    eprintln!("cargo xtask dist: {}", launcher.display());
    archive::checksums(&out)?;
    for archive in archives {
        eprintln!("cargo xtask dist: {}", archive.display());
    }
    Ok(())
}

/// `cargo zigbuild` of the three binaries for `target` in `profile`; the directory they are
/// in. The toolchain's standard library for the target and the Zig linker are installed
/// first when missing ([`tools`]).
pub fn build(root: &Path, target: Target, profile: &str) -> Result<PathBuf, Vec<String>> {
    tools::rust_target(target)?;
    let path = tools::zig(root)?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let mut command = Command::new(cargo);
    command
        .current_dir(root)
        .env("PATH", path)
        .args(["zigbuild", "--locked", "-p", "subzero", "--bins"])
        .args(["--target", target.triple(), "--profile", profile]);
    if let Ok(jobs) = std::env::var("SUBZERO_DIST_JOBS") {
        command.args(["--jobs", &jobs]);
    }
    let what = format!(
        "cargo zigbuild --target {} --profile {profile}",
        target.triple()
    );
    crate::test::run(&mut command, &what)?;
    // Cargo names the `dev` profile's directory `debug`; every other by its name.
    let dir = if profile == "dev" { "debug" } else { profile };
    let bin_dir = target_dir(root).join(target.triple()).join(dir);
    for name in BINARIES {
        if !bin_dir.join(name).is_file() {
            return Err(vec![format!(
                "{what} left no {name} in {}",
                bin_dir.display()
            )]);
        }
    }
    Ok(bin_dir)
}

/// Copies `from` to `to`, keeping its mode (the binaries stay executable).
pub(crate) fn copy(from: &Path, to: &Path) -> Result<(), Vec<String>> {
    std::fs::copy(from, to).map(drop).map_err(|e| {
        vec![format!(
            "cannot copy {} to {}: {e}",
            from.display(),
            to.display()
        )]
    })
}
