// Rule: stop exists only on a child with an active run; a ready child has no run to stop.
use subzero_core::RunId;
use subzero_ui_tests::ready;

fn main() {
    let child = ready();
    let _ = child.stop(RunId::generate());
}
