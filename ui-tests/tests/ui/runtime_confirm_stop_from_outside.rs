// Rule: the runtime records a stop only with StopConfirmed and makes none from what a
// caller holds; only its worker driver mints one, on the worker's cancel_confirmed.
use subzero_runtime::store::Settlement;

fn stopped(reaped: u32) -> Settlement {
    Settlement::Stopped {
        confirmed: reaped.into(),
    }
}

fn main() {
    let _ = stopped;
}
