// Rule: the minting authority is taken, never built: it has no public constructor.
use subzero_core::lifecycle::Supervisor;

fn main() {
    let _authority = Supervisor { _private: () };
}
