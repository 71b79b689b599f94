// Rule: only the supervisor mints StopConfirmed; its fields are private.
use subzero_core::lifecycle::StopConfirmed;
use subzero_ui_tests::stopping;

fn main() {
    let child = stopping();
    let proof = StopConfirmed {
        child: child.id(),
        run: child.active_run().id(),
        reaped: 0,
    };
    let _ = child.confirm_stop(proof);
}
