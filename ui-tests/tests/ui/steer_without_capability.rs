// Rule: steering needs the worker's advertised steering capability, not its raw hello data.
use subzero_core::lifecycle::WorkerCapabilities;
use subzero_ui_tests::running;

fn main() {
    let child = running();
    let _run = child.steer(WorkerCapabilities { steering: false });
}
