// Rule: a queued run starts only on a ready child; an interrupted child takes a run only
// through resume_with.
use subzero_core::lifecycle::Run;
use subzero_core::RunId;
use subzero_ui_tests::interrupted;

fn main() {
    let child = interrupted();
    let run = Run::queued(child.id(), RunId::generate(), "go".to_owned());
    let _ = child.start(run);
}
