//! The doctor's findings and how they are printed.

use std::io::{self, Write};

use serde::Serialize;
use serde_json::{Value, json};

use crate::inspect::table::{Cell, Table, Tone, paint};
use crate::terminal_text::Printing;

/// The verdict of one check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Works.
    Pass,
    /// Works, but something deserves attention (or is informational and missing).
    Warn,
    /// Broken: Subzero will not work until it is fixed.
    Fail,
}

impl Status {
    fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Warn => "warn",
            Status::Fail => "fail",
        }
    }

    fn tone(self) -> Tone {
        match self {
            Status::Pass => Tone::Green,
            Status::Warn => Tone::Yellow,
            Status::Fail => Tone::Red,
        }
    }
}

/// One check as `doctor --json` prints it.
#[derive(Debug, Serialize)]
struct CheckJson<'a> {
    name: &'a str,
    status: &'static str,
    detail: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    fix: Option<&'a str>,
}

/// One finding. Every `Warn` and `Fail` carries a fix.
#[derive(Clone, Debug)]
pub struct Check {
    name: String,
    status: Status,
    detail: String,
    fix: Option<String>,
}

impl Check {
    /// A passing check.
    pub fn pass(name: impl Into<String>, detail: impl Into<String>) -> Self {
        Check {
            name: name.into(),
            status: Status::Pass,
            detail: detail.into(),
            fix: None,
        }
    }

    /// A warning and what to do about it.
    pub fn warn(
        name: impl Into<String>,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Check {
            name: name.into(),
            status: Status::Warn,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }

    /// A failure and how to fix it.
    pub fn fail(
        name: impl Into<String>,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Check {
            name: name.into(),
            status: Status::Fail,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }
}

/// Every finding, in the order the checks ran.
#[derive(Debug, Default)]
pub struct Report {
    checks: Vec<Check>,
}

impl Report {
    /// Record a finding.
    pub fn add(&mut self, check: Check) {
        self.checks.push(check);
    }

    /// Record several findings.
    pub fn extend(&mut self, checks: impl IntoIterator<Item = Check>) {
        self.checks.extend(checks);
    }

    /// Whether any check failed.
    pub fn failed(&self) -> bool {
        self.checks.iter().any(|c| c.status == Status::Fail)
    }

    /// `{"ok": bool, "checks": [{name, status, detail, fix?}]}`.
    pub fn to_json(&self) -> Value {
        let checks: Vec<CheckJson> = self
            .checks
            .iter()
            .map(|c| CheckJson {
                name: &c.name,
                status: c.status.as_str(),
                detail: &c.detail,
                fix: c.fix.as_deref(),
            })
            .collect();
        json!({"ok": !self.failed(), "checks": checks})
    }

    /// The table: STATUS, CHECK, DETAIL, with each fix on the line below its check.
    /// It is aligned everywhere (it is meant to be read); colors only when `color`. Names,
    /// details and fixes quote URLs, paths and errors from outside: each is a one-line
    /// field of `printing` (escaped on a terminal).
    pub fn write(&self, out: &mut dyn Write, color: bool, printing: Printing) -> io::Result<()> {
        let mut table = Table::new(vec!["STATUS", "CHECK", "DETAIL"]);
        for c in &self.checks {
            let note = c.fix.as_ref().map(|fix| {
                format!(
                    "{} {}",
                    paint("fix:", Tone::Dim, color),
                    printing.field(fix)
                )
            });
            table.push_with_note(
                vec![
                    Cell::new(c.status.as_str().to_uppercase(), c.status.tone()),
                    Cell::plain(c.name.clone()),
                    Cell::plain(c.detail.clone()),
                ],
                note,
            );
        }
        table.write(out, true, color, printing)?;
        let (pass, warn, fail) = self.counts();
        let summary = format!("{pass} passed, {warn} warnings, {fail} failed");
        let tone = if fail > 0 {
            Tone::Red
        } else if warn > 0 {
            Tone::Yellow
        } else {
            Tone::Green
        };
        writeln!(out, "\n{}", paint(&summary, tone, color))
    }

    fn counts(&self) -> (usize, usize, usize) {
        let count = |s: Status| self.checks.iter().filter(|c| c.status == s).count();
        (
            count(Status::Pass),
            count(Status::Warn),
            count(Status::Fail),
        )
    }
}
