// Rule: the storage key is designated only in an `unsafe` block, once, in the store; safe
// code cannot obtain it and load states no transition produced.
use subzero_core::lifecycle::StorageKey;

fn main() {
    let _key = StorageKey::designate();
}
