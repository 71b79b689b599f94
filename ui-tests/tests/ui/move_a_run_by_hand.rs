// Rule: a run's stored move is a step of its lifecycle, by type; a move no transition
// makes — a stopped run back to running — does not compile.
use subzero_core::lifecycle::{Run, RunMove};
use subzero_core::lifecycle::run::{Running, Stopped};
use subzero_ui_tests::running;

fn main() {
    let child = running();
    let run: &Run<Running> = child.active_run();
    let _back = RunMove::step::<Stopped, Run<Running>>(run.id(), run);
}
