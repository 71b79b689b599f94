// Rule: worker capabilities cannot be deserialized from caller-supplied JSON; only the
// worker's parsed hello makes them.
use subzero_core::lifecycle::WorkerCapabilities;

fn main() {
    let parsed = serde_json::from_str::<WorkerCapabilities>(r#"{"steering":true}"#);
    let _ = parsed.map(|c| c.steering());
}
