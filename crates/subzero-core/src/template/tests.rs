//! Tests of templates and the grant snapshot.

use super::*;
use crate::limits::Limits;

fn freeze(id: &str, t: &Template) -> Result<GrantSnapshot, TemplateError> {
    GrantSnapshot::freeze(
        TemplateId::parse(id)?,
        t,
        Vec::new(),
        RunLimits::default(),
        ToolLimits::SHIPPED,
        &Limits::default(),
    )
}

#[test]
fn builtins_grant_exact_tools() {
    let r = freeze("researcher", &Template::researcher()).unwrap();
    assert_eq!(r.tools(), ["read", "grep", "find", "ls"]);
    assert!(!r.write_capable());
    let c = freeze("coder", &Template::coder()).unwrap();
    assert_eq!(
        c.tools(),
        ["read", "grep", "find", "ls", "write", "edit", "bash"]
    );
    assert!(c.write_capable());
}

#[test]
fn the_snapshot_digest_covers_every_field_and_survives_a_round_trip() {
    let s = freeze("researcher", &Template::researcher()).unwrap();
    let json = serde_json::to_value(&s).unwrap();
    assert_eq!(json["digest"], s.digest().to_string());
    assert_eq!(json["templateId"], "researcher");
    let back: GrantSnapshot = serde_json::from_value(json.clone()).unwrap();
    assert_eq!(back, s);
    let mut tampered = json;
    tampered["instructions"] = "do something else".into();
    let err = serde_json::from_value::<GrantSnapshot>(tampered).unwrap_err();
    assert!(err.to_string().contains("altered"), "{err}");
}

#[test]
fn unknown_tools_and_literal_secrets_are_unsupported_grants() {
    let mut t = Template::researcher();
    t.tools.push("web_fetch".into());
    assert_eq!(
        freeze("x", &t).unwrap_err().code(),
        ErrorCode::UnsupportedGrant
    );
    let mut t = Template::researcher();
    t.mcp_servers.push(McpServerTemplate {
        name: "gh".into(),
        command: "gh-mcp".into(),
        args: vec![],
        env: BTreeMap::from([("TOKEN".into(), "ghp_literal".into())]),
        allowed_tools: vec!["search".into()],
    });
    assert_eq!(
        freeze("x", &t).unwrap_err().code(),
        ErrorCode::UnsupportedGrant
    );
}

#[test]
fn builtins_freeze_a_read_only_researcher_and_a_workspace_coder() {
    let r = freeze("researcher", &Template::researcher()).unwrap();
    assert_eq!(r.filesystem().access, FilesystemAccess::ReadOnly);
    assert!(r.has_filesystem_grant());
    let c = freeze("coder", &Template::coder()).unwrap();
    assert_eq!(c.filesystem().access, FilesystemAccess::Workspace);
    assert!(c.filesystem().writable_paths.is_empty());
    assert!(!c.filesystem().require_enforcement);
}

#[test]
fn a_read_only_template_may_grant_bash_without_becoming_write_capable() {
    let mut t = Template::researcher();
    t.tools.push("bash".into());
    t.read_only = true;
    t.require_enforcement = true;
    let s = freeze("reader", &t).unwrap();
    assert!(!s.write_capable());
    assert_eq!(s.filesystem().access, FilesystemAccess::ReadOnly);
    assert!(s.filesystem().require_enforcement);
    let json = serde_json::to_value(&s).unwrap();
    assert_eq!(json["filesystem"]["access"], "read-only");
    assert_eq!(serde_json::from_value::<GrantSnapshot>(json).unwrap(), s);

    let mut writes = t.clone();
    writes.tools.push("write".into());
    assert_eq!(
        freeze("reader", &writes).unwrap_err().code(),
        ErrorCode::UnsupportedGrant
    );
    let mut both = t;
    both.write_capable = true;
    assert_eq!(
        freeze("reader", &both).unwrap_err().code(),
        ErrorCode::UnsupportedGrant
    );
}

#[test]
fn writable_paths_are_absolute_and_only_for_write_capable_templates() {
    let mut t = Template::coder();
    t.writable_paths = vec!["/home/me/.cargo".into()];
    let s = freeze("builder", &t).unwrap();
    assert_eq!(s.filesystem().writable_paths, ["/home/me/.cargo"]);
    t.writable_paths = vec!["relative/cache".into()];
    assert_eq!(
        freeze("builder", &t).unwrap_err().code(),
        ErrorCode::UnsupportedGrant
    );
    let mut r = Template::researcher();
    r.writable_paths = vec!["/tmp/x".into()];
    assert_eq!(
        freeze("reader", &r).unwrap_err().code(),
        ErrorCode::UnsupportedGrant
    );
}

#[test]
fn a_snapshot_frozen_before_filesystem_grants_keeps_its_digest_and_derives_one() {
    let s = freeze("coder", &Template::coder()).unwrap();
    let mut json = serde_json::to_value(&s).unwrap();
    let body = json.as_object_mut().unwrap();
    body.remove("filesystem");
    body.remove("digest");
    let digest = Sha256Digest::of(crate::digest::canonical_json(&json).as_bytes());
    json["digest"] = digest.to_string().into();
    let old: GrantSnapshot = serde_json::from_value(json.clone()).unwrap();
    assert!(!old.has_filesystem_grant());
    assert_eq!(old.filesystem().access, FilesystemAccess::Workspace);
    assert_eq!(
        serde_json::to_value(&old).unwrap(),
        json,
        "re-encoded unchanged"
    );
}

