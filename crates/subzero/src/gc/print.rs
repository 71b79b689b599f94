//! How `subzero gc` reports: a table of the checkouts it collects (CHILD, CHECKOUT, REMOVES,
//! SIZE, WORKSPACE, and RESULT once applied), then what it frees and what it keeps, and
//! why. Aligned everywhere (it is read by a person), colored on a terminal; every cell and
//! message is a one-line field of `printing`.

use std::io::{self, Write};

use super::plan::{Action, Candidate, Plan};
use super::sweep::Swept;
use crate::inspect::change::{size_text, state_words};
use crate::inspect::table::{Cell, Table, Tone, paint};
use crate::terminal_text::Printing;

/// The dry run: what would go, the bytes it would free, what stays.
pub fn dry_run(
    out: &mut dyn Write,
    plan: &Plan,
    color: bool,
    printing: Printing,
) -> io::Result<()> {
    if plan.candidates.is_empty() {
        writeln!(
            out,
            "nothing to collect: no applied, discarded, unchanged or idle prepared checkout changed more than {} days ago",
            plan.days
        )?;
    } else {
        let mut table = header(false);
        for c in &plan.candidates {
            table.push(cells(c));
        }
        table.write(out, true, color, printing)?;
        let bytes = plan.bytes();
        writeln!(
            out,
            "\nwould remove {} checkout(s), freeing {} ({bytes} bytes); `subzero gc --apply` removes them",
            plan.candidates.len(),
            size_text(bytes)
        )?;
    }
    footer(out, plan, color, printing)
}

/// After `--apply`: each checkout with how it ended, then what was freed and what stays.
pub fn applied(
    out: &mut dyn Write,
    plan: &Plan,
    swept: &[Swept],
    color: bool,
    printing: Printing,
) -> io::Result<()> {
    let mut table = header(true);
    let mut freed = 0;
    for (c, result) in plan.candidates.iter().zip(swept) {
        let mut row = cells(c);
        row.push(match result {
            Swept::Done => {
                freed += c.bytes;
                Cell::new("removed", Tone::Green)
            }
            Swept::Skipped(why) => Cell::new(format!("skipped: {why}"), Tone::Yellow),
            Swept::Failed(why) => Cell::new(format!("failed: {why}"), Tone::Red),
        });
        table.push(row);
    }
    table.write(out, true, color, printing)?;
    let done = swept.iter().filter(|s| matches!(s, Swept::Done)).count();
    writeln!(
        out,
        "\nremoved {done} of {} checkout(s), freed {} ({freed} bytes)",
        plan.candidates.len(),
        size_text(freed)
    )?;
    footer(out, plan, color, printing)
}

fn header(result: bool) -> Table {
    let mut columns = vec!["CHILD", "CHECKOUT", "REMOVES", "SIZE", "WORKSPACE"];
    if result {
        columns.push("RESULT");
    }
    Table::new(columns)
}

/// CHILD, CHECKOUT (`no change → removed` when the state moves), REMOVES, SIZE, WORKSPACE.
fn cells(c: &Candidate) -> Vec<Cell> {
    let state = state_words(c.state);
    let checkout = match c.action {
        Action::Remove => format!("{state} → removed"),
        Action::Clean => state.to_owned(),
    };
    let mut removes = Vec::new();
    if c.dir.is_some() {
        removes.push("directory".to_owned());
    }
    if c.notes.is_some() {
        removes.push("notes".to_owned());
    }
    match c.refs.len() {
        0 => {}
        1 => removes.push("1 ref".to_owned()),
        n => removes.push(format!("{n} refs")),
    }
    let removes = if removes.is_empty() {
        "nothing on disk".to_owned()
    } else {
        removes.join(", ")
    };
    vec![
        Cell::plain(c.child.to_string()),
        Cell::plain(checkout),
        Cell::plain(removes),
        Cell::plain(size_text(c.bytes)),
        Cell::new(c.scope.root().display().to_string(), Tone::Dim),
    ]
}

/// What stays and why, then the checkouts that could not be looked at.
fn footer(out: &mut dyn Write, plan: &Plan, color: bool, printing: Printing) -> io::Result<()> {
    let kept = &plan.kept;
    let mut parts = vec![format!("{} with unapplied changes", kept.changed)];
    if kept.in_use > 0 {
        parts.push(format!("{} in use", kept.in_use));
    }
    if kept.running > 0 {
        parts.push(format!("{} prepared for a running child", kept.running));
    }
    if kept.newer > 0 {
        parts.push(format!("{} changed within {} days", kept.newer, plan.days));
    }
    writeln!(out, "kept: {}", parts.join(", "))?;
    if kept.changed > 0 {
        writeln!(
            out,
            "  an unapplied change goes only when you say so: subzero_apply lands it, or discards it with discard: true"
        )?;
    }
    for (child, why) in &plan.problems {
        let line = format!(
            "could not look at the checkout of {child}: {}",
            printing.field(why)
        );
        writeln!(out, "{}", paint(&line, Tone::Red, color))?;
    }
    Ok(())
}
