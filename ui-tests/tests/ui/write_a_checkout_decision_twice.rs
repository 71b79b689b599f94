// Rule: the ledger writes a checkout decision once: the store's write takes it by value,
// so the same decision cannot be written a second time.
use subzero_core::lifecycle::checkout::InUse;
use subzero_core::lifecycle::CheckoutDecided;
use subzero_runtime::store::Store;

fn write_twice(store: &Store, decided: CheckoutDecided<InUse>) {
    let _ = store.write_checkout(decided);
    let _ = store.write_checkout(decided);
}

fn main() {
    let _ = write_twice;
}
