use super::*;

fn list(hosts: &[&str]) -> Allowlist {
    Allowlist::new(
        hosts
            .iter()
            .map(|h| HostRule::parse(h).expect("a host"))
            .collect(),
    )
}

fn ip(text: &str) -> IpAddr {
    text.parse().expect("an address")
}

#[test]
fn host_rules_parse_and_print_back_in_one_form() {
    for (text, shown) in [
        ("Registry.NPMjs.org.", "registry.npmjs.org"),
        ("pypi.org:443", "pypi.org:443"),
        ("*.example.com", "*.example.com"),
        ("127.0.0.2:8080", "127.0.0.2:8080"),
        ("[::1]:8080", "[::1]:8080"),
        ("::1", "[::1]"),
        ("[fe80::1]", "[fe80::1]"),
    ] {
        let rule = HostRule::parse(text).expect(text);
        assert_eq!(rule.to_string(), shown);
        assert_eq!(HostRule::parse(shown), Ok(rule), "{shown} parses to itself");
    }
    for bad in [
        "",
        "host:0",
        "host:99999",
        "host:",
        "-bad.com",
        "a..b",
        "*.",
        "[::1",
        "[::1]x",
        "http://x.org",
        "x y",
        "*.*.org",
    ] {
        assert!(HostRule::parse(bad).is_err(), "{bad:?} is refused");
    }
}

#[test]
fn a_template_says_none_open_or_hosts_and_none_is_the_default() {
    assert_eq!(NetworkGrant::freeze(None), Ok(NetworkGrant::None));
    let open: NetworkConfig = serde_json::from_str("\"open\"").expect("a mode");
    assert_eq!(NetworkGrant::freeze(Some(&open)), Ok(NetworkGrant::Open));
    let hosts: NetworkConfig = serde_json::from_str("[\"pypi.org:443\"]").expect("hosts");
    let grant = NetworkGrant::freeze(Some(&hosts)).expect("a grant");
    assert_eq!(grant.mode(), "allowlist");
    assert_eq!(
        serde_json::to_value(&grant).expect("json"),
        serde_json::json!({"mode": "allowlist", "hosts": ["pypi.org:443"]})
    );
    for refused in ["[]", "[\"no such thing:x\"]"] {
        let config: NetworkConfig = serde_json::from_str(refused).expect("a list");
        assert!(matches!(
            NetworkGrant::freeze(Some(&config)),
            Err(TemplateError::UnsupportedGrant { .. })
        ));
    }
    assert!(serde_json::from_str::<NetworkConfig>("\"closed\"").is_err());
}

#[test]
fn a_name_is_admitted_only_as_listed_and_on_its_port() {
    let allow = list(&["pypi.org:443", "*.example.com", "registry.npmjs.org"]);
    assert!(allow.admits_name("pypi.org", 443));
    assert!(allow.admits_name("PyPI.org.", 443));
    assert!(!allow.admits_name("pypi.org", 80));
    assert!(!allow.admits_name("files.pypi.org", 443));
    assert!(allow.admits_name("a.example.com", 80));
    assert!(allow.admits_name("a.b.example.com", 80));
    assert!(!allow.admits_name("example.com", 80));
    assert!(!allow.admits_name("badexample.com", 80));
    assert!(allow.admits_name("registry.npmjs.org", 8443));
    assert!(!allow.admits_name("127.0.0.1", 443));
}

#[test]
fn a_listed_name_resolving_to_a_private_address_is_refused_unless_that_address_is_listed() {
    let allow = list(&["localhost", "pypi.org", "127.0.0.2:9000"]);
    assert_eq!(
        allow.admit("localhost", 9000, &[ip("127.0.0.1")]),
        Err(Refusal::ForbiddenAddress(ip("127.0.0.1")))
    );
    assert_eq!(
        allow.admit("pypi.org", 443, &[ip("10.0.0.5"), ip("151.101.0.223")]),
        Ok(vec![ip("151.101.0.223")]),
        "only the public address of a mixed answer is reached"
    );
    assert_eq!(
        allow.admit("localhost", 9000, &[ip("127.0.0.2")]),
        Ok(vec![ip("127.0.0.2")]),
        "a listed address is reachable on its port"
    );
    assert_eq!(
        allow.admit("127.0.0.2", 9000, &[ip("127.0.0.2")]),
        Ok(vec![ip("127.0.0.2")])
    );
    assert_eq!(
        allow.admit("127.0.0.2", 9001, &[ip("127.0.0.2")]),
        Err(Refusal::NotListed)
    );
    assert_eq!(
        allow.admit("evil.org", 443, &[ip("1.1.1.1")]),
        Err(Refusal::NotListed)
    );
    assert_eq!(allow.admit("pypi.org", 443, &[]), Err(Refusal::NoAddress));
}

#[test]
fn only_public_addresses_are_public() {
    for private in [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "255.255.255.255",
        "224.0.0.1",
        "::1",
        "::",
        "fd00::1",
        "fe80::1",
        "::ffff:127.0.0.1",
        "::ffff:10.0.0.1",
        "64:ff9b::a00:1",
        "192.0.0.8",
        "198.18.0.1",
    ] {
        assert!(!is_public(ip(private)), "{private} is not public");
    }
    for public in [
        "1.1.1.1",
        "151.101.0.223",
        "2606:4700::1111",
        "::ffff:8.8.8.8",
        "64:ff9b::808:808",
    ] {
        assert!(is_public(ip(public)), "{public} is public");
    }
}

#[test]
fn a_pi_template_is_open_unless_it_asks_for_what_pi_cannot_keep() {
    assert_eq!(
        NetworkGrant::freeze_for(WorkerKind::Pi, None),
        Ok(NetworkGrant::Open)
    );
    assert_eq!(
        NetworkGrant::freeze_for(WorkerKind::Rust, None),
        Ok(NetworkGrant::None)
    );
    let none = NetworkConfig::Mode(NetworkMode::None);
    assert!(matches!(
        NetworkGrant::freeze_for(WorkerKind::Pi, Some(&none)),
        Err(TemplateError::UnsupportedGrant { .. })
    ));
}
