//! The run's budget (`--budget-usd`, `--budget-tokens`): what the attempts
//! of a session have spent, across its resumes (the session keeps every
//! attempt's receipt), against what the person allowed. Pure values; the
//! machine applies the rule (no attempt starts once it is reached).

use crate::agent::receipt::Receipt;
use serde::{Deserialize, Serialize};

/// What the person allowed; either, both or neither.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd: Option<f64>,
    /// Input plus output tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
}

/// What the attempts spent: dollars where the agent reported a cost, tokens
/// (input + output) where it reported tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Spent {
    pub usd: f64,
    pub tokens: u64,
}

/// A budget and what was spent against it, for the events that show both.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct BudgetUse {
    pub budget: Budget,
    pub spent: Spent,
}

impl Budget {
    pub fn is_set(&self) -> bool {
        self.usd.is_some() || self.tokens.is_some()
    }

    /// Whether `spent` reached a limit: the one the budget names first
    /// (dollars, then tokens), None while under both.
    pub fn reached(&self, spent: &Spent) -> Option<Limit> {
        // Sums of decimal costs are inexact: a cent's millionth is no
        // reason to start one more attempt.
        if self.usd.is_some_and(|usd| spent.usd + 1e-9 >= usd) {
            return Some(Limit::Usd);
        }
        if self.tokens.is_some_and(|t| spent.tokens >= t) {
            return Some(Limit::Tokens);
        }
        None
    }
}

/// Which of the budget's limits was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    Usd,
    Tokens,
}

impl Spent {
    pub fn add(&mut self, receipt: &Receipt) {
        if let Some(c) = receipt.cost_usd.filter(|c| c.is_finite() && *c > 0.0) {
            self.usd += c;
        }
        if let Some(t) = &receipt.tokens {
            self.tokens = self.tokens.saturating_add(t.input).saturating_add(t.output);
        }
    }
}

/// `$1.20` (cents; below a cent, four places).
pub fn dollars(x: f64) -> String {
    if x != 0.0 && x.abs() < 0.01 {
        format!("${x:.4}")
    } else {
        format!("${x:.2}")
    }
}

/// `61,200`.
pub fn tokens(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

impl BudgetUse {
    /// `$0.80 of $1.00 · 12,000 of 50,000 tokens`: each limit set.
    pub fn short(&self) -> String {
        let mut parts = Vec::new();
        if let Some(usd) = self.budget.usd {
            parts.push(format!(
                "{} of {} budget",
                dollars(self.spent.usd),
                dollars(usd)
            ));
        }
        if let Some(t) = self.budget.tokens {
            parts.push(format!(
                "{} of {} budget tokens",
                tokens(self.spent.tokens),
                tokens(t)
            ));
        }
        parts.join(" · ")
    }

    /// The line said when the budget stops the run.
    pub fn reached_line(&self) -> String {
        match self.budget.reached(&self.spent) {
            Some(Limit::Tokens) => format!(
                "Token budget of {} reached ({} spent); run again with a larger --budget-tokens to go on",
                tokens(self.budget.tokens.unwrap_or(0)),
                tokens(self.spent.tokens)
            ),
            _ => format!(
                "Budget of {} reached ({} spent); run again with a larger --budget-usd to go on",
                dollars(self.budget.usd.unwrap_or(0.0)),
                dollars(self.spent.usd)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_the_limit_reached_and_how_to_go_on() {
        let u = BudgetUse {
            budget: Budget {
                usd: Some(1.0),
                tokens: None,
            },
            spent: Spent {
                usd: 1.2,
                tokens: 0,
            },
        };
        assert_eq!(
            u.reached_line(),
            "Budget of $1.00 reached ($1.20 spent); run again with a larger --budget-usd to go on"
        );
        let t = BudgetUse {
            budget: Budget {
                usd: Some(5.0),
                tokens: Some(50_000),
            },
            spent: Spent {
                usd: 1.0,
                tokens: 61_200,
            },
        };
        assert_eq!(
            t.reached_line(),
            "Token budget of 50,000 reached (61,200 spent); run again with a larger --budget-tokens to go on"
        );
        assert_eq!(
            t.short(),
            "$1.00 of $5.00 budget · 61,200 of 50,000 budget tokens"
        );
    }

    #[test]
    fn under_budget_nothing_is_reached_and_no_budget_never_is() {
        let spent = Spent {
            usd: 0.99,
            tokens: 10,
        };
        let b = Budget {
            usd: Some(1.0),
            tokens: Some(11),
        };
        assert_eq!(b.reached(&spent), None);
        assert_eq!(Budget::default().reached(&spent), None);
        assert_eq!(
            b.reached(&Spent {
                usd: 1.0,
                tokens: 0
            }),
            Some(Limit::Usd)
        );
    }
}
