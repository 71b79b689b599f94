//! The board: a header (the target, the counts, the clock), the table of children or what
//! to do when there are none, the selected child's details, the keys; and the same board as
//! plain text for a pipe.

use ratatui::Frame;
use ratatui::buffer::Buffer;
use ratatui::layout::{Alignment, Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, TableState, Wrap};

use super::details::{DETAILS, details_pane};
use super::table::board_table;
use super::{Palette, Tone, fit_left, footer};
use crate::watch::app::App;
use crate::watch::board::Target;

pub(super) fn draw_board(
    frame: &mut Frame<'_>,
    app: &mut App,
    table: &mut TableState,
    area: Rect,
    palette: Palette,
    now_ms: i64,
) {
    let details = if app.board.lines.is_empty() || area.height < 14 {
        0
    } else {
        DETAILS
    };
    let [head, body, info, keys] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Fill(1),
        Constraint::Length(details),
        Constraint::Length(1),
    ])
    .areas(area);
    header(frame, app, head, palette, now_ms);
    // The table's own header row takes one line.
    app.page_rows = usize::from(body.height.saturating_sub(1)).max(1);
    if app.board.lines.is_empty() {
        frame.render_widget(empty_board(app, palette), body);
    } else {
        table.select(app.selected_index());
        frame.render_stateful_widget(board_table(app, body.width, palette, now_ms), body, table);
        if let Some(line) = app.selected_line() {
            frame.render_widget(details_pane(line, info.width, palette, now_ms), info);
        }
    }
    let position = match app.selected_index() {
        Some(i) => format!("{}/{}", i + 1, app.board.lines.len()),
        None => String::new(),
    };
    footer(
        frame,
        keys,
        "↑↓ select  Enter events  s stop run  q quit",
        &position,
        palette,
    );
}

fn header(frame: &mut Frame<'_>, app: &App, area: Rect, palette: Palette, now_ms: i64) {
    let lines = &app.board.lines;
    let running = lines.iter().filter(|l| l.is_running()).count();
    let interrupted = lines
        .iter()
        .filter(|l| !l.is_running() && l.state == "interrupted")
        .count();
    let mut counts = format!(
        "{} {}",
        lines.len(),
        if lines.len() == 1 {
            "child"
        } else {
            "children"
        }
    );
    if !lines.is_empty() {
        counts.push_str(&format!(": {running} running"));
        if interrupted > 0 {
            counts.push_str(&format!(", {interrupted} interrupted"));
        }
    }
    let clock = format!("{} UTC", clock_of(now_ms));
    let room = usize::from(area.width).saturating_sub(
        clock.chars().count() + counts.chars().count() + "subzero watch ·  · ".len() + 1,
    );
    let label = fit_left(&palette.printing.field(&app.target.label()), room.max(8));
    let left = Line::from(vec![
        Span::styled("subzero watch", palette.bold()),
        Span::styled(format!(" · {label} · "), palette.style(Tone::Dim)),
        Span::raw(counts),
    ]);
    frame.render_widget(Paragraph::new(left), area);
    frame.render_widget(
        Paragraph::new(Span::styled(clock, palette.style(Tone::Dim))).alignment(Alignment::Right),
        area,
    );
}

fn empty_board(app: &App, palette: Palette) -> Paragraph<'static> {
    let mut text = vec![
        Line::raw(""),
        Line::raw(format!(
            "  No children in {}.",
            palette.printing.field(&app.target.label())
        )),
        Line::raw(""),
        Line::styled(
            "  A host's parent agent starts them with subzero_spawn (README: \"Adding Subzero to a host\").",
            palette.style(Tone::Dim),
        ),
    ];
    if matches!(app.target, Target::Workspace(_)) {
        text.push(Line::styled(
            "  `subzero watch --all` shows the children of every workspace.",
            palette.style(Tone::Dim),
        ));
    }
    if !app.board.has_database {
        text.push(Line::styled(
            "  There is no state database yet: nothing has run with this state directory.",
            palette.style(Tone::Dim),
        ));
    }
    Paragraph::new(text).wrap(Wrap { trim: false })
}

/// `HH:MM:SS` of an epoch-milliseconds time, UTC.
pub(super) fn clock_of(ms: i64) -> String {
    let s = ms.div_euclid(1000).rem_euclid(86_400);
    format!("{:02}:{:02}:{:02}", s / 3600, s % 3600 / 60, s % 60)
}

/// The board as plain text, `width` columns wide, every child a line: what `watch` prints
/// once when its output is not a terminal.
pub fn board_text(app: &mut App, width: u16, now_ms: i64) -> String {
    let rows = app.board.lines.len().max(5) as u16 + 2;
    let backend = ratatui::backend::TestBackend::new(width, rows);
    let Ok(mut terminal) = ratatui::Terminal::new(backend);
    let palette = Palette {
        color: false,
        printing: app.printing,
    };
    let _ = terminal.draw(|frame| {
        let area = frame.area();
        let [head, body] =
            Layout::vertical([Constraint::Length(1), Constraint::Fill(1)]).areas(area);
        header(frame, app, head, palette, now_ms);
        if app.board.lines.is_empty() {
            frame.render_widget(empty_board(app, palette), body);
        } else {
            // No selection: no marker column either.
            let table = board_table(app, width, palette, now_ms).highlight_symbol("");
            frame.render_widget(table, body);
        }
    });
    buffer_text(terminal.backend().buffer())
}

/// A buffer's lines, trailing blanks trimmed.
pub fn buffer_text(buffer: &Buffer) -> String {
    let area = buffer.area;
    let mut out = Vec::new();
    for y in area.top()..area.bottom() {
        let line: String = (area.left()..area.right())
            .map(|x| buffer[(x, y)].symbol())
            .collect();
        out.push(line.trim_end().to_owned());
    }
    while out.last().is_some_and(String::is_empty) {
        out.pop();
    }
    out.join("\n") + "\n"
}
