//! Drawing the view with ratatui: the board (a header, a table of children, the selected
//! child's details, the keys), one child's event stream, and the dialogs.
//!
//! Laid out for 80×24 and up: at 80 columns one STATE column shows the phase of a running
//! child (`starting`, `model`, `tool`, `stopping`) and the state of the others (`ready`,
//! `interrupted`, `recovery`), and the model is in the details; from [`WIDE`] columns on,
//! STATE, PHASE and MODEL are columns of their own. Without colour (`NO_COLOR`, not a
//! terminal) the selection is shown in reverse video and nothing else is styled.

use ratatui::Frame;
use ratatui::buffer::Buffer;
use ratatui::layout::{Alignment, Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span, Text};
use ratatui::widgets::{Block, Cell, Clear, Paragraph, Row, Table, TableState, Wrap};

use super::app::{App, Dialog, Screen};
use super::board::Target;
use super::child::ChildLine;
use super::format;
use crate::inspect::events;
use crate::terminal_text::Printing;

/// From this width on, STATE, PHASE and MODEL get columns of their own.
pub const WIDE: u16 = 110;
/// Height of the details pane (borders included).
const DETAILS: u16 = 6;

/// How a piece of text is emphasized when colour is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tone {
    Plain,
    Good,
    Warn,
    Bad,
    Dim,
}

/// Styles, or none at all without colour; and how text written by others is drawn.
#[derive(Clone, Copy, Debug)]
struct Palette {
    color: bool,
    printing: Printing,
}

impl Palette {
    fn style(self, tone: Tone) -> Style {
        if !self.color {
            return Style::default();
        }
        match tone {
            Tone::Plain => Style::default(),
            Tone::Good => Style::default().fg(Color::Green),
            Tone::Warn => Style::default().fg(Color::Yellow),
            Tone::Bad => Style::default().fg(Color::Red),
            Tone::Dim => Style::default().fg(Color::DarkGray),
        }
    }

    fn bold(self) -> Style {
        if self.color {
            Style::default().add_modifier(Modifier::BOLD)
        } else {
            Style::default()
        }
    }

    /// The selected row: reverse video is no colour, so it stays under `NO_COLOR`.
    fn selected(self) -> Style {
        Style::default().add_modifier(Modifier::REVERSED)
    }
}

/// Draw the whole view.
pub fn draw(frame: &mut Frame<'_>, app: &mut App, table: &mut TableState, now_ms: i64) {
    let palette = Palette {
        color: app.color,
        printing: app.printing,
    };
    let area = frame.area();
    match &app.screen {
        Screen::Board => draw_board(frame, app, table, area, palette, now_ms),
        Screen::Events(_) => draw_events(frame, app, area, palette),
    }
    if let Some(dialog) = &app.dialog {
        draw_dialog(frame, dialog, area, palette);
    }
}

fn draw_board(
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
    cols.push(col("TURN", 4, true, turn_cell));
    cols.push(col("IN/OUT", 9, true, tokens_cell));
    cols.push(col("ELAPSED", 7, true, elapsed_cell));
    cols.push(col("TOOL", 6, false, tool_cell));
    // The last event takes the rest: its width is what is left, below.
    cols.push(col("LAST EVENT", 0, false, event_cell));
    cols
}

fn board_table(app: &App, width: u16, palette: Palette, now_ms: i64) -> Table<'static> {
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

