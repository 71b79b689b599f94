// Rule: the authority to mint capability tokens is designated only in an `unsafe` block,
// at the point where the evidence is observed; safe code cannot obtain it.
use subzero_core::lifecycle::Supervisor;

fn main() {
    let supervisor = Supervisor::designate();
    let _ = supervisor.capabilities(true);
}
