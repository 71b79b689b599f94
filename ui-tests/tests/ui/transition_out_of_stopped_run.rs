// Rule: no transition leaves a stopped run; a stop is final.
use subzero_ui_tests::stopped_run;

fn main() {
    let stopped = stopped_run();
    let _ = stopped.start();
}