fn state_tone(line: &ChildLine) -> Tone {
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
fn state_phase_cell(line: &ChildLine, _: i64) -> (String, Tone) {
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

fn details_pane(line: &ChildLine, width: u16, palette: Palette, now_ms: i64) -> Paragraph<'static> {
    let room = usize::from(width.saturating_sub(2));
    let dim = palette.style(Tone::Dim);
    let phase = if line.phase == "idle" {
        line.state.clone()
    } else {
        format!("{} ({})", line.state, line.phase)
    };
    let (run_label, run) = match (&line.active_run, &line.last_run) {
        (Some(run), _) => {
            let elapsed = line
                .elapsed_ms(now_ms)
                .map_or_else(|| "-".into(), format::duration);
            let mut parts = vec![format!("{run} running for {elapsed}")];
            if let Some(tool) = &line.tool {
                parts.push(format!("in {tool}"));
            }
            if line.queued > 0 {
                parts.push(format!("{} queued", line.queued));
            }
            parts.push("turns and tokens come when it settles".into());
            ("run", parts)
        }
        (None, Some((run, status))) => {
            let mut parts = vec![match line.last_run_ms {
                Some(ms) => format!("{run} {status} after {}", format::duration(ms)),
                None => format!("{run} {status}"),
            }];
            if let Some(u) = &line.last_usage {
                parts.push(format!(
                    "{} turn{}",
                    u.turns,
                    if u.turns == 1 { "" } else { "s" }
                ));
                parts.push(format!(
                    "{}{} in / {} out tokens",
                    if u.estimated { "~" } else { "" },
                    format::tokens(u.input),
                    format::tokens(u.output)
                ));
            }
            ("last run", parts)
        }
        (None, None) => ("run", vec!["none yet".to_owned()]),
    };
    let event = match &line.last_event {
        Some(e) => format!("#{} {} {}", e.seq, format::clock(&e.at), e.text),
        None => "none".to_owned(),
    };
    let printing = palette.printing;
    let labelled = |label: &str, text: String| {
        let text = format::fit(
            &text,
            room.saturating_sub(label.chars().count() + 1),
            printing,
        );
        Line::from(vec![
            Span::styled(format!("{label} "), dim),
            Span::raw(text),
        ])
    };
    let text = vec![
        Line::from(vec![
            Span::styled(
                format!("{} ", printing.field(&line.template)),
                palette.bold(),
            ),
            Span::styled(phase.clone(), palette.style(state_tone(line))),
            Span::styled(
                format!(
                    " · {}",
                    fit_left(
                        &printing.field(&line.scope.root().display().to_string()),
                        room.saturating_sub(line.template.len() + phase.len() + 4)
                    )
                ),
                dim,
            ),
        ]),
        labelled(
            "model",
            format!("{} at {} ({})", line.model, line.model_url, line.api),
        ),
        labelled(
            run_label,
            fit_parts(&run, room.saturating_sub(run_label.len() + 1), printing),
        ),
        labelled("last event", event),
    ];
    Paragraph::new(text).block(Block::bordered().title(format!(" {} ", line.id)))
}

/// `parts` joined by ` · `, leaving out trailing parts that do not fit `width` (the first is
/// always kept, cut if it must be).
fn fit_parts(parts: &[String], width: usize, printing: Printing) -> String {
    let mut text = String::new();
    for part in parts {
        let next = if text.is_empty() {
            part.clone()
        } else {
            format!("{text} · {part}")
        };
        if next.chars().count() > width && !text.is_empty() {
            break;
        }
        text = next;
    }
    format::fit(&text, width, printing)
}

fn footer(frame: &mut Frame<'_>, area: Rect, keys: &str, right: &str, palette: Palette) {
    frame.render_widget(
        Paragraph::new(Span::styled(keys.to_owned(), palette.style(Tone::Dim))),
        area,
    );
    frame.render_widget(
        Paragraph::new(Span::styled(right.to_owned(), palette.style(Tone::Dim)))
            .alignment(Alignment::Right),
        area,
    );
}

fn draw_events(frame: &mut Frame<'_>, app: &mut App, area: Rect, palette: Palette) {
    let [head, body, keys] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Fill(1),
        Constraint::Length(1),
    ])
    .areas(area);
    app.page_rows = usize::from(body.height).max(1);
    let Screen::Events(stream) = &app.screen else {
        return;
    };
    let child = stream.child.to_string();
    let about = app
        .board
        .line(&child)
        .map(|l| {
            let about = format!("{}, {}", l.template, state_phase_cell(l, 0).0);
            format!(" ({})", palette.printing.field(&about))
        })
        .unwrap_or_default();
    frame.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled("events of ", palette.bold()),
            Span::styled(child.clone(), palette.bold()),
            Span::raw(about),
        ])),
        head,
    );
    let height = usize::from(body.height);
    let end = stream.events.len().saturating_sub(stream.scroll);
    let start = end.saturating_sub(height);
    let lines: Vec<Line<'static>> = stream.events[start..end]
        .iter()
        .map(|e| event_line(e, palette))
        .collect();
    if lines.is_empty() {
        frame.render_widget(
            Paragraph::new(Span::styled("  no events yet", palette.style(Tone::Dim))),
            body,
        );
    } else {
        frame.render_widget(Paragraph::new(lines), body);
    }
    let position = if stream.scroll == 0 {
        "following".to_owned()
    } else {
        format!("{} newer below", stream.scroll)
    };
    footer(
        frame,
        keys,
        "↑↓ PgUp PgDn scroll  End follow  Esc back  s stop run  q quit",
        &position,
        palette,
    );
}

