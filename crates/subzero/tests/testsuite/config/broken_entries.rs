//! One typo in the configuration must not take the MCP server (and all eight tools) away
//! from the host: a broken template (an unknown tool, a bad id, a skill file that is not
//! there), a broken credential entry or a bad `[limits]` value is left out, the rest is
//! served, `subzero_info` lists each broken entry with its file, key and reason, a spawn or
//! a credentialRef that names one answers with that reason (and the code a strict load, or
//! the spawn, would have given it), and `subzero doctor` names
//! each with the fix. Only a file that is not TOML stops the start, naming the file, the
//! line and the column on stderr.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::cli::{DoctorReport, Status, parsed_of};
use crate::support::mcp::*;
use serde_json::json;
use subzero_testkit::Reply;

/// Broken entries appended to a working config: an unknown tool, an id that is no
/// `TemplateId`, a skill file that does not exist, a credential with no origins, a zero
/// limit.
const BROKEN: &str = r#"
[templates.reviewer]
description = "Reviews"
instructions = "Review the change."
tools = ["read", "web_fetch"]

[templates."Bad Id!"]
description = "A template whose id is not a TemplateId"
instructions = "x"
tools = ["read"]

[templates.skilled]
description = "Has a skill file that is not there"
instructions = "x"
tools = ["read"]
skills = [{ name = "style", path = "no-such-skill.md" }]

[templates.fine]
description = "A good user template next to the broken ones"
instructions = "Answer briefly."
tools = ["read", "ls"]

[credentials.broken]
env = "SUBZERO_TEST_KEY"

[limits]
prompt_bytes = 0
"#;

fn problems(info: &p::Info) -> Vec<(String, String, String)> {
    info.config_problems
        .iter()
        .flat_map(|a| a.iter())
        .map(|p| (p.file.to_string(), p.key.to_string(), p.reason.to_string()))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_broken_entry_is_left_out_reported_and_refused_while_the_rest_is_served() {
    let env = Env::new(vec![
        Reply::text("fine done"),
        Reply::text("researcher done"),
    ]);
    let config = std::fs::read_to_string(env.config()).expect("config");
    std::fs::write(env.config(), config + BROKEN).expect("config");
    let s = env.broker("broker").await;

    let info = broker_info(&s).await;
    let found = problems(&info);
    let file = env.config().display().to_string();
    for (key, says) in [
        ("templates.reviewer", "web_fetch"),
        ("templates.Bad Id!", "Bad Id!"),
        ("templates.skilled", "no-such-skill.md"),
        ("credentials.broken", "origins"),
        ("limits.prompt_bytes", "prompt_bytes"),
    ] {
        let problem = found
            .iter()
            .find(|(_, k, _)| k == key)
            .unwrap_or_else(|| panic!("{key} not among the problems: {found:#?}"));
        assert_eq!(problem.0, file, "{problem:?}");
        assert!(problem.2.contains(says), "{key}: {}", problem.2);
    }
    assert_eq!(found.len(), 5, "{found:#?}");
    // The rest is served: the good template, the good credential, the default limit.
    let ids: Vec<&str> = info
        .templates
        .iter()
        .map(|t| t.template_id.as_str())
        .collect();
    assert!(
        ids.contains(&"fine") && !ids.contains(&"reviewer"),
        "{ids:?}"
    );
    assert_eq!(info.limits.prompt_bytes.get(), 65536, "{:#?}", info.limits);

    let refused = call(
        &s,
        "subzero_spawn",
        json!({"prompt": "Review", "templateId": "reviewer", "model": env.model()}),
    )
    .await;
    assert!(refused.is_error);
    // The code a strict load gave it, and the reason.
    assert_eq!(refused.code(), Some("invalid_request"), "{}", refused.text);
    assert!(
        refused.text.contains("web_fetch") && refused.text.contains("templates.reviewer"),
        "{}",
        refused.text
    );
    // Asked twice: a refused template stays refused the same way (nothing was cached).
    for _ in 0..2 {
        let skilled = call(
            &s,
            "subzero_spawn",
            json!({"prompt": "x", "templateId": "skilled", "model": env.model()}),
        )
        .await;
        assert_eq!(
            skilled.code(),
            Some("unsupported_grant"),
            "{}",
            skilled.text
        );
    }
    let mut broken_model = env.model();
    broken_model["credentialRef"] = json!("broken");
    let refused = call(
        &s,
        "subzero_spawn",
        json!({"prompt": "x", "templateId": "fine", "model": broken_model}),
    )
    .await;
    assert_eq!(
        refused.code(),
        Some("credentials_required"),
        "{}",
        refused.text
    );
    assert!(
        refused.text.contains("credentials.broken"),
        "{}",
        refused.text
    );

    let (child, _) = spawn(&s, &env, "fine", "Say done").await;
    let done = settled(&s, &child, Duration::from_secs(60)).await;
    assert_eq!(
        last_status(&done),
        Some(p::TerminalRunStatus::Completed),
        "{done:#?}"
    );
    let (child, _) = spawn(&s, &env, "researcher", "Say done").await;
    let done = settled(&s, &child, Duration::from_secs(60)).await;
    assert_eq!(
        last_status(&done),
        Some(p::TerminalRunStatus::Completed),
        "{done:#?}"
    );
    s.close().await.expect("close");
}

#[test]
fn doctor_names_each_broken_entry_with_its_fix() {
    let env = Env::new(Vec::new());
    let config = std::fs::read_to_string(env.config()).expect("config");
    std::fs::write(env.config(), config + BROKEN).expect("config");
    let out = Command::new(env!("CARGO_BIN_EXE_subzero"))
        .args(["doctor", "--json", "--config"])
        .arg(env.config())
        .arg("--state-dir")
        .arg(env.state_dir())
        .env("SUBZERO_TEST_KEY", KEY)
        .output()
        .expect("doctor runs");
    let report: DoctorReport = parsed_of(&out);
    let checks = &report.checks;
    let entry = |key: &str| {
        checks
            .iter()
            .find(|c| c.name == format!("config entry {key}"))
            .unwrap_or_else(|| panic!("no check for {key}: {report:#?}"))
    };
    for key in [
        "templates.reviewer",
        "credentials.broken",
        "limits.prompt_bytes",
    ] {
        let check = entry(key);
        assert_eq!(check.status, Status::Warn, "{check:#?}");
        assert!(
            check.fix.as_deref().is_some_and(|f| f.contains(key)),
            "{check:#?}"
        );
    }
    let config = checks
        .iter()
        .find(|c| c.name == "config")
        .expect("config check");
    assert_eq!(config.status, Status::Warn, "{config:#?}");
}

#[test]
fn a_file_that_is_not_toml_stops_the_start_naming_file_line_and_column() {
    let env = Env::new(Vec::new());
    let config = std::fs::read_to_string(env.config()).expect("config");
    std::fs::write(
        env.config(),
        config + "\n[templates.reviewer\ndescription = \"x\"\n",
    )
    .expect("config");
    let out = Command::new(env!("CARGO_BIN_EXE_subzero"))
        .arg("mcp")
        .arg("--workspace")
        .arg(env.workspace())
        .arg("--state-dir")
        .arg(env.state_dir())
        .arg("--config")
        .arg(env.config())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .expect("subzero mcp runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(&env.config().display().to_string()),
        "{stderr}"
    );
    assert!(
        stderr.contains("line 5") && stderr.contains("column"),
        "{stderr}"
    );
}
