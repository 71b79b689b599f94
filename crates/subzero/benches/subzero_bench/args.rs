//! The bench binary's command line.

use std::path::PathBuf;

use crate::Fail;

/// What `cargo xtask bench` passes (see the usage line in `main.rs`).
pub struct Args {
    pub subzero: PathBuf,
    pub out: PathBuf,
    pub quick: bool,
    pub command: String,
    /// Only this section (`lean`, `processes`, `store`, `isolation`, `real-model`, `host`).
    pub only: Option<String>,
    /// The Claude Code figures `cargo xtask bench` measured (JSON), for the `host` section.
    pub host_cost: Option<PathBuf>,
    /// `target/dist/release`, where `cargo xtask dist` put the archives (the `install` section).
    pub dist: Option<PathBuf>,
}

/// The sections, in the order they run.
const SECTIONS: [&str; 7] = [
    "lean",
    "processes",
    "store",
    "isolation",
    "real-model",
    "install",
    "host",
];

pub fn parse_args() -> Result<Args, Fail> {
    let mut subzero = None;
    let mut out = None;
    let mut quick = false;
    let mut only = None;
    let mut host_cost = None;
    let mut dist = None;
    let mut command = "cargo xtask bench".to_owned();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--subzero" => subzero = args.next().map(PathBuf::from),
            "--out" => out = args.next().map(PathBuf::from),
            "--command" => command = args.next().unwrap_or(command),
            "--host-cost" => host_cost = args.next().map(PathBuf::from),
            "--dist" => dist = args.next().map(PathBuf::from),
            "--quick" => quick = true,
            "--only" => {
                let section = args.next().unwrap_or_default();
                if !SECTIONS.contains(&section.as_str()) {
                    return Err(format!("--only takes one of {SECTIONS:?}, not {section:?}").into());
                }
                only = Some(section);
            }
            // `cargo bench` passes `--bench` to harness-less targets.
            "--bench" => {}
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    Ok(Args {
        subzero: subzero.ok_or("--subzero PATH is required")?,
        out: out.ok_or("--out PATH is required")?,
        quick,
        command,
        only,
        host_cost,
        dist,
    })
}