/// `seq  HH:MM:SS  type  details`, the type coloured as `subzero logs` colours it.
fn event_line(event: &serde_json::Value, palette: Palette) -> Line<'static> {
    // The plain `subzero logs` line is tab-separated: seq, at, type, details (one-line
    // fields: a tab or a newline in them is escaped, or a space in the piped board).
    let plain = events::line(event, false, palette.printing);
    let mut parts = plain.splitn(4, '\t');
    let seq = parts.next().unwrap_or("").to_owned();
    let at = format::clock(parts.next().unwrap_or(""));
    let kind = parts.next().unwrap_or("").to_owned();
    let details = parts.next().unwrap_or("").to_owned();
    let tone = match kind.as_str() {
        "completed" => Tone::Good,
        "failed" | "gap" => Tone::Bad,
        "interrupted" | "stop_requested" | "stop_confirmed" | "steer_discarded" => Tone::Warn,
        "text" => Tone::Dim,
        _ => Tone::Plain,
    };
    Line::from(vec![
        Span::raw(format!("{seq:>5} ")),
        Span::styled(format!("{at} "), palette.style(Tone::Dim)),
        Span::styled(format!("{kind:<15} "), palette.style(tone)),
        Span::raw(details),
    ])
}

fn draw_dialog(frame: &mut Frame<'_>, dialog: &Dialog, area: Rect, palette: Palette) {
    let (title, body, keys) = match dialog {
        Dialog::ConfirmStop(_, question) => (
            " Stop the run? ",
            question.clone(),
            "y: stop it   any other key: keep it running",
        ),
        Dialog::Stopping(target) => (
            " Stopping ",
            format!("Stopping {} of {}…", target.run, target.child),
            "",
        ),
        Dialog::Message(title, text) => (title.as_str(), text.clone(), "any key closes this"),
    };
    // A stop's answer quotes the host's command line and the broker's message.
    let body = palette.printing.text(&body).into_owned();
    let width = area.width.saturating_sub(4).min(76);
    let inner = usize::from(width.saturating_sub(2)).max(1);
    // Room for the wrapped text, a blank line and the keys, inside the borders.
    let text_lines: usize = body.split('\n').map(|l| wrapped_lines(l, inner)).sum();
    // The text, a blank line, the keys, the borders, and a line of margin.
    let height = (text_lines as u16 + 5).min(area.height);
    let popup = area.centered(Constraint::Length(width), Constraint::Length(height));
    let mut text = Text::from(body);
    text.push_line(Line::raw(""));
    text.push_line(Line::styled(keys.to_owned(), palette.style(Tone::Dim)));
    frame.render_widget(Clear, popup);
    frame.render_widget(
        Paragraph::new(text)
            .wrap(Wrap { trim: false })
            .block(Block::bordered().title(Span::styled(title.to_owned(), palette.bold()))),
        popup,
    );
}

/// How many lines `text` takes when wrapped at word boundaries to `width` (as
/// `Paragraph`'s word wrap does, give or take a line, which the caller's margin absorbs).
fn wrapped_lines(text: &str, width: usize) -> usize {
    let width = width.max(1);
    let mut lines = 1;
    let mut used = 0;
    for word in text.split(' ') {
        let len = word.chars().count();
        let need = if used == 0 { len } else { used + 1 + len };
        if need <= width {
            used = need;
            continue;
        }
        // A new line (unless this one is still empty), plus the lines a long word fills.
        lines += usize::from(used > 0) + len.saturating_sub(1) / width;
        used = len.saturating_sub(1) % width + usize::from(len > 0);
    }
    lines
}

/// `HH:MM:SS` of an epoch-milliseconds time, UTC.
fn clock_of(ms: i64) -> String {
    let s = ms.div_euclid(1000).rem_euclid(86_400);
    format!("{:02}:{:02}:{:02}", s / 3600, s % 3600 / 60, s % 60)
}

/// `text` cut from the left (`…` and its tail), for paths.
fn fit_left(text: &str, width: usize) -> String {
    let count = text.chars().count();
    if count <= width {
        return text.to_owned();
    }
    let tail: String = text.chars().skip(count - width.saturating_sub(1)).collect();
    format!("…{tail}")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_cut_from_the_left_and_clocks_are_utc() {
        assert_eq!(fit_left("/home/me/project", 20), "/home/me/project");
        assert_eq!(fit_left("/home/me/project", 9), "…/project");
        assert_eq!(clock_of(1_795_983_936_123), "20:25:36");
    }

    #[test]
    fn dialog_text_is_measured_as_it_wraps_and_details_drop_what_does_not_fit() {
        assert_eq!(wrapped_lines("", 10), 1);
        assert_eq!(wrapped_lines("aaaa bbbb", 9), 1);
        assert_eq!(wrapped_lines("aaaa bbbbb", 9), 2);
        assert_eq!(wrapped_lines("aaaaaaaaaaaaaaaaaaaa", 9), 3);
        let parts = ["run_1 running for 3s".to_owned(), "in bash".to_owned()];
        let fit = |width| fit_parts(&parts, width, Printing::Escaped);
        assert_eq!(fit(40), "run_1 running for 3s · in bash");
        assert_eq!(fit(25), "run_1 running for 3s");
        assert_eq!(fit(10), "run_1 run…");
    }
}
