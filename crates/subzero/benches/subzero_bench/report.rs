//! The figures and how `docs/benchmarks.md` shows them.

use std::fmt::Write as _;

use crate::machine::Machine;
use crate::stats::Samples;

/// A goal from issue 8; reported against, never asserted.
#[derive(Clone, Copy, Debug)]
pub enum Target {
    /// The median must be at most this.
    MedianAtMost(f64),
    /// The p95 must be at most this.
    P95AtMost(f64),
    /// The median must be at least this.
    MedianAtLeast(f64),
    /// Every sample must be at most this.
    MaxAtMost(f64),
}

impl Target {
    fn met(self, s: &Samples) -> bool {
        match self {
            Target::MedianAtMost(v) => s.median() <= v,
            Target::P95AtMost(v) => s.p95() <= v,
            Target::MedianAtLeast(v) => s.median() >= v,
            Target::MaxAtMost(v) => s.max() <= v,
        }
    }

    fn describe(self, unit: &str) -> String {
        match self {
            Target::MedianAtMost(v) => format!("median ≤ {} {unit}", num(v)),
            Target::P95AtMost(v) => format!("p95 ≤ {} {unit}", num(v)),
            Target::MedianAtLeast(v) => format!("median ≥ {} {unit}", num(v)),
            Target::MaxAtMost(v) => format!("every run ≤ {} {unit}", num(v)),
        }
    }
}

#[derive(Debug)]
pub struct Figure {
    pub section: &'static str,
    pub name: String,
    pub unit: &'static str,
    pub samples: Samples,
    pub target: Option<Target>,
    pub note: String,
}

impl Figure {
    /// p95 of a cost; p5 of a rate (the slow tail either way).
    pub fn tail(&self) -> f64 {
        if self.unit.ends_with("/s") {
            self.samples.percentile(5.0)
        } else {
            self.samples.p95()
        }
    }

    pub fn missed(&self) -> bool {
        self.target.is_some_and(|t| !t.met(&self.samples))
    }
}

pub fn num(v: f64) -> String {
    if v.is_nan() {
        "–".to_owned()
    } else if v.abs() >= 1000.0 {
        let whole = v.round() as i64;
        let digits = whole.abs().to_string();
        let mut grouped = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                grouped.push(',');
            }
            grouped.push(c);
        }
        if whole < 0 {
            format!("-{grouped}")
        } else {
            grouped
        }
    } else if v.abs() >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// One figure of a peer against Subzero's, both medians of the same run.
#[derive(Debug)]
pub struct Ratio {
    pub peer: &'static str,
    pub what: String,
    pub ours: f64,
    pub theirs: f64,
    pub unit: &'static str,
}

pub struct Report<'a> {
    pub machine: &'a Machine,
    pub command: &'a str,
    pub quick: bool,
    pub started: String,
    pub total_seconds: f64,
    pub figures: &'a [Figure],
    pub ratios: &'a [Ratio],
    pub notes: &'a [String],
}

