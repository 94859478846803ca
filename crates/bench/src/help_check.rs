//! `isthmus bench [reproduce] --help` states, for every option that takes a value, its default or
//! what happens when it is absent: a clap default, a list of possible values, or a
//! `[default: ...]` / `[required ...]` bracket at the end of its doc comment (the rule
//! `isthmus <command> --help` follows, checked the same way in crates/cli/src/help_check.rs).

use clap::CommandFactory;

/// Every `command --option` (under `path`) that takes a value and does not say what its absence
/// means.
fn undocumented(command: &clap::Command, path: &str, found: &mut Vec<String>) {
    for arg in command.get_arguments() {
        if arg.is_positional() || arg.is_hide_set() || arg.is_required_set() || !arg.get_action().takes_values() {
            continue;
        }
        if !arg.get_default_values().is_empty() || !arg.get_possible_values().is_empty() {
            continue;
        }
        let said = [arg.get_help(), arg.get_long_help()].into_iter().flatten().any(|help| {
            let help = help.to_string();
            help.contains("[default:") || help.contains("[required")
        });
        if !said {
            let name = arg.get_long().map(|long| format!("--{long}")).unwrap_or_else(|| arg.get_id().to_string());
            found.push(format!("{path} {name}"));
        }
    }
    for sub in command.get_subcommands() {
        undocumented(sub, &format!("{path} {}", sub.get_name()), found);
    }
}

#[test]
fn every_value_option_states_its_default() {
    let command = crate::args::BenchArgs::command();
    let mut found = Vec::new();
    undocumented(&command, command.get_name(), &mut found);
    assert!(
        found.is_empty(),
        "options that take a value but whose --help states no default (add `[default: ...]` or \
         `[required ...]` to the doc comment):\n  {}",
        found.join("\n  ")
    );
}
