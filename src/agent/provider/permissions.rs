//! `ralph: permissions:` in an agent CLI's own flags, where it has them, so
//! the CLI refuses what the policy refuses instead of every check being
//! skipped. Only when spectr.yaml says `permissions:` (the flags change
//! what the agent may do: a setting, not a surprise); without it each CLI
//! runs as [`super::command`] says.
//!
//! - claude: `--permission-mode dontAsk` (never waits: a call no rule
//!   allows is refused and the agent goes on), reads and web tools allowed,
//!   edits (`Edit`) only under the work tree, `Bash(<pattern>)` per allowed
//!   command (any, with no list) and `--disallowedTools Bash(<pattern>)`
//!   per denied one. Never with `--dangerously-skip-permissions`, under
//!   which allow rules count for nothing.
//! - copilot: writes (its path check keeps them in the work tree), a
//!   `shell(<command>)` rule per allowed command (any, with no list) and a
//!   denied one per denied command, instead of `--allow-all`. Copilot
//!   matches a command by its name (and a git or gh subcommand), whatever
//!   its arguments.
//! - codex: its `workspace-write` sandbox already keeps writes, a command's
//!   included, in the work tree; it has no flag for command lists.
//!
//! A pattern a CLI cannot express is narrowed when it allows (dropped) and
//! widened when it denies, and said once at the run's start.

use crate::agent::kind::AgentKind;
use std::path::Path;

/// The commands part of `ralph: permissions:`, as written (glob patterns
/// on a command line).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NativePolicy {
    pub allow: Vec<String>,
    pub deny: Vec<String>,
}

/// How much of the policy an agent's own flags carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Honoured {
    /// Edits in the work tree, both command lists, the rest refused (ACP
    /// agents, which ask; claude and copilot, by their flags).
    All,
    /// Edits in the work tree only (codex's sandbox).
    EditsOnly,
    /// Nothing: the CLI runs with every permission granted.
    Nothing,
}

/// What `kind`'s own flags (or its questions, over ACP) carry of the policy.
pub fn honoured_by(kind: AgentKind) -> Honoured {
    match kind {
        AgentKind::Claude | AgentKind::Copilot => Honoured::All,
        k if k.is_acp() => Honoured::All,
        AgentKind::Codex => Honoured::EditsOnly,
        _ => Honoured::Nothing,
    }
}

/// Claude's arguments for `policy` in the work tree `tree`; with what it
/// could not express, in words.
pub fn claude_args(policy: &NativePolicy, tree: &Path) -> (Vec<String>, Vec<String>) {
    let mut said = Vec::new();
    let mut args: Vec<String> = ["--permission-mode", "dontAsk", "--allowedTools"]
        .map(String::from)
        .to_vec();
    args.extend(["Read", "Glob", "Grep", "WebFetch", "WebSearch"].map(String::from));
    // `//` roots a rule at the filesystem's root.
    args.push(format!("Edit(/{}/**)", tree.display()));
    if policy.allow.is_empty() {
        args.push("Bash".into());
    }
    for p in &policy.allow {
        for one in expand(p) {
            match claude_pattern(&one, false) {
                Some(rule) => args.push(format!("Bash({rule})")),
                None => said.push(format!(
                    "claude cannot express the allowed command `{one}`: left out"
                )),
            }
        }
    }
    let denied: Vec<String> = policy
        .deny
        .iter()
        .flat_map(|p| expand(p))
        .filter_map(|one| claude_pattern(&one, true))
        .map(|rule| format!("Bash({rule})"))
        .collect();
    if !denied.is_empty() {
        args.push("--disallowedTools".into());
        args.extend(denied);
    }
    (args, said)
}

