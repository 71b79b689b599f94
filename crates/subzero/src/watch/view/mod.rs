//! Drawing the view with ratatui: the board (a header, a table of children, the selected
//! child's details, the keys), one child's event stream, and the dialogs.
//!
//! Laid out for 80×24 and up: at 80 columns one STATE column shows the phase of a running
//! child (`starting`, `model`, `tool`, `stopping`) and the state of the others (`ready`,
//! `interrupted`, `recovery`), and the model is in the details; from [`WIDE`] columns on,
//! STATE, PHASE and MODEL are columns of their own, and from [`WIDER`] on CHANGE (an
//! isolated child's checkout: `+12 −3 in 2 files, settled`, `applied`, `in use`; at any width
//! it is in the details). Without colour (`NO_COLOR`, not a terminal) the selection is shown
//! in reverse video and nothing else is styled.

mod board;
mod details;
mod dialog;
mod events;
mod table;

use ratatui::Frame;
use ratatui::layout::{Alignment, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Span;
use ratatui::widgets::{Paragraph, TableState};

use super::app::{App, Screen};
use crate::terminal_text::Printing;

pub use board::board_text;

/// From this width on, STATE, PHASE and MODEL get columns of their own.
pub const WIDE: u16 = 110;
/// From this width on, an isolated child's change gets a column of its own (narrower, it is
/// in the details).
pub const WIDER: u16 = 130;

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
        Screen::Board => board::draw_board(frame, app, table, area, palette, now_ms),
        Screen::Events(_) => events::draw_events(frame, app, area, palette),
    }
    if let Some(dialog) = &app.dialog {
        dialog::draw_dialog(frame, dialog, area, palette);
    }
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

/// `text` cut from the left (`…` and its tail), for paths.
fn fit_left(text: &str, width: usize) -> String {
    let count = text.chars().count();
    if count <= width {
        return text.to_owned();
    }
    let tail: String = text.chars().skip(count - width.saturating_sub(1)).collect();
    format!("…{tail}")
}

#[cfg(test)]
mod tests {
    use super::board::clock_of;
    use super::details::fit_parts;
    use super::dialog::wrapped_lines;
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
