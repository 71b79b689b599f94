// Rule: worker capabilities come only from the worker's parsed hello; a caller cannot claim
// steering by building them (the field is private).
use subzero_core::lifecycle::WorkerCapabilities;
use subzero_ui_tests::running;

fn main() {
    let child = running();
    let capabilities = WorkerCapabilities { steering: true };
    if let Some(steering) = capabilities.steering() {
        let _ = child.steer(steering);
    }
}
