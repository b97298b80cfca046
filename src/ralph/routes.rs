//! `ralph: routes:` in spectr.yaml: which agent (model, arguments) runs
//! which tasks. The first route a task matches wins; a task no route takes
//! runs on the run's own agent.

use crate::agent::AgentConfig;
use crate::model::Task;

/// What a route takes.
#[derive(Debug, Clone)]
pub enum Match {
    /// Tasks of this section (its title, exactly).
    Section(String),
    /// Tasks whose id matches this glob (`2.*`, `1.1`).
    Id(globset::GlobMatcher),
    /// Tasks whose description has this word (`#docs`).
    Tag(String),
}

impl Match {
    pub fn matches(&self, task: &Task) -> bool {
        match self {
            Match::Section(s) => task.section == *s,
            Match::Id(glob) => glob.is_match(task.id.as_str()),
            Match::Tag(word) => task
                .description
                .split(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | '(' | ')'))
                .any(|w| w == word),
        }
    }

    /// As spectr.yaml says it (`section "Tests"`).
    pub fn describe(&self) -> String {
        match self {
            Match::Section(s) => format!("section {s:?}"),
            Match::Id(glob) => format!("id {}", glob.glob().glob()),
            Match::Tag(w) => format!("tag {w}"),
        }
    }
}

/// One route, settled: what it takes and the agent it gives them.
#[derive(Debug, Clone)]
pub struct Route {
    pub takes: Match,
    pub agent: AgentConfig,
    /// e.g. `Codex (codex) 0.61.0 · gpt-5.1-codex`, the version once the
    /// preflight found it.
    pub label: String,
}

/// An agent of `ralph: fallback:`, settled.
#[derive(Debug, Clone)]
pub struct Fallback {
    pub agent: AgentConfig,
    pub label: String,
}

/// `--max-rate-wait`: how far away a limit's reset may be before a task
/// moves on to a fallback agent.
pub const DEFAULT_MAX_RATE_WAIT: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// The route that takes `task`, if any.
pub fn route_for<'r>(routes: &'r [Route], task: &Task) -> Option<&'r Route> {
    routes.iter().find(|r| r.takes.matches(task))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::AgentKind;
    use crate::model::{TaskId, TaskStatus};

    fn task(id: &str, section: &str, description: &str) -> Task {
        Task {
            id: TaskId::from(id),
            section: section.into(),
            description: description.into(),
            status: TaskStatus::Pending,
            file: 0,
            line: 1,
            parent: None,
            children: Vec::new(),
        }
    }

    fn route(takes: Match, kind: AgentKind) -> Route {
        Route {
            takes,
            agent: AgentConfig {
                kind,
                custom_cmd: None,
                extra_args: Vec::new(),
                model: None,
                max_turns: None,
                max_budget_usd: None,
                time_limit: None,
            },
            label: format!("{kind:?}"),
        }
    }

    #[test]
    fn the_first_route_a_task_matches_wins() {
        let glob = |g: &str| Match::Id(globset::Glob::new(g).unwrap().compile_matcher());
        let routes = [
            route(Match::Section("Tests".into()), AgentKind::Codex),
            route(glob("2.*"), AgentKind::Gemini),
            route(Match::Tag("#docs".into()), AgentKind::Qwen),
        ];
        let kind = |t: &Task| route_for(&routes, t).map(|r| r.agent.kind);
        assert_eq!(kind(&task("2.1", "Tests", "x")), Some(AgentKind::Codex));
        assert_eq!(kind(&task("2.1", "Core", "x")), Some(AgentKind::Gemini));
        assert_eq!(kind(&task("2.10", "Core", "x")), Some(AgentKind::Gemini));
        assert_eq!(
            kind(&task("3.1", "Core", "write the #docs page")),
            Some(AgentKind::Qwen)
        );
        assert_eq!(
            kind(&task("3.1", "Core", "write the #docsite")),
            None,
            "a whole word"
        );
        assert_eq!(kind(&task("1.1", "Core", "docs")), None);
        assert_eq!(routes[1].takes.describe(), "id 2.*");
    }
}
