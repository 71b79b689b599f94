//! A broker's configuration load leaves out only the broken entry, names it, and keeps the
//! rest; a file that is not TOML is the one error that stops it.

use std::path::Path;

use subzero_runtime::config::Config;

const PATH: &str = "/c/subzero/config.toml";

fn keys(text: &str) -> Vec<String> {
    Config::parse_lenient(text, Path::new(PATH))
        .expect("loads")
        .problems
        .into_iter()
        .map(|p| p.key)
        .collect()
}

#[test]
fn a_sound_file_has_no_problems_and_loads_as_the_strict_check_does() {
    let text = "[credentials.a]\nenv = \"A\"\norigins = [\"https://x:443\"]\n\n[limits]\nprompt_bytes = 100\n";
    let loaded = Config::parse_lenient(text, Path::new(PATH)).expect("loads");
    assert!(loaded.problems.is_empty());
    assert_eq!(loaded.config.limits.prompt_bytes, 100);
    assert_eq!(loaded.config.credentials.len(), 1);
}

#[test]
fn an_unknown_table_a_bad_key_and_a_clashing_table_are_each_left_out_alone() {
    let text = "[limitz]\nx = 1\n\n[limits]\nprompt_bytes = 100\nevent_retention = 0\n\n[budgets.default]\nmax_turns = 20\n\n[budgets.max]\nmax_turns = 10\n\n[containment]\nprocess = \"cgroop\"\nfilesystem = \"off\"\n";
    let loaded = Config::parse_lenient(text, Path::new(PATH)).expect("loads");
    let keys: Vec<&str> = loaded.problems.iter().map(|p| p.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "budgets",
            "containment.process",
            "limits.event_retention",
            "limitz"
        ],
        "{:#?}",
        loaded.problems
    );
    // What was fine is kept; what was left out keeps its default.
    assert_eq!(loaded.config.limits.prompt_bytes, 100);
    assert_eq!(loaded.config.limits.event_retention, 1000);
    assert_eq!(
        loaded.config.containment.filesystem,
        subzero_runtime::config::FilesystemContainmentConfig::Off
    );
    for problem in &loaded.problems {
        assert_eq!(problem.file, Path::new(PATH));
        assert!(!problem.reason.is_empty());
    }
}

#[test]
fn a_broken_template_or_credential_is_left_out_whole() {
    let text = "[templates.a]\ndescription = \"d\"\ninstructions = \"i\"\ntools = [\"read\", \"nope\"]\n\n[templates.b]\ndescription = \"d\"\ninstructions = \"i\"\ntools = [\"read\"]\n\n[credentials.c]\nenv = \"C\"\nfile = \"/k\"\norigins = [\"https://x:443\"]\n";
    assert_eq!(keys(text), ["credentials.c", "templates.a"]);
}

#[test]
fn only_a_file_that_is_not_toml_is_an_error_and_it_names_line_and_column() {
    let err = Config::parse_lenient("[a\nb = 1\n", Path::new(PATH)).expect_err("not TOML");
    let text = err.to_string();
    assert!(
        text.contains(PATH) && text.contains("line 1") && text.contains("column"),
        "{text}"
    );
}
