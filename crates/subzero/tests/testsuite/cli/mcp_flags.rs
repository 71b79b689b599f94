//! `subzero mcp`'s flags, parsed by a parser of `mcp` alone (what hosts start is not made to
//! build every other command's parser): the same help, the same refusals, the same exit codes
//! as the whole command line's parser.

use crate::support::cli::subzero;

#[test]
fn mcp_help_lists_its_flags_and_exits_zero() {
    let out = subzero().args(["mcp", "--help"]).output().expect("runs");
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.starts_with("Serve one MCP host over stdio"), "{help}");
    assert!(help.contains("Usage: subzero mcp [OPTIONS]"), "{help}");
    for flag in ["--workspace", "--state-dir", "--config", "--log-file"] {
        assert!(help.contains(flag), "{flag} missing: {help}");
    }
    // The whole parser's list of commands says the same of it.
    let out = subzero().arg("--help").output().expect("runs");
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        help.lines()
            .any(|l| l.trim_start().starts_with("mcp")
                && l.contains("Serve one MCP host over stdio")),
        "{help}"
    );
}

#[test]
fn a_bad_mcp_flag_is_refused_with_usage_and_exit_two() {
    for bad in [
        &["mcp", "--bogus"][..],
        &["mcp", "--version"],
        &["mcp", "--config"],
    ] {
        let out = subzero().args(bad).output().expect("runs");
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.starts_with("error:") && err.contains("--help"),
            "{bad:?}: {err}"
        );
        assert!(out.stdout.is_empty(), "nothing on the MCP channel: {bad:?}");
    }
}
