// Rule: the minting authority exists once per process (`Supervisor::take` hands it to its
// first caller); a second one cannot be made from the first.
use subzero_core::lifecycle::Supervisor;

fn main() {
    let Some(first) = Supervisor::take() else { return };
    let _second = first.clone();
}
