// Rule: only the store materialises a child from stored data: loading needs the store's
// StorageKey, which is private to the store.
use subzero_core::lifecycle::{AnyChild, ChildRecord};

fn load(record: ChildRecord) -> AnyChild {
    AnyChild::load(record, &subzero_runtime::store::STORAGE_KEY).unwrap()
}

fn main() {
    let _ = load;
}