/// Copilot's arguments for `policy`; with what it could not express.
pub fn copilot_args(policy: &NativePolicy) -> (Vec<String>, Vec<String>) {
    let mut said = Vec::new();
    let mut args = vec!["--allow-tool=write".to_string()];
    if policy.allow.is_empty() {
        args.push("--allow-tool=shell".into());
    }
    for p in &policy.allow {
        for one in expand(p) {
            match copilot_pattern(&one, false) {
                Some(rule) => args.push(format!("--allow-tool=shell({rule})")),
                None => said.push(format!(
                    "copilot cannot express the allowed command `{one}`: left out"
                )),
            }
        }
    }
    for p in &policy.deny {
        for one in expand(p) {
            match copilot_pattern(&one, true) {
                Some(rule) => {
                    if !is_exactly(&one, &rule) {
                        said.push(format!(
                            "copilot denies `{rule}` for the denied command `{one}` (whatever its arguments)"
                        ));
                    }
                    args.push(format!("--deny-tool=shell({rule})"));
                }
                None => said.push(format!(
                    "copilot cannot express the denied command `{one}`: not denied to it"
                )),
            }
        }
    }
    (args, said)
}

/// `{a,b}` alternatives spelled out (one level, as command patterns use
/// them); a pattern without any as it is.
fn expand(pattern: &str) -> Vec<String> {
    let (Some(open), Some(close)) = (pattern.find('{'), pattern.find('}')) else {
        return vec![pattern.to_string()];
    };
    if close < open {
        return vec![pattern.to_string()];
    }
    let (head, rest) = pattern.split_at(open);
    let (inner, tail) = rest[1..].split_at(close - open - 1);
    let tail = &tail[1..];
    inner
        .split(',')
        .flat_map(|alt| expand(&format!("{head}{alt}{tail}")))
        .collect()
}

/// A glob as Claude's Bash rule: `*` is Claude's own (any run of
/// characters); `?` and classes it lacks: an allow is left out, a deny
/// widened to `*`.
fn claude_pattern(pattern: &str, deny: bool) -> Option<String> {
    let mut out = String::new();
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '*' => {
                // `**` is `*` here (nothing to tell apart on a command line).
                while chars.peek() == Some(&'*') {
                    chars.next();
                }
                out.push('*');
            }
            '?' | '[' if !deny => return None,
            '?' => out.push('*'),
            '[' => {
                for c in chars.by_ref() {
                    if c == ']' {
                        break;
                    }
                }
                out.push('*');
            }
            // Parentheses would end the rule early.
            '(' | ')' if !deny => return None,
            '(' | ')' => out.push('*'),
            c => out.push(c),
        }
    }
    Some(out)
}

/// A glob as Copilot's shell rule: the command's name, with a git or gh
/// subcommand (`git push`), or a name followed by anything (`cargo:*`).
/// An allow it cannot carry as narrowly is left out; a deny is widened to
/// the name (and subcommand).
fn copilot_pattern(pattern: &str, deny: bool) -> Option<String> {
    let words: Vec<&str> = pattern.split_whitespace().collect();
    let literal = |w: &str| !w.contains(['*', '?', '[', ']', '(', ')']);
    let first = *words.first()?;
    if !literal(first) {
        // `*rm -rf*`: nothing names the command.
        return None;
    }
    let sub = matches!(first, "git" | "gh");
    match words.as_slice() {
        [one] => Some(one.to_string()),
        [name, "*"] => Some(format!("{name}:*")),
        [name, second] | [name, second, ..] if sub && literal(second) => {
            // Copilot matches git and gh by their subcommand: the rest of the
            // pattern (arguments) is lost, which widens it.
            (deny || words.len() == 2).then(|| format!("{name} {second}"))
        }
        [name, second, ..] if sub && deny => {
            let stem = second.trim_end_matches(['*', '?']);
            Some(match stem.is_empty() || !literal(stem) {
                true => name.to_string(),
                false => format!("{name} {stem}"),
            })
        }
        [name, ..] if deny => Some(name.to_string()),
        _ => None,
    }
}

/// Whether the rule means the pattern exactly (nothing widened).
fn is_exactly(pattern: &str, rule: &str) -> bool {
    pattern == rule
        || rule
            .strip_suffix(":*")
            .is_some_and(|n| pattern == format!("{n} *"))
}

