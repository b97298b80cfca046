//! The completion scripts in `completions/` must match what the current clap
//! definition generates. After changing the CLI, refresh them with
//!
//!     SPECTR_UPDATE_COMPLETIONS=1 cargo test --test cli_completions
//!
//! and commit the result.

use clap::ValueEnum;
use clap_complete::Shell;
use spectr::cli::completions::{file_name, script};
use std::path::Path;

const UPDATE_ENV: &str = "SPECTR_UPDATE_COMPLETIONS";

#[test]
fn completion_scripts_are_current() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("completions");
    let update = std::env::var_os(UPDATE_ENV).is_some_and(|v| v == "1");
    let mut stale = Vec::new();
    for shell in Shell::value_variants() {
        let path = dir.join(file_name(*shell));
        let want = script(*shell);
        if update {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &want).unwrap();
            continue;
        }
        if std::fs::read(&path).ok().as_deref() != Some(want.as_slice()) {
            stale.push(path.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "completion scripts out of date with the CLI definition: {}\n\
         regenerate them with: {UPDATE_ENV}=1 cargo test --test cli_completions",
        stale.join(", ")
    );
}

#[test]
fn every_shell_has_a_script_naming_the_subcommands() {
    for shell in Shell::value_variants() {
        let text = String::from_utf8(script(*shell)).unwrap();
        for sub in [
            "list",
            "accept",
            "ralph",
            "completions",
            "task",
            "learn",
            "status",
            "context",
        ] {
            assert!(text.contains(sub), "{shell:?} script lacks {sub}");
        }
    }
}

#[test]
fn binary_prints_the_generated_script() {
    for (arg, shell) in [
        ("bash", Shell::Bash),
        ("zsh", Shell::Zsh),
        ("powershell", Shell::PowerShell),
    ] {
        let out = assert_cmd::Command::new(env!("CARGO_BIN_EXE_spectr"))
            .args(["completions", arg])
            .timeout(std::time::Duration::from_secs(60))
            .output()
            .unwrap();
        assert!(out.status.success());
        assert_eq!(out.stdout, script(shell), "{arg}");
    }
    let out = assert_cmd::Command::new(env!("CARGO_BIN_EXE_spectr"))
        .args(["completions", "tcsh"])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
