// Rule: custody (who holds a child, at which claim generation) is decided by the core or
// loaded by the store; its fields are private, so nobody can name themselves the owner.
use subzero_core::lifecycle::Custody;
use subzero_core::{ChildState, Ownership};
use subzero_ui_tests::ready;

fn main() {
    let child = ready();
    let _mine = Custody {
        child: child.id(),
        state: ChildState::Ready,
        ownership: Ownership::Owned,
        owner: Some("bk_ME".to_owned()),
        generation: 1,
    };
}
