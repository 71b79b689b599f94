//! What every area of the suite shares: the capabilities a test process takes once. The
//! core hands each out once per process, and every test of this binary runs in it.

use std::sync::OnceLock;

use subzero_core::lifecycle::{StorageKey, Supervisor};

/// The store's key: the tests stand in for the store that reads the records.
pub fn storage_key() -> &'static StorageKey {
    static KEY: OnceLock<StorageKey> = OnceLock::new();
    KEY.get_or_init(|| StorageKey::take().expect("this test process takes the storage key once"))
}

/// The minting authority: the tests stand in for the supervisor that observes the
/// worker's reports.
pub fn supervisor() -> &'static Supervisor {
    static AUTHORITY: OnceLock<Supervisor> = OnceLock::new();
    AUTHORITY
        .get_or_init(|| Supervisor::take().expect("this test process takes the authority once"))
}
