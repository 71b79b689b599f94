// Rule: no transition leaves a terminal run (completed, failed, stopped, interrupted).
use subzero_ui_tests::completed_run;

fn main() {
    let done = completed_run();
    let id = done.id();
    let _ = done.request_stop(id);
}
