//! The selected child's details: its id and label; its template, state, checkout and
//! workspace; its model; its run (running, or how the last one ended, with turns and tokens);
//! its last event.

use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};

use super::table::{change_tone, state_tone};
use super::{Palette, Tone, fit_left};
use crate::terminal_text::Printing;
use crate::watch::child::ChildLine;
use crate::watch::format;

/// Height of the details pane (borders included).
pub(super) const DETAILS: u16 = 6;

/// The details pane of `line`, `width` columns wide.
pub(super) fn details_pane(
    line: &ChildLine,
    width: u16,
    palette: Palette,
    now_ms: i64,
) -> Paragraph<'static> {
    let room = usize::from(width.saturating_sub(2));
    let (run_label, run) = run_parts(line, now_ms);
    let run = fit_parts(
        &run,
        room.saturating_sub(run_label.len() + 1),
        palette.printing,
    );
    let model = format!("{} at {} ({})", line.model, line.model_url, line.api);
    let text = vec![
        title_line(line, room, palette),
        labelled("model", model, room, palette),
        labelled(run_label, run, room, palette),
        labelled("last event", last_event(line), room, palette),
    ];
    let title = match line.label.as_str() {
        "" => format!(" {} ", line.id),
        label => format!(" {} · {} ", line.id, palette.printing.field(label)),
    };
    Paragraph::new(text).block(Block::bordered().title(title))
}

/// The template in bold, the state (and phase, unless idle) in its tone, an isolated
/// child's change, then the workspace, cut from the left to what is left of `room`.
fn title_line(line: &ChildLine, room: usize, palette: Palette) -> Line<'static> {
    let printing = palette.printing;
    let phase = if line.phase == "idle" {
        line.state.clone()
    } else {
        format!("{} ({})", line.state, line.phase)
    };
    let change = line
        .change
        .as_ref()
        .map(|(text, state)| (format!(" · {text}"), change_tone(*state)));
    let change_len = change.as_ref().map_or(0, |(t, _)| t.chars().count());
    let workspace = fit_left(
        &printing.field(&line.scope.root().display().to_string()),
        room.saturating_sub(line.template.len() + phase.len() + change_len + 4),
    );
    let mut spans = vec![
        Span::styled(
            format!("{} ", printing.field(&line.template)),
            palette.bold(),
        ),
        Span::styled(phase, palette.style(state_tone(line))),
    ];
    if let Some((text, tone)) = change {
        spans.push(Span::styled(text, palette.style(tone)));
    }
    spans.push(Span::styled(
        format!(" · {workspace}"),
        palette.style(Tone::Dim),
    ));
    Line::from(spans)
}

/// `label text`, the label dimmed, the text fitted to what is left of `room`.
fn labelled(label: &str, text: String, room: usize, palette: Palette) -> Line<'static> {
    let text = format::fit(
        &text,
        room.saturating_sub(label.chars().count() + 1),
        palette.printing,
    );
    Line::from(vec![
        Span::styled(format!("{label} "), palette.style(Tone::Dim)),
        Span::raw(text),
    ])
}

/// The run line's label and parts: the active run, else how the last one ended, else none.
fn run_parts(line: &ChildLine, now_ms: i64) -> (&'static str, Vec<String>) {
    match (&line.active_run, &line.last_run) {
        (Some(run), _) => ("run", active_run_parts(line, run, now_ms)),
        (None, Some((run, status))) => ("last run", last_run_parts(line, run, status)),
        (None, None) => ("run", vec!["none yet".to_owned()]),
    }
}

/// How long the run has been going, its tool and the runs queued behind it; turns and
/// tokens are known only when it settles.
fn active_run_parts(line: &ChildLine, run: &str, now_ms: i64) -> Vec<String> {
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
    parts
}

/// How the last run ended and after how long, with its turns and tokens.
fn last_run_parts(line: &ChildLine, run: &str, status: &str) -> Vec<String> {
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
    parts
}

/// `#seq HH:MM:SS text` of the last event, or `none`.
fn last_event(line: &ChildLine) -> String {
    match &line.last_event {
        Some(e) => format!("#{} {} {}", e.seq, format::clock(&e.at), e.text),
        None => "none".to_owned(),
    }
}
/// `parts` joined by ` · `, leaving out trailing parts that do not fit `width` (the first is
/// always kept, cut if it must be).
pub(super) fn fit_parts(parts: &[String], width: usize, printing: Printing) -> String {
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
