//! An isolated child's checkout in a few words, for `ls`, `watch` and `gc`: where it is in
//! its life and the change it holds (`+12 −3 in 2 files, settled`). A child that works in
//! the workspace itself has no checkout and shows nothing.

use std::collections::HashMap;

use subzero_core::CheckoutState;
use subzero_runtime::scope::WorkspaceScope;
use subzero_runtime::store::{CheckoutFilter, CheckoutRow, Store};

use super::InspectError;
use super::table::Tone;

/// What the checkout holds and where it is, e.g. `+12 −3 in 2 files, settled`, `in use`,
/// `no change`.
pub fn change_text(row: &CheckoutRow) -> String {
    let stats = match (row.files_changed, row.insertions, row.deletions) {
        (Some(files), Some(ins), Some(del)) => Some(format!(
            "+{ins} −{del} in {files} file{}",
            if files == 1 { "" } else { "s" }
        )),
        _ => None,
    };
    let state = state_words(row.state);
    match stats {
        Some(stats) => format!("{stats}, {state}"),
        None => state.to_owned(),
    }
}

/// The checkout's state as a person says it.
pub fn state_words(state: CheckoutState) -> &'static str {
    match state {
        CheckoutState::Prepared => "prepared",
        CheckoutState::InUse => "in use",
        CheckoutState::SettledChanged => "settled",
        CheckoutState::SettledUnchanged => "no change",
        CheckoutState::Applied => "applied",
        CheckoutState::Discarded => "discarded",
        CheckoutState::Removed => "removed",
    }
}

/// How a checkout in `state` is emphasized: an unapplied change asks for attention.
pub fn tone(state: CheckoutState) -> Tone {
    match state {
        CheckoutState::SettledChanged => Tone::Yellow,
        CheckoutState::InUse => Tone::Green,
        CheckoutState::Prepared => Tone::Plain,
        CheckoutState::SettledUnchanged
        | CheckoutState::Applied
        | CheckoutState::Discarded
        | CheckoutState::Removed => Tone::Dim,
    }
}

/// Every checkout of `scope`, by child id.
pub async fn checkouts_of(
    store: &Store,
    scope: &WorkspaceScope,
) -> Result<HashMap<String, CheckoutRow>, InspectError> {
    let filter = CheckoutFilter {
        scope: Some(scope.clone()),
        ..CheckoutFilter::default()
    };
    let rows = store.list_checkouts(filter).await?;
    Ok(rows
        .into_iter()
        .map(|row| (row.child_id.to_string(), row))
        .collect())
}

/// Bytes for a person: `812 B`, `4.5 KiB`, `12.0 MiB`, `1.2 GiB`.
pub fn size_text(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut size = bytes as f64 / 1024.0;
    let mut unit = 0;
    while size >= 1024.0 && unit + 1 < UNITS.len() {
        size /= 1024.0;
        unit += 1;
    }
    format!("{size:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::size_text;

    #[test]
    fn sizes_read_in_binary_units() {
        assert_eq!(size_text(812), "812 B");
        assert_eq!(size_text(4608), "4.5 KiB");
        assert_eq!(size_text(12 << 20), "12.0 MiB");
        assert_eq!(size_text(3 << 40), "3.0 TiB");
    }
}
