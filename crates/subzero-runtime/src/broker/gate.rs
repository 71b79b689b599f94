//! Whether the broker still takes work: open until the host is gone, then closing, which
//! ends every wait at once.

use std::sync::atomic::{AtomicBool, Ordering};

use subzero_core::ErrorCode;
use tokio::sync::watch;

use super::BrokerError;

/// The broker's door: open, or shutting down.
#[derive(Debug)]
pub(super) struct Gate {
    shutting_down: AtomicBool,
    /// Becomes true when the host is gone (stdin EOF or a signal): waits end at once.
    closing: watch::Sender<bool>,
}

impl Gate {
    pub(super) fn new() -> Gate {
        Gate {
            shutting_down: AtomicBool::new(false),
            closing: watch::Sender::new(false),
        }
    }

    /// Accept no new work and end every wait now.
    pub(super) fn close(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
        self.closing.send_replace(true);
    }

    /// Whether the host is gone.
    pub(super) fn is_closed(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }

    /// `runtime_shutting_down` once the gate is closed.
    pub(super) fn check_open(&self) -> Result<(), BrokerError> {
        if self.is_closed() {
            return Err(BrokerError::new(
                ErrorCode::RuntimeShuttingDown,
                "this broker is shutting down and accepts no new work; the host will start a new one",
            ));
        }
        Ok(())
    }

    /// A receiver that changes when the gate closes.
    pub(super) fn closing(&self) -> watch::Receiver<bool> {
        self.closing.subscribe()
    }
}