#[test]
fn a_snapshot_carries_its_tool_limits_under_its_digest() {
    let limits = ToolLimits {
        processes: 64,
        ..ToolLimits::SHIPPED
    };
    let s = GrantSnapshot::freeze(
        TemplateId::parse("coder").unwrap(),
        &Template::coder(),
        Vec::new(),
        RunLimits::default(),
        limits,
        &Limits::default(),
    )
    .unwrap();
    assert!(s.has_tool_limits());
    assert_eq!(s.tool_limits(), limits);
    let json = serde_json::to_value(&s).unwrap();
    assert_eq!(
        json["toolLimits"],
        serde_json::json!({
            "processes": 64,
            "memoryBytes": 4_294_967_296_u64,
            "fileSizeBytes": 4_294_967_296_u64,
            "openFiles": 8192,
        })
    );
    assert_eq!(
        serde_json::from_value::<GrantSnapshot>(json.clone()).unwrap(),
        s
    );
    let mut raised = json;
    raised["toolLimits"]["processes"] = 1_000_000.into();
    let err = serde_json::from_value::<GrantSnapshot>(raised).unwrap_err();
    assert!(err.to_string().contains("altered"), "{err}");
}

#[test]
fn a_snapshot_frozen_before_tool_limits_keeps_its_digest_and_gets_the_shipped_ones() {
    let s = freeze("coder", &Template::coder()).unwrap();
    let mut json = serde_json::to_value(&s).unwrap();
    let body = json.as_object_mut().unwrap();
    body.remove("toolLimits");
    body.remove("digest");
    let digest = Sha256Digest::of(crate::digest::canonical_json(&json).as_bytes());
    json["digest"] = digest.to_string().into();
    let old: GrantSnapshot = serde_json::from_value(json.clone()).unwrap();
    assert!(!old.has_tool_limits());
    assert_eq!(old.tool_limits(), ToolLimits::SHIPPED);
    assert_eq!(
        serde_json::to_value(&old).unwrap(),
        json,
        "re-encoded unchanged"
    );
}

#[test]
fn a_tool_limit_outside_its_range_is_not_frozen() {
    let err = GrantSnapshot::freeze(
        TemplateId::parse("coder").unwrap(),
        &Template::coder(),
        Vec::new(),
        RunLimits::default(),
        ToolLimits {
            open_files: 0,
            ..ToolLimits::SHIPPED
        },
        &Limits::default(),
    )
    .unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidRequest);
    assert!(
        err.to_string().contains("tool_limits.open_files = 0"),
        "{err}"
    );
}

#[test]
fn templates_resolve_tool_limits_per_key_over_the_configured_defaults() {
    let mut capped = Template::coder();
    capped.tool_limits = ToolLimitsConfig {
        processes: Some(32),
        ..ToolLimitsConfig::default()
    };
    let user = BTreeMap::from([(TemplateId::parse("capped").unwrap(), capped)]);
    let defaults = ToolLimitsConfig {
        processes: Some(512),
        memory_bytes: Some(1 << 30),
        ..ToolLimitsConfig::default()
    };
    let templates = Templates::new(user)
        .unwrap()
        .with_tool_limits(defaults)
        .unwrap();
    let expected_defaults = ToolLimits {
        processes: 512,
        memory_bytes: 1 << 30,
        ..ToolLimits::SHIPPED
    };
    assert_eq!(templates.default_tool_limits(), expected_defaults);
    let (_, researcher) = templates.resolve("researcher").unwrap();
    assert_eq!(templates.tool_limits(&researcher), expected_defaults);
    let (_, capped) = templates.resolve("capped").unwrap();
    assert_eq!(
        templates.tool_limits(&capped),
        ToolLimits {
            processes: 32,
            ..expected_defaults
        }
    );
    assert_eq!(
        Templates::default().default_tool_limits(),
        ToolLimits::SHIPPED
    );
}

#[test]
fn configured_tool_limits_outside_their_range_are_refused_naming_where() {
    let mut bad = Template::researcher();
    bad.tool_limits.memory_bytes = Some(1);
    let user = BTreeMap::from([(TemplateId::parse("tiny").unwrap(), bad)]);
    let err = Templates::new(user).unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidRequest);
    assert!(
        err.to_string()
            .contains("[templates.tiny] tool_limits.memory_bytes = 1 is outside"),
        "{err}"
    );
    let err = Templates::default()
        .with_tool_limits(ToolLimitsConfig {
            file_size_bytes: Some(0),
            ..ToolLimitsConfig::default()
        })
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("[tool_limits] file_size_bytes = 0 is outside"),
        "{err}"
    );
}

#[test]
fn too_many_tools_is_limit_exceeded() {
    let mut t = Template::researcher();
    t.mcp_servers.push(McpServerTemplate {
        name: "big".into(),
        command: "big".into(),
        args: vec![],
        env: BTreeMap::new(),
        allowed_tools: (0..61).map(|i| format!("t{i}")).collect(),
    });
    assert_eq!(
        freeze("x", &t).unwrap_err().code(),
        ErrorCode::LimitExceeded
    );
}

#[test]
fn unknown_templates_and_shadowing_are_refused() {
    let templates = Templates::default();
    assert_eq!(
        templates.resolve("nope").unwrap_err().code(),
        ErrorCode::TemplateNotFound
    );
    assert!(templates.resolve("coder").is_ok());
    let shadow = BTreeMap::from([(TemplateId::parse("coder").unwrap(), Template::researcher())]);
    assert_eq!(
        Templates::new(shadow).unwrap_err().code(),
        ErrorCode::InvalidRequest
    );
}
