// Rule: an interrupted child takes no follow-up; only resume (with a message) starts a run.
use subzero_core::RunId;
use subzero_ui_tests::interrupted;

fn main() {
    let child = interrupted();
    let _ = child.followup(RunId::generate(), "continue".to_owned());
}
