// Rule: the store's key exists once per process (`StorageKey::take`); a second one
// cannot be made from the first to load states elsewhere.
use subzero_core::lifecycle::StorageKey;

fn main() {
    let Some(key) = StorageKey::take() else { return };
    let _second = key.clone();
}
