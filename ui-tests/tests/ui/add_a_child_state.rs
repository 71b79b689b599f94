// Rule: the set of child states is closed (sealed); no crate can add one.
use subzero_core::lifecycle::child::ChildPhase;
use subzero_core::ChildState;

struct Paused;

impl ChildPhase for Paused {
    const STATE: ChildState = ChildState::Ready;
}

fn main() {}
