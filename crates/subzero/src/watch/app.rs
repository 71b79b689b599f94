//! What `watch` shows and how keys change it. No I/O here: a key returns an [`Action`] the
//! loop carries out (read a stream, stop a run, quit).

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::board::{Board, Target};
use super::child::ChildLine;
use super::stop::StopTarget;
use super::stream::Stream;
use crate::terminal_text::Printing;

/// The screen under any dialog.
#[derive(Debug)]
pub enum Screen {
    /// Every child, one per row.
    Board,
    /// One child's event stream.
    Events(Stream),
}

/// A dialog over the screen.
#[derive(Debug, Clone)]
pub enum Dialog {
    /// "Stop this run?" — `y` stops it, anything else keeps it running.
    ConfirmStop(StopTarget, String),
    /// A stop is being carried out.
    Stopping(StopTarget),
    /// A message; any key closes it.
    Message(String, String),
}

/// What the loop does after a key.
#[derive(Debug, PartialEq, Eq)]
pub enum Action {
    /// Nothing beyond redrawing.
    None,
    /// Open the event stream of this child.
    OpenEvents(String),
    /// Carry out the confirmed stop (the dialog shows [`Dialog::Stopping`]).
    Stop,
    /// Leave.
    Quit,
}

/// The whole state of the view.
#[derive(Debug)]
pub struct App {
    /// The children, as last read.
    pub board: Board,
    /// What the board shows.
    pub target: Target,
    /// The selected child, by id (selection follows a child as the order changes).
    pub selected: Option<String>,
    /// The screen and the dialog over it.
    pub screen: Screen,
    pub dialog: Option<Dialog>,
    /// Rows of the board the last frame had room for (paging moves by this).
    pub page_rows: usize,
    /// Colour on (a terminal, no `NO_COLOR`).
    pub color: bool,
    /// How text written by others is drawn: escaped in the terminal view, plain (controls
    /// as spaces) in the board printed to a pipe.
    pub printing: Printing,
}

impl App {
    /// An empty view of `target`.
    pub fn new(target: Target, color: bool, printing: Printing) -> App {
        App {
            board: Board::default(),
            target,
            selected: None,
            screen: Screen::Board,
            dialog: None,
            page_rows: 10,
            color,
            printing,
        }
    }

    /// The index of the selected child in board order (the first when none is selected or
    /// the selected one went away).
    pub fn selected_index(&self) -> Option<usize> {
        if self.board.lines.is_empty() {
            return None;
        }
        let found = self
            .selected
            .as_deref()
            .and_then(|id| self.board.lines.iter().position(|l| l.id == id));
        Some(found.unwrap_or(0))
    }

    /// The selected child's line.
    pub fn selected_line(&self) -> Option<&ChildLine> {
        self.selected_index().map(|i| &self.board.lines[i])
    }

    /// Handle one key press.
    pub fn key(&mut self, key: KeyEvent) -> Action {
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            return Action::Quit;
        }
        match self.dialog.take() {
            Some(Dialog::ConfirmStop(target, _))
                if matches!(key.code, KeyCode::Char('y' | 'Y')) =>
            {
                self.dialog = Some(Dialog::Stopping(target));
                return Action::Stop;
            }
            Some(Dialog::Stopping(target)) => {
                // Busy: keys wait until the answer is shown.
                self.dialog = Some(Dialog::Stopping(target));
                return Action::None;
            }
            // Any other key answers "no" to a confirmation and closes a message.
            Some(_) => return Action::None,
            None => {}
        }
        match self.screen {
            Screen::Board => self.board_key(key.code),
            Screen::Events(_) => self.events_key(key.code),
        }
    }

    fn events_key(&mut self, code: KeyCode) -> Action {
        let page = self.page_rows as isize;
        let Screen::Events(stream) = &mut self.screen else {
            return Action::None;
        };
        match code {
            KeyCode::Char('q') => return Action::Quit,
            KeyCode::Up | KeyCode::Char('k') => scroll(stream, 1),
            KeyCode::Down | KeyCode::Char('j') => scroll(stream, -1),
            KeyCode::PageUp => scroll(stream, page),
            KeyCode::PageDown => scroll(stream, -page),
            KeyCode::Home | KeyCode::Char('g') => scroll(stream, isize::MAX),
            KeyCode::End | KeyCode::Char('G' | 'f') => stream.scroll = 0,
            KeyCode::Char('s') => {
                let child = stream.child.to_string();
                self.ask_stop(&child);
            }
            KeyCode::Esc | KeyCode::Backspace | KeyCode::Left | KeyCode::Char('h') => {
                self.screen = Screen::Board;
            }
            _ => {}
        }
        Action::None
    }

    fn board_key(&mut self, code: KeyCode) -> Action {
        let len = self.board.lines.len();
        let at = self.selected_index().unwrap_or(0);
        let step = self.page_rows.max(1);
        let to = match code {
            KeyCode::Char('q') | KeyCode::Esc => return Action::Quit,
            KeyCode::Enter | KeyCode::Right | KeyCode::Char('l' | 'e') => {
                return match self.selected_line() {
                    Some(line) => Action::OpenEvents(line.id.clone()),
                    None => Action::None,
                };
            }
            KeyCode::Char('s') => {
                if let Some(id) = self.selected_line().map(|l| l.id.clone()) {
                    self.ask_stop(&id);
                }
                return Action::None;
            }
            KeyCode::Up | KeyCode::Char('k') => at.saturating_sub(1),
            KeyCode::Down | KeyCode::Char('j') => at + 1,
            KeyCode::PageUp => at.saturating_sub(step),
            KeyCode::PageDown => at + step,
            KeyCode::Home | KeyCode::Char('g') => 0,
            KeyCode::End | KeyCode::Char('G') => len,
            _ => return Action::None,
        };
        if len > 0 {
            self.selected = Some(self.board.lines[to.min(len - 1)].id.clone());
        }
        Action::None
    }

    /// The confirmation for stopping `child`'s run, or a message saying there is none.
    fn ask_stop(&mut self, child: &str) {
        let Some(line) = self.board.line(child) else {
            return;
        };
        let Some(run) = line.active_run.clone() else {
            self.dialog = Some(Dialog::Message(
                "Nothing to stop".into(),
                format!(
                    "{} has no active run (it is {}).",
                    line.id,
                    if line.state == "interrupted" {
                        "interrupted; subzero_resume continues it"
                    } else {
                        line.state.as_str()
                    }
                ),
            ));
            return;
        };
        let mut question = format!(
            "Stop run {run} of {} ({}, {})?",
            line.id, line.template, line.phase
        );
        if line.queued > 0 {
            question.push_str(&format!(
                " The {} queued follow-up{} would be withdrawn.",
                line.queued,
                if line.queued == 1 { "" } else { "s" }
            ));
        }
        let target = StopTarget {
            child: line.id.clone(),
            run,
            workspace: line.scope.root().to_path_buf(),
            owner_token: line.owner_token.clone(),
        };
        self.dialog = Some(Dialog::ConfirmStop(target, question));
    }
}

/// Scroll `by` lines towards older events (negative: towards the newest).
fn scroll(stream: &mut Stream, by: isize) {
    let max = stream.events.len().saturating_sub(1);
    stream.scroll = stream.scroll.saturating_add_signed(by).min(max);
}
