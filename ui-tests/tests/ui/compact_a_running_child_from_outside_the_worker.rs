// Rule: only the worker compacts a running child's transcript; the report the core accepts
// (CompactionReported) is minted by the supervisor from the worker's `compacted` line, so
// nobody else can claim a compaction (its fields are private).
use subzero_core::lifecycle::CompactionReported;
use subzero_ui_tests::running;

fn main() {
    let child = running();
    let report = CompactionReported {
        child: child.id(),
        run: child.active_run().id(),
        tokens_before: 9000,
        tokens_after: 900,
        branch_from: "e_1".to_owned(),
    };
    let _ = child.compacted(report);
}
