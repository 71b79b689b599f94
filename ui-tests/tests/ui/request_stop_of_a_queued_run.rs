// Rule: only the active (running) run can be asked to stop; a queued run is withdrawn by
// its child's stop instead.
use subzero_ui_tests::queued_run;

fn main() {
    let run = queued_run();
    let id = run.id();
    let _ = run.request_stop(id);
}
