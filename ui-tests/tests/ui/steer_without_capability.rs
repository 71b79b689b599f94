// Rule: steering needs the worker's advertised steering capability, not its raw hello data.
use subzero_ui_tests::{capabilities, running};

fn main() {
    let child = running();
    let _run = child.steer(capabilities());
}
