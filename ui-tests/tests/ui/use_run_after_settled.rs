// Rule: a settled run is gone: its transitions consumed it.
use subzero_core::lifecycle::Failure;
use subzero_core::ErrorCode;
use subzero_ui_tests::running_run;

fn main() {
    let run = running_run();
    let id = run.id();
    let _failed = run.fail(Failure { code: ErrorCode::ModelRequestFailed, message: "503".into() });
    let _ = run.request_stop(id);
}
