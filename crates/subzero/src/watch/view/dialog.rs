//! The dialogs over the view: confirming a stop, a stop under way, a message.

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span, Text};
use ratatui::widgets::{Block, Clear, Paragraph, Wrap};

use super::{Palette, Tone};
use crate::watch::app::Dialog;

pub(super) fn draw_dialog(frame: &mut Frame<'_>, dialog: &Dialog, area: Rect, palette: Palette) {
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
pub(super) fn wrapped_lines(text: &str, width: usize) -> usize {
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
