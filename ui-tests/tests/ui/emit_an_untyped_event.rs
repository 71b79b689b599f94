// Rule: the store records only typed events (the core's EventBody); a kind string and a
// JSON payload are not an event.
use subzero_core::ChildId;
use subzero_runtime::store::Store;

async fn emit(store: &Store, child: ChildId) {
    let _ = store
        .append_event(child, "bk_ME", ("text", serde_json::json!({"text": "hi"})))
        .await;
}

fn main() {
    let _ = emit;
}
