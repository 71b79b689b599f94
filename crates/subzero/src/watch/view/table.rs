//! The table of children: its columns (more of them from [`WIDE`] and [`WIDER`] columns on)
//! and what each cell shows of a child, in which tone.

use ratatui::layout::Constraint;
use ratatui::text::Span;
use ratatui::widgets::{Cell, Row, Table};
use subzero_core::CheckoutState;

use super::{Palette, Tone, WIDE, WIDER};
use crate::watch::app::App;
use crate::watch::child::ChildLine;
use crate::watch::format;

/// One column of the board.
struct Column {
    title: &'static str,
    width: u16,
    right: bool,
    cell: fn(&ChildLine, i64) -> (String, Tone),
}

fn columns(width: u16) -> Vec<Column> {
    let col = |title, width, right, cell| Column {
        title,
        width,
        right,
        cell,
    };
    let mut cols = vec![col(
        "CHILD",
        7,
        false,
        child_cell as fn(&ChildLine, i64) -> _,
    )];
    if width >= WIDE {
        cols.push(col("STATE", 11, false, state_cell));
        cols.push(col("PHASE", 8, false, phase_cell));
    } else {
        cols.push(col("STATE", 11, false, state_phase_cell));
    }
    cols.push(col("TEMPLATE", 10, false, template_cell));
    if width >= WIDE {
        cols.push(col("MODEL", 14, false, model_cell));
    }
    if width >= WIDER {
        cols.push(col("CHANGE", 16, false, change_cell));
    }
    cols.push(col("TURN", 4, true, turn_cell));
    cols.push(col("IN/OUT", 9, true, tokens_cell));
    cols.push(col("ELAPSED", 7, true, elapsed_cell));
    cols.push(col("TOOL", 6, false, tool_cell));
    // The last event takes the rest: its width is what is left, below.
    cols.push(col("LAST EVENT", 0, false, event_cell));
    cols
}

pub(super) fn board_table(app: &App, width: u16, palette: Palette, now_ms: i64) -> Table<'static> {
    let cols = columns(width);
    // The selection marker takes 2 columns; each gap 1.
    let fixed: u16 = cols.iter().map(|c| c.width).sum::<u16>() + cols.len() as u16 + 1;
    let last = width.saturating_sub(fixed).max(10);
    let widths: Vec<Constraint> = cols
        .iter()
        .map(|c| Constraint::Length(if c.width == 0 { last } else { c.width }))
        .collect();
    let header = Row::new(cols.iter().map(|c| {
        let text = if c.right {
            format!("{:>w$}", c.title, w = usize::from(c.width))
        } else {
            c.title.to_owned()
        };
        Cell::from(text)
    }))
    .style(palette.bold());
    let rows = app.board.lines.iter().map(|line| {
        Row::new(cols.iter().map(|c| {
            let w = usize::from(if c.width == 0 { last } else { c.width });
            let (text, tone) = (c.cell)(line, now_ms);
            let text = format::fit(&text, w, palette.printing);
            let text = if c.right { format!("{text:>w$}") } else { text };
            Cell::from(Span::styled(text, palette.style(tone)))
        }))
    });
    Table::new(rows, widths)
        .header(header)
        .column_spacing(1)
        .row_highlight_style(palette.selected())
        .highlight_symbol("> ")
}

pub(super) fn state_tone(line: &ChildLine) -> Tone {
    match (line.is_running(), line.state.as_str(), line.phase.as_str()) {
        (_, _, "recovery_required") => Tone::Bad,
        (true, _, "stopping") => Tone::Warn,
        (true, _, _) => Tone::Good,
        (false, "interrupted", _) => Tone::Warn,
        _ => Tone::Plain,
    }
}

fn child_cell(line: &ChildLine, _: i64) -> (String, Tone) {
    (format::short_id(&line.id, 6), Tone::Plain)
}

fn state_cell(line: &ChildLine, _: i64) -> (String, Tone) {
    (line.state.clone(), state_tone(line))
}

fn phase_cell(line: &ChildLine, _: i64) -> (String, Tone) {
    (short_phase(&line.phase).to_owned(), state_tone(line))
}

/// The phase of a running child, the state of any other.
pub(super) fn state_phase_cell(line: &ChildLine, _: i64) -> (String, Tone) {
    let text = match (line.is_running(), line.phase.as_str()) {
        (_, "recovery_required") => "recovery",
        (true, "idle") => "running",
        (true, phase) => phase,
        (false, _) => line.state.as_str(),
    };
    (text.to_owned(), state_tone(line))
}

fn short_phase(phase: &str) -> &str {
    if phase == "recovery_required" {
        "recovery"
    } else {
        phase
    }
}

fn template_cell(line: &ChildLine, _: i64) -> (String, Tone) {
    (line.template.clone(), Tone::Plain)
}

fn model_cell(line: &ChildLine, _: i64) -> (String, Tone) {
    (line.model.clone(), Tone::Plain)
}

/// Turns and tokens are reported when a run settles: a running child shows `…`, any other
/// the figures of its last run.
fn turn_cell(line: &ChildLine, _: i64) -> (String, Tone) {
    match (&line.last_usage, line.is_running()) {
        (_, true) => ("…".into(), Tone::Dim),
        (Some(u), false) => (u.turns.to_string(), Tone::Plain),
        (None, false) => ("-".into(), Tone::Dim),
    }
}

fn tokens_cell(line: &ChildLine, _: i64) -> (String, Tone) {
    match (&line.last_usage, line.is_running()) {
        (_, true) => ("…".into(), Tone::Dim),
        (Some(u), false) => (
            format!(
                "{}{}/{}",
                if u.estimated { "~" } else { "" },
                format::tokens(u.input),
                format::tokens(u.output)
            ),
            Tone::Plain,
        ),
        (None, false) => ("-".into(), Tone::Dim),
    }
}

fn elapsed_cell(line: &ChildLine, now_ms: i64) -> (String, Tone) {
    match line.elapsed_ms(now_ms) {
        Some(ms) if line.is_running() => (format::duration(ms), Tone::Plain),
        Some(ms) => (format::duration(ms), Tone::Dim),
        None => ("-".into(), Tone::Dim),
    }
}

/// An isolated child's change and checkout state (`+12 −3 in 2 files, settled`, cut to the
/// column); nothing for a child that works in the workspace.
fn change_cell(line: &ChildLine, _: i64) -> (String, Tone) {
    match &line.change {
        Some((text, state)) => (text.clone(), change_tone(*state)),
        None => (String::new(), Tone::Plain),
    }
}

/// An unapplied change asks for attention; a finished checkout is secondary.
pub(super) fn change_tone(state: CheckoutState) -> Tone {
    match state {
        CheckoutState::SettledChanged => Tone::Warn,
        CheckoutState::InUse => Tone::Good,
        CheckoutState::Prepared => Tone::Plain,
        CheckoutState::SettledUnchanged
        | CheckoutState::Applied
        | CheckoutState::Discarded
        | CheckoutState::Removed => Tone::Dim,
    }
}

fn tool_cell(line: &ChildLine, _: i64) -> (String, Tone) {
    match &line.tool {
        Some(tool) => (tool.clone(), Tone::Plain),
        None => ("-".into(), Tone::Dim),
    }
}

fn event_cell(line: &ChildLine, _: i64) -> (String, Tone) {
    match &line.last_event {
        Some(event) => (event.text.clone(), Tone::Plain),
        None => ("-".into(), Tone::Dim),
    }
}
