//! One child's event stream: a header naming the child, the events that fit (newest at the
//! bottom, or scrolled back), the keys.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use subzero_protocol::ChildEvent;

use super::table::state_phase_cell;
use super::{Palette, Tone, footer};
use crate::inspect::document::Read;
use crate::watch::app::{App, Screen};
use crate::watch::format;

pub(super) fn draw_events(frame: &mut Frame<'_>, app: &mut App, area: Rect, palette: Palette) {
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
fn event_line(event: &Read<ChildEvent>, palette: Palette) -> Line<'static> {
    // The plain `subzero logs` line is tab-separated: seq, at, type, details (one-line
    // fields: a tab or a newline in them is escaped, or a space in the piped board).
    let plain = crate::inspect::events::line(event.as_ref().ok(), false, palette.printing);
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
