//! `subzero watch`: a live terminal view of a workspace's children — state and phase,
//! template, model, turns and tokens, elapsed time, current tool, last event — with keys to
//! open one child's event stream, stop its run, and quit.
//!
//! What callers may rely on:
//! - It reads the store read-only, as `subzero ls` does (`Store::open_read_only`), every
//!   `--interval-ms` (500 ms by default; `subzero_get` re-checks every 100 ms), and reads
//!   nothing when the database and WAL files did not change (see [`board`]). It never talks
//!   to the broker that owns a child, and starts one only to stop a run whose owner is gone.
//! - `s` stops the selected child's run after a `y`: see [`stop`] for how a stop from a
//!   process that is not the owning broker is carried out (or refused, saying what to do).
//! - With stdout not a terminal it prints the board once as plain text and exits, so
//!   `subzero watch | cat` is a snapshot. Colour only on a terminal and without `NO_COLOR`.
//! - What children, models and hosts wrote (answers, errors, model names, paths) is drawn
//!   escaped (`crate::terminal_text`): a control character or bidi override shows as
//!   `\x1b` or `\u{202e}`, never acts on the terminal; the piped board has them as spaces.
//! - A failure prints `error[code]: message` on stderr and exits 1, like `subzero ls`.

mod app;
mod board;
mod child;
mod format;
mod stop;
mod stream;
mod view;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crossterm::event::{self, Event, KeyEventKind};
use ratatui::widgets::TableState;
use subzero_core::ChildId;
use subzero_runtime::paths::{PathEnv, resolve_config_path};

use crate::inspect::{self, Failure, InspectError, Outcome, StateDirArg};
use crate::terminal_text::Printing;
use app::{Action, App, Dialog, Screen};
use board::Reader;
use stop::StopContext;
use stream::Stream;

/// Flags of `subzero watch`.
#[derive(Debug, Clone, clap::Args)]
pub struct WatchArgs {
    /// The workspace whose children to show (default: the nearest workspace at or above the
    /// current directory that has children, else the current directory).
    #[arg(long, value_name = "DIR", conflicts_with = "all")]
    pub workspace: Option<PathBuf>,
    /// Show the children of every workspace.
    #[arg(long)]
    pub all: bool,
    /// How often to re-read the store, in milliseconds.
    #[arg(long, default_value_t = 500, value_name = "MS",
          value_parser = clap::value_parser!(u64).range(200..=60_000))]
    pub interval_ms: u64,
    /// The configuration a broker started to stop a run reads (default: as `subzero mcp`:
    /// $SUBZERO_CONFIG, else $XDG_CONFIG_HOME/subzero/config.toml).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub state_dir: StateDirArg,
}

/// `subzero watch`.
pub fn run(args: WatchArgs) -> u8 {
    inspect::exit_code(watch(args))
}

fn watch(args: WatchArgs) -> Outcome {
    let runtime = inspect::runtime()?;
    let mut reader = Reader::open(
        args.state_dir.state_dir.as_deref(),
        args.workspace.as_deref(),
        args.all,
    )?;
    let terminal = std::io::stdout().is_terminal();
    let color = terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let mut app = App::new(reader.target().clone(), color, Printing::of_stdout(false));
    runtime.block_on(reader.refresh(&mut app.board, true))?;
    if !terminal {
        let width = std::env::var("COLUMNS")
            .ok()
            .and_then(|c| c.parse::<u16>().ok())
            .filter(|w| *w >= 40)
            .unwrap_or(100);
        let text = view::board_text(&mut app, width, format::now_ms());
        return inspect::written(std::io::Write::write_all(
            &mut std::io::stdout().lock(),
            text.as_bytes(),
        ));
    }
    let config = resolve_config_path(args.config.as_deref(), &PathEnv::from_process())?;
    let context = StopContext {
        paths: reader.paths().clone(),
        config,
    };
    let interval = Duration::from_millis(args.interval_ms);
    let mut session = Session {
        runtime,
        reader,
        context,
        interval,
    };
    let mut terminal =
        ratatui::try_init().map_err(|e| io_failure("start the terminal view", &e))?;
    let outcome = session.run(&mut terminal, &mut app);
    ratatui::restore();
    outcome
}

/// The loop's resources.
struct Session {
    runtime: tokio::runtime::Runtime,
    reader: Reader,
    context: StopContext,
    interval: Duration,
}

impl Session {
    /// Draw, wait for a key until the next refresh is due, carry out what the key asks,
    /// refresh; until `q`.
    fn run(&mut self, terminal: &mut ratatui::DefaultTerminal, app: &mut App) -> Outcome {
        let mut table = TableState::default();
        let mut next = Instant::now() + self.interval;
        loop {
            terminal
                .draw(|frame| view::draw(frame, app, &mut table, format::now_ms()))
                .map_err(|e| io_failure("draw", &e))?;
            let wait = next.saturating_duration_since(Instant::now());
            if event::poll(wait).map_err(|e| io_failure("read the terminal", &e))? {
                match event::read().map_err(|e| io_failure("read the terminal", &e))? {
                    Event::Key(key) if key.kind != KeyEventKind::Release => match app.key(key) {
                        Action::Quit => return Ok(()),
                        Action::OpenEvents(child) => self.open_events(app, &child)?,
                        Action::Stop => {
                            // Show "Stopping…" while the stop is under way.
                            terminal
                                .draw(|frame| view::draw(frame, app, &mut table, format::now_ms()))
                                .map_err(|e| io_failure("draw", &e))?;
                            self.stop(app);
                            next = Instant::now();
                        }
                        Action::None => {}
                    },
                    _ => {}
                }
            }
            if Instant::now() >= next {
                self.refresh(app)?;
                next = Instant::now() + self.interval;
            }
        }
    }

    fn refresh(&mut self, app: &mut App) -> Outcome {
        let changed = self
            .runtime
            .block_on(self.reader.refresh(&mut app.board, false))?;
        if let (Screen::Events(stream), Some(store)) = (&mut app.screen, self.reader.store())
            && changed
        {
            self.runtime.block_on(stream.refresh(store))?;
        }
        Ok(())
    }

    fn open_events(&mut self, app: &mut App, child: &str) -> Outcome {
        let (Some(line), Some(store)) = (app.board.line(child), self.reader.store()) else {
            return Ok(());
        };
        let id = ChildId::parse(child)
            .map_err(|e| InspectError::new(subzero_core::ErrorCode::Internal, e.to_string()))?;
        let mut stream = Stream::open(id, line.scope.clone(), line.next_event_seq);
        self.runtime.block_on(stream.refresh(store))?;
        app.screen = Screen::Events(stream);
        Ok(())
    }

    fn stop(&mut self, app: &mut App) {
        let Some(Dialog::Stopping(target)) = app.dialog.take() else {
            return;
        };
        let outcome = self.runtime.block_on(stop::stop(&target, &self.context));
        let title = match outcome {
            stop::StopOutcome::Refused(_) => " Not stopped ",
            stop::StopOutcome::Answered(_) => " Stop ",
            stop::StopOutcome::Failed(_) => " Stop failed ",
        };
        app.dialog = Some(Dialog::Message(title.into(), outcome.text().to_owned()));
    }
}

fn io_failure(what: &str, e: &std::io::Error) -> Failure {
    Failure::Error(InspectError::new(
        subzero_core::ErrorCode::Internal,
        format!("cannot {what}: {e}"),
    ))
}
