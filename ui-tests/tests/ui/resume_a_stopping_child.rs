// Rule: a child whose stop is pending is still running; it resumes only once it settled.
use subzero_ui_tests::stopping;

fn main() {
    let child = stopping();
    let checkpoint = child.checkpoint(None).unwrap();
    let _ = child.resume(checkpoint);
}
