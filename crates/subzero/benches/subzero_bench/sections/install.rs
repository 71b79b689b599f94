//! Installed from the release archives (issue 39): the size of each archive `cargo xtask
//! dist` writes, and the broker's cold start from the x86-64 archive's static musl binary
//! beside the source build's (`cargo build --release`, glibc), measured the same way in turn.

use std::path::Path;

use crate::broker;
use crate::sink::{Sink, one};

pub const INSTALL: &str = "Installed from the archives";

/// Every figure of the section; `dist` is `target/dist/release` (`--dist`), when built.
pub fn measure(exe: &Path, dist: Option<&Path>, runs: usize, sink: &mut Sink) {
    let Some(dist) = dist else {
        sink.notes
            .push("No archives were measured: `cargo xtask bench` builds them with `cargo xtask dist` first.".to_owned());
        return;
    };
    let version = env!("CARGO_PKG_VERSION");
    for machine in ["x86_64", "aarch64"] {
        let name = format!("subzero-{version}-{machine}-linux-musl.tar.gz");
        match std::fs::metadata(dist.join(&name)) {
            Ok(meta) => sink.add(
                INSTALL,
                &format!("release archive, {machine} Linux"),
                "MiB",
                one(meta.len() as f64 / 1024.0 / 1024.0),
                None,
                &format!("`{name}`: `subzero`, `subzero-worker`, `subzero-hold` (static, musl, stripped, thin LTO), the licences and a README, `tar | gzip -9n`"),
            ),
            Err(e) => sink.failed(&format!("{machine} archive size"), &e.into()),
        }
    }
    let prebuilt = dist
        .join(format!("subzero-{version}-x86_64-linux-musl"))
        .join("subzero");
    eprintln!("cold start, prebuilt and source build…");
    for (label, binary, note) in [
        (
            "broker cold start → `initialize` reply, prebuilt (musl, static)",
            prebuilt.as_path(),
            "the x86-64 archive's `subzero`, unpacked: the same scenario as the lean section's cold start",
        ),
        (
            "broker cold start → `initialize` reply, source build (glibc)",
            exe,
            "`target/release/subzero` from `cargo build --release`, right after the prebuilt one, the same way",
        ),
    ] {
        match broker::cold_start(binary, runs) {
            Ok(cold) => sink.add(INSTALL, label, "ms", cold.initialize_ms, None, note),
            Err(e) => sink.failed(label, &e),
        }
    }
}
