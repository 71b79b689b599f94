//! Where the sections put what they measure: figures (each printed as it lands), the
//! peers' ratios, notes, and the scenarios that failed; and what of it counts as a
//! regression.

use crate::Fail;
use crate::report::{Figure, Ratio, Target};
use crate::stats::Samples;

/// Everything the sections measured, in the order it landed: the report is written from it.
#[derive(Debug, Default)]
pub struct Sink {
    pub figures: Vec<Figure>,
    pub ratios: Vec<Ratio>,
    pub notes: Vec<String>,
    /// Scenarios that failed to run.
    failures: Vec<String>,
}

impl Sink {
    pub fn add(
        &mut self,
        section: &'static str,
        name: &str,
        unit: &'static str,
        samples: Samples,
        target: Option<Target>,
        note: &str,
    ) {
        eprintln!(
            "  {name}: median {:.3} {unit}, p95 {:.3} {unit} (n={})",
            samples.median(),
            samples.p95(),
            samples.len()
        );
        self.figures.push(Figure {
            section,
            name: name.to_owned(),
            unit,
            samples,
            target,
            note: note.to_owned(),
        });
    }

    pub fn failed(&mut self, scenario: &str, error: &Fail) {
        eprintln!("  {scenario} FAILED: {error}");
        self.notes
            .push(format!("The {scenario} scenario failed: {error}"));
        self.failures.push(format!("{scenario}: {error}"));
    }

    /// Every goal missed and every scenario that failed, one line each.
    pub fn regressions(&self) -> Vec<String> {
        let missed = self.figures.iter().filter(|f| f.missed()).map(|f| {
            format!(
                "{}: median {:.3} {}, p95 {:.3} {}",
                f.name,
                f.samples.median(),
                f.unit,
                f.samples.p95(),
                f.unit
            )
        });
        missed
            .chain(
                self.failures
                    .iter()
                    .map(|f| format!("scenario failed: {f}")),
            )
            .collect()
    }
}

/// A figure measured once.
pub fn one(value: f64) -> Samples {
    let mut s = Samples::default();
    s.push(value);
    s
}
