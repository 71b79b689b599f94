// Rule: a decision is written once: `commit` consumes it, so a second write of the same
// decision does not compile.
use subzero_core::lifecycle::Decided;

fn write_twice(decided: Decided<()>) {
    let _ = decided.commit(|_| Ok::<(), ()>(()));
    let _ = decided.commit(|_| Ok::<(), ()>(()));
}

fn main() {
    let _ = write_twice;
}
