//! Steers waiting for the active run. The run takes them before each model request; at its
//! final answer it closes the queue only if nothing is pending, atomically, so a steer is
//! either applied as one more turn or refused with a receipt — never lost.

use std::sync::{Mutex, PoisonError};

use crate::control::Steer;

#[derive(Debug)]
struct State {
    accepting: bool,
    pending: Vec<Steer>,
}

#[derive(Debug)]
pub struct SteerQueue {
    state: Mutex<State>,
}

impl Default for SteerQueue {
    fn default() -> Self {
        Self {
            state: Mutex::new(State {
                accepting: true,
                pending: Vec::new(),
            }),
        }
    }
}

impl SteerQueue {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues a steer; gives it back when the run no longer accepts steers.
    pub fn offer(&self, steer: Steer) -> Result<(), Steer> {
        let mut state = self.lock();
        if state.accepting {
            state.pending.push(steer);
            Ok(())
        } else {
            Err(steer)
        }
    }

    /// Takes every pending steer.
    pub fn take(&self) -> Vec<Steer> {
        std::mem::take(&mut self.lock().pending)
    }

    /// At the final answer: closes the queue if nothing is pending (true), else keeps it open.
    pub fn close_if_empty(&self) -> bool {
        let mut state = self.lock();
        if state.pending.is_empty() {
            state.accepting = false;
            true
        } else {
            false
        }
    }

    /// Closes the queue and returns the steers that will never be applied.
    pub fn close(&self) -> Vec<Steer> {
        let mut state = self.lock();
        state.accepting = false;
        std::mem::take(&mut state.pending)
    }
}