/// What the run says at its start of `kind` and the policy: the parts the
/// agent does not honour, and what could not be expressed.
pub fn notices(kind: AgentKind, policy: &NativePolicy, tree: &Path) -> Vec<String> {
    let name = crate::agent::kind::display_name(kind);
    match honoured_by(kind) {
        Honoured::All => match kind {
            AgentKind::Claude => claude_args(policy, tree).1,
            AgentKind::Copilot => copilot_args(policy).1,
            _ => Vec::new(),
        },
        Honoured::EditsOnly if policy.allow.is_empty() && policy.deny.is_empty() => Vec::new(),
        Honoured::EditsOnly => vec![format!(
            "{name} keeps its writes in the work tree (its sandbox), but has no way to be given ralph: permissions: commands: its commands are not restricted"
        )],
        Honoured::Nothing => vec![format!(
            "{name} runs with every permission granted: ralph: permissions: is not applied to it (claude, copilot and the ACP agents honour it; codex its edits part)"
        )],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(allow: &[&str], deny: &[&str]) -> NativePolicy {
        NativePolicy {
            allow: allow.iter().map(|s| s.to_string()).collect(),
            deny: deny.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn claude_gets_dont_ask_edits_in_the_tree_and_the_command_lists() {
        let (args, said) = claude_args(
            &policy(&["cargo *", "{git,hg} status"], &["git push*", "rm -rf ?"]),
            Path::new("/home/u/proj"),
        );
        assert_eq!(
            args,
            [
                "--permission-mode",
                "dontAsk",
                "--allowedTools",
                "Read",
                "Glob",
                "Grep",
                "WebFetch",
                "WebSearch",
                "Edit(//home/u/proj/**)",
                "Bash(cargo *)",
                "Bash(git status)",
                "Bash(hg status)",
                "--disallowedTools",
                "Bash(git push*)",
                "Bash(rm -rf *)",
            ]
        );
        assert!(said.is_empty(), "{said:?}");
    }

    #[test]
    fn claude_with_no_allow_list_runs_any_command_and_drops_what_it_cannot_allow() {
        let (args, said) = claude_args(&policy(&[], &[]), Path::new("/p"));
        assert!(args.contains(&"Bash".to_string()), "{args:?}");
        assert!(!args.contains(&"--disallowedTools".to_string()));
        let (args, said2) = claude_args(&policy(&["make [ab]"], &[]), Path::new("/p"));
        assert!(said.is_empty());
        assert!(!args.iter().any(|a| a.starts_with("Bash")), "{args:?}");
        assert_eq!(said2.len(), 1, "{said2:?}");
    }

    #[test]
    fn copilot_gets_writes_and_shell_rules_instead_of_allow_all() {
        let (args, said) = copilot_args(&policy(
            &["cargo *", "git status", "make"],
            &["git push*", "cargo publish*", "*rm -rf*"],
        ));
        assert_eq!(
            args,
            [
                "--allow-tool=write",
                "--allow-tool=shell(cargo:*)",
                "--allow-tool=shell(git status)",
                "--allow-tool=shell(make)",
                "--deny-tool=shell(git push)",
                "--deny-tool=shell(cargo)",
            ]
        );
        // Widened denies and the one it cannot carry are said.
        assert_eq!(said.len(), 3, "{said:?}");
        assert!(said.iter().any(|s| s.contains("`*rm -rf*`")), "{said:?}");
        let (args, _) = copilot_args(&policy(&[], &[]));
        assert_eq!(args, ["--allow-tool=write", "--allow-tool=shell"]);
        // An allow copilot would widen is left out.
        let (args, said) = copilot_args(&policy(&["npm test*"], &[]));
        assert_eq!(args, ["--allow-tool=write"]);
        assert_eq!(said.len(), 1);
    }

    #[test]
    fn what_each_agent_honours_is_said() {
        let p = policy(&["cargo *"], &[]);
        let tree = Path::new("/p");
        assert!(notices(AgentKind::Claude, &p, tree).is_empty());
        assert!(notices(AgentKind::Codex, &p, tree)[0].contains("not restricted"));
        assert!(notices(AgentKind::Codex, &policy(&[], &[]), tree).is_empty());
        assert!(notices(AgentKind::Gemini, &p, tree)[0].contains("every permission granted"));
        assert!(notices(AgentKind::ClaudeAcp, &p, tree).is_empty());
    }

    #[test]
    fn alternatives_are_spelled_out() {
        assert_eq!(expand("{a,b} x{1,2}"), ["a x1", "a x2", "b x1", "b x2"]);
        assert_eq!(expand("plain"), ["plain"]);
    }
}
