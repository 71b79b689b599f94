// Rule: the runtime exposes no function that mints StopConfirmed; only its worker driver
// mints one, on the worker's cancel_confirmed.
use subzero_core::{ChildId, RunId};
use subzero_runtime::supervisor::proof;

fn main() {
    let _ = proof::confirm_stop(ChildId::generate(), RunId::generate(), 0);
}
