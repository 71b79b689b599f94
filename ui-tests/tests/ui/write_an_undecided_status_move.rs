// Rule: a run's status moves only as the core decided; a move the core did not decide
// (completed back to running) cannot be built, so the store cannot be handed one.
use subzero_core::lifecycle::RunMove;
use subzero_core::{RunId, RunStatus};

fn main() {
    let _undecided = RunMove {
        run: RunId::generate(),
        from: RunStatus::Completed,
        to: RunStatus::Running,
    };
}
