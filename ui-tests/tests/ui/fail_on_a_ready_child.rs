// Rule: only a child with an active run can have it fail; a ready child has none.
use subzero_core::RunId;
use subzero_ui_tests::{failure, ready};

fn main() {
    let child = ready();
    let _ = child.fail(RunId::generate(), failure());
}
