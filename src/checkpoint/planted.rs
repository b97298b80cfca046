//! Clean and smudge filters an agent could have planted, found without
//! running anything, so that spectr's own git can turn each one off.
//!
//! A filter runs when an attribute names it (`filter=NAME`) and the config
//! gives it a command (`filter.NAME.clean`, `.smudge`, `.process`). git has
//! no switch that turns every filter off, and a key with a wildcard cannot
//! be overridden, so every name that could be in use is overridden with an
//! empty command. Snapshots read attributes from the empty tree and no
//! global attributes file (see `git.rs`), so names come from the files git
//! still reads: `info/attributes`, and the config files an agent could write
//! (the repository's `config` and `config.worktree`, the user's global
//! ones): every `[filter "NAME"]` section. Not followed: `include.path`
//! files (an agent that can write one outside the repository can run code
//! itself anyway; `--sandbox` keeps it from writing them).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The filter names to turn off for a repository whose git folders are
/// `common_dir` and `git_dir`.
pub(crate) fn filter_names(common_dir: &Path, git_dir: &Path) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    if let Ok(text) = std::fs::read(common_dir.join("info/attributes")) {
        attribute_names(&String::from_utf8_lossy(&text), &mut names);
    }
    let mut configs = vec![common_dir.join("config"), git_dir.join("config.worktree")];
    configs.extend(global_configs());
    for file in configs {
        if let Ok(text) = std::fs::read(&file) {
            section_names(&String::from_utf8_lossy(&text), &mut names);
        }
    }
    names
}

fn global_configs() -> Vec<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let mut files = Vec::new();
    if let Some(global) = var("GIT_CONFIG_GLOBAL") {
        files.push(PathBuf::from(global));
        return files;
    }
    if let Some(home) = var("HOME") {
        files.push(PathBuf::from(&home).join(".gitconfig"));
        if var("XDG_CONFIG_HOME").is_none() {
            files.push(PathBuf::from(home).join(".config/git/config"));
        }
    }
    if let Some(xdg) = var("XDG_CONFIG_HOME") {
        files.push(PathBuf::from(xdg).join("git/config"));
    }
    files
}

/// Every `filter=NAME` token of an attributes file (macros included).
fn attribute_names(text: &str, names: &mut BTreeSet<String>) {
    for token in text.split_whitespace() {
        if let Some(name) = token.strip_prefix("filter=")
            && !name.is_empty()
        {
            names.insert(name.to_owned());
        }
    }
}

/// Every `[filter "NAME"]` (and old-style `[filter.NAME]`) section header.
fn section_names(text: &str, names: &mut BTreeSet<String>) {
    for line in text.lines() {
        let line = line.trim_start();
        let Some(rest) = line.strip_prefix('[') else {
            continue;
        };
        let Some(header) = rest.split(']').next() else {
            continue;
        };
        let header = header.trim();
        let Some(section) = header.get(..6) else {
            continue;
        };
        if !section.eq_ignore_ascii_case("filter") {
            continue;
        }
        let sub = &header[6..];
        let name = if let Some(quoted) = sub.trim_start().strip_prefix('"') {
            // `\"` and `\\` are the only escapes in a subsection name.
            let mut name = String::new();
            let mut chars = quoted.chars();
            while let Some(c) = chars.next() {
                match c {
                    '"' => break,
                    '\\' => name.extend(chars.next()),
                    c => name.push(c),
                }
            }
            name
        } else if let Some(dotted) = sub.strip_prefix('.') {
            dotted.to_ascii_lowercase()
        } else {
            continue;
        };
        if !name.is_empty() {
            names.insert(name);
        }
    }
}

/// The settings that turn the filters `names` off: no command, not
/// required (a required filter without a command would fail the command).
pub(crate) fn filters_off(names: &BTreeSet<String>) -> Vec<(String, String)> {
    let mut settings = Vec::new();
    for name in names {
        for key in ["clean", "smudge", "process"] {
            settings.push((format!("filter.{name}.{key}"), String::new()));
        }
        settings.push((format!("filter.{name}.required"), "false".to_owned()));
    }
    settings
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_from_attributes_and_config_sections() {
        let mut names = BTreeSet::new();
        attribute_names(
            "* filter=a diff=x\n[attr]m filter=b\n*.c -filter\n",
            &mut names,
        );
        section_names(
            "[core]\n\tbare = false\n[filter \"c d\"]\n\tclean = x\n [Filter \"e\\\"f\"] \n[filter.G]\n[filters \"no\"]\n[diff \"no\"]\n",
            &mut names,
        );
        let names: Vec<_> = names.into_iter().collect();
        assert_eq!(names, ["a", "b", "c d", "e\"f", "g"]);
    }

    #[test]
    fn each_name_gets_empty_commands_and_is_not_required() {
        let names = BTreeSet::from(["lfs".to_owned()]);
        let off = filters_off(&names);
        assert!(off.contains(&("filter.lfs.clean".into(), String::new())));
        assert!(off.contains(&("filter.lfs.process".into(), String::new())));
        assert!(off.contains(&("filter.lfs.required".into(), "false".into())));
    }
}
