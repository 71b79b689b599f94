// Rule: no transition leaves an interrupted run; interrupted means interrupted, nothing
// is replayed.
use subzero_ui_tests::interrupted_run;

fn main() {
    let run = interrupted_run();
    let _ = run.interrupt("again");
}
