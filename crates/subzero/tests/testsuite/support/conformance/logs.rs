//! The workers' stderr as the broker sees it: `WorkerConn` forwards each line to `tracing`
//! (target `subzero::worker`, field `worker` = the connection's label); this subscriber keeps
//! them per label, so a case can search a worker's log as it searched its stderr.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{LazyLock, Mutex, Once};

use tracing::field::{Field, Visit};
use tracing_subscriber::layer::SubscriberExt;

static LINES: LazyLock<Mutex<HashMap<String, String>>> = LazyLock::new(Mutex::default);

/// Installs the capturing subscriber once per test process.
pub fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let subscriber = tracing_subscriber::registry().with(Capture);
        // Another subscriber set first (none in these tests) would keep the logs from us.
        let _ = tracing::subscriber::set_global_default(subscriber);
    });
}

/// The log lines of the worker labelled `label`.
pub fn of(label: &str) -> String {
    LINES
        .lock()
        .expect("logs")
        .get(label)
        .cloned()
        .unwrap_or_default()
}

struct Capture;

#[derive(Default)]
struct Line {
    worker: Option<String>,
    message: String,
}

impl Visit for Line {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "worker" => self.worker = Some(value.to_owned()),
            "message" => self.message.push_str(value),
            _ => {}
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "worker" => self.worker = Some(format!("{value:?}")),
            "message" => {
                let _ = write!(self.message, "{value:?}");
            }
            _ => {}
        }
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Capture {
    fn on_event(
        &self,
        event: &tracing::Event<'_>,
        _ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        if event.metadata().target() != "subzero::worker" {
            return;
        }
        let mut line = Line::default();
        event.record(&mut line);
        if let Some(worker) = line.worker {
            let mut all = LINES.lock().expect("logs");
            let text = all.entry(worker).or_default();
            text.push_str(&line.message);
            text.push('\n');
        }
    }
}
