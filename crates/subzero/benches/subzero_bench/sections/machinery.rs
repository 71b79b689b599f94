//! What each piece of the broker's start-up machinery pays: the cold start of a broker
//! built without the piece (`cargo xtask bench` builds them into `target/bench-variants/`)
//! minus the shipped broker's, in blocks that alternate which goes first, so that neither a
//! drifting machine nor the order favours one.
//! A piece that pays under 0.3 ms misses its goal: it costs upkeep for nothing a host sees,
//! and is to be removed.

use std::path::Path;

use crate::broker;
use crate::plan::Plan;
use crate::report::Target;
use crate::sink::Sink;
use crate::stats::Samples;

pub const MACHINERY: &str = "Start-up machinery";

/// What a piece must save of the cold start to stay.
const KEEP_AT: f64 = 0.3;

/// Starts per block; the blocks alternate shipped, variant.
const BLOCK: usize = 5;

/// The variants: the file name's suffix, the piece left out, how that binary was built.
/// `startup.order` (start-up functions linked first) was measured here too and is gone: it
/// paid nothing beside the flags read without clap; without both, the start took ~0.4 ms
/// more, so one of the two stays, the smaller.
const PIECES: [(&str, &str, &str); 2] = [
    (
        "dynamic",
        "the static link (static-pie, `.cargo/rustc-wrapper`)",
        "built with `RUSTC_WORKSPACE_WRAPPER=` (no wrapper): linked dynamically",
    ),
    (
        "without-mcp-args",
        "`subzero mcp`'s flags read without clap",
        "built with `SUBZERO_BENCH_WITHOUT=mcp-args` (`crates/subzero/build.rs`): `subzero mcp` builds every command's clap parser first",
    ),
];

pub fn measure(exe: &Path, variants: &Path, plan: &Plan, sink: &mut Sink) {
    eprintln!("start-up machinery…");
    for (suffix, piece, how) in PIECES {
        let variant = variants.join(format!("subzero-{suffix}"));
        let name = format!("{piece} pays: cold start without it − with it");
        match pays(exe, &variant, plan.runs) {
            Ok(deltas) => sink.add(
                MACHINERY,
                &name,
                "ms",
                deltas,
                Some(Target::MedianAtLeast(KEEP_AT)),
                &format!(
                    "{how}; per pair of blocks of {BLOCK} starts (which goes first alternates), the variant's median cold start (as in the broker cold start row) minus the shipped broker's; kept only where it pays ≥ {KEEP_AT} ms"
                ),
            ),
            Err(e) => sink.failed(&name, &e),
        }
    }
}

/// One sample a block pair: the variant's median cold start minus the shipped one's.
fn pays(exe: &Path, variant: &Path, runs: usize) -> Result<Samples, crate::Fail> {
    if !variant.is_file() {
        return Err(format!("{} was not built", variant.display()).into());
    }
    let mut deltas = Samples::default();
    for block in 0..(2 * runs / BLOCK).max(2) {
        // Which goes first alternates, so an order effect cancels out.
        let (with, without) = if block % 2 == 0 {
            let with = broker::cold_start(exe, BLOCK)?;
            (with, broker::cold_start(variant, BLOCK)?)
        } else {
            let without = broker::cold_start(variant, BLOCK)?;
            (broker::cold_start(exe, BLOCK)?, without)
        };
        deltas.push(without.initialize_ms.median() - with.initialize_ms.median());
    }
    Ok(deltas)
}