impl Report<'_> {
    /// The whole document: the preamble, the machine, how to reproduce, a table a section
    /// (in the order their first figures landed), the ratios and the notes.
    pub fn markdown(&self) -> String {
        let mut md = String::new();
        self.write_preamble(&mut md);
        self.write_machine(&mut md);
        self.write_reproduce(&mut md);
        self.write_sections(&mut md);
        self.write_ratios(&mut md);
        self.write_notes(&mut md);
        md
    }

    /// The title, the do-not-edit header and what the targets mean.
    fn write_preamble(&self, md: &mut String) {
        let _ = writeln!(md, "# Benchmarks\n");
        let _ = writeln!(
            md,
            "<!-- written by `cargo xtask bench` (crates/subzero/benches/subzero_bench); do not edit by hand -->\n"
        );
        let _ = writeln!(
            md,
            "Targets come from the issues (8, 22, 28, 37) and are goals the bench checks, never the test suite: every figure is what was measured, \
             and `cargo xtask bench` exits non-zero, naming it, when a figure misses its goal or a scenario fails. \
             Median and p95 are nearest-rank over the runs in column n; for rates (events/s) the p95 column shows the slow tail, p5.{}\n",
            if self.quick {
                " **This is a `--quick` smoke run: too few runs for the p95 to mean much.**"
            } else {
                ""
            }
        );
    }

    fn write_machine(&self, md: &mut String) {
        let m = self.machine;
        let _ = writeln!(md, "## Machine\n");
        let _ = writeln!(md, "| | |\n|---|---|");
        let _ = writeln!(md, "| nproc | {} |", m.nproc);
        let _ = writeln!(md, "| CPU | {} |", m.cpu_model);
        let _ = writeln!(md, "| kernel | {} |", m.kernel);
        let _ = writeln!(md, "| memory | {} |", m.memory);
        let _ = writeln!(
            md,
            "| measured | {} ({:.0} s in total) |",
            self.started, self.total_seconds
        );
    }

    fn write_reproduce(&self, md: &mut String) {
        let _ = writeln!(md, "\n## Reproduce\n\n```sh\n{}\n```\n", self.command);
        let _ = writeln!(
            md,
            "It builds `cargo build --release -p subzero` and the bench binary (`cargo bench -p subzero --bench subzero-bench --no-run`), \
             then runs the bench against `target/release/subzero`; it first installs the peers it measures beside Subzero from their lockfiles (`npm ci` in `crates/subzero/benches/peers`, `crates/subzero/tests/hosts/pi`, `crates/subzero/tests/hosts/claude-code` and `workers/pi`). \
             `cargo xtask bench --quick` is a smoke run with fewer repetitions; `cargo xtask bench --only lean` runs one section (`lean`, `processes`, `store`, `isolation`, `real-model`, `install`, `host`). \
             The `install` section weighs the archives `cargo xtask dist` builds first (static musl binaries cross-built with `cargo zigbuild`) and starts the x86-64 one beside the source build. \
             The `host` section's figures come from the Claude Code scenarios of `crates/subzero/tests/testsuite/hosts/claude_code_cost.rs`, which `cargo xtask bench` runs first (Claude Code from `crates/subzero/tests/hosts/claude-code`, a scripted parent model on loopback). \
             All traffic is stdio and loopback HTTP: to a scripted OpenAI-compatible model (`subzero-testkit`), and in the real-model section \
             to a real llama.cpp `llama-server` on loopback, installed from PyPI wheels into `~/.cache/subzero-tests/llama-cpp` (`subzero_testkit::llama_cpp`).\n"
        );
    }

    /// One table a section, the sections in the order their first figures landed.
    fn write_sections(&self, md: &mut String) {
        let mut sections: Vec<&str> = Vec::new();
        for f in self.figures {
            if !sections.contains(&f.section) {
                sections.push(f.section);
            }
        }
        for section in sections {
            let _ = writeln!(md, "\n## {section}\n");
            let _ = writeln!(md, "| Figure | n | median | p95 | target | met | how |");
            let _ = writeln!(md, "|---|---:|---:|---:|---|---|---|");
            for f in self.figures.iter().filter(|f| f.section == section) {
                self.row(md, f);
            }
        }
    }

    fn write_ratios(&self, md: &mut String) {
        if !self.ratios.is_empty() {
            let _ = writeln!(md, "\n## Ratios\n");
            let _ = writeln!(
                md,
                "Medians of this run, the peer's over Subzero's: how many times more the peer takes (the rows above say how each was measured).\n"
            );
            let _ = writeln!(md, "| peer | figure | Subzero | peer | ratio |");
            let _ = writeln!(md, "|---|---|---:|---:|---:|");
            for r in self.ratios {
                let _ = writeln!(
                    md,
                    "| {} | {} | {} {unit} | {} {unit} | {:.1}× |",
                    r.peer,
                    r.what,
                    num(r.ours),
                    num(r.theirs),
                    r.theirs / r.ours,
                    unit = r.unit
                );
            }
        }
    }

    fn write_notes(&self, md: &mut String) {
        if !self.notes.is_empty() {
            let _ = writeln!(md, "\n## Notes\n");
            for note in self.notes {
                let _ = writeln!(md, "- {note}");
            }
        }
    }

    fn row(&self, md: &mut String, f: &Figure) {
        let (target, met) = match f.target {
            Some(t) => (
                t.describe(f.unit),
                if f.missed() { "**missed**" } else { "yes" },
            ),
            None => ("–".to_owned(), ""),
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} {unit} | {} {unit} | {target} | {met} | {} |",
            f.name,
            f.samples.len(),
            num(f.samples.median()),
            num(f.tail()),
            f.note,
            unit = f.unit,
        );
    }
}
