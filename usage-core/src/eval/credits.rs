//! What the users of a team spent in a time range (contract section 12), from the
//! `agent_runs` table, and their credits against the caps that apply
//! ([`crate::credits`]).

use std::collections::HashMap;

use super::TeamData;
use super::select::{Pred, select, text_pred, time_range_pred};
use crate::credits::{Spend, Terms, UserCredits};
use crate::plan::TimeRange;
use crate::schema::records::{AGENT_RUNS, USERS, agent_runs, users};

impl TeamData {
    /// Σ `prompts_used` and Σ `flex_credits_used` of the agent runs with a `timestamp` in
    /// `range`, by `api_key`; `only`: of that key's runs alone.
    pub fn spend_by_key(&self, range: TimeRange, only: Option<&str>) -> HashMap<String, Spend> {
        let mut by_key: HashMap<String, Spend> = HashMap::new();
        let Some(t) = self.table(&AGENT_RUNS) else {
            return by_key;
        };
        let Some(time) = t.time_column() else {
            return by_key;
        };
        let key = t.col(agent_runs::API_KEY);
        let mut preds: Vec<Pred<'_>> = vec![time_range_pred(time, range)];
        if let Some(k) = only {
            preds.push(text_pred(key, |v| v == k));
        }
        let sel = select(t.len(), preds);
        let (prompts, flex) = (
            t.col(agent_runs::PROMPTS_USED),
            t.col(agent_runs::FLEX_CREDITS_USED),
        );
        for i in 0..sel.len() {
            let r = sel.row(i);
            by_key
                .entry(key.text(r).to_string())
                .or_default()
                .add(prompts.data.get(r), flex.data.get(r));
        }
        by_key
    }

    /// Every user's credits against `terms`, in e-mail order (bytewise).
    pub fn credits(&self, terms: &Terms) -> Vec<UserCredits> {
        self.credits_with(&self.spend_by_key(terms.cycle.range(), None), terms)
    }

    /// Every user's credits against `terms`, in e-mail order (bytewise), with the spend by
    /// `api_key` summed elsewhere (a store that sums the runs in SQL): only this data's
    /// users and groups are read.
    pub fn credits_with(&self, spend: &HashMap<String, Spend>, terms: &Terms) -> Vec<UserCredits> {
        let mut out: Vec<UserCredits> = self
            .records(&USERS)
            .map(|u| {
                let email = u.text(users::EMAIL.name());
                let key = u.text(users::API_KEY.name());
                let spent = spend.get(key).copied().unwrap_or_default();
                terms.credits(email, &self.groups_of(email), spent)
            })
            .collect();
        out.sort_by(|a, b| a.email.cmp(&b.email));
        out
    }

    /// The `api_key` of a user of the team.
    pub fn key_of_user(&self, email: &str) -> Option<&str> {
        self.user(email).map(|u| u.text(users::API_KEY.name()))
    }

    /// One user's credits against `terms`; `None` when the e-mail is no user of the team.
    pub fn credits_of(&self, email: &str, terms: &Terms) -> Option<UserCredits> {
        let key = self.key_of_user(email)?;
        let spend = self
            .spend_by_key(terms.cycle.range(), Some(key))
            .remove(key)
            .unwrap_or_default();
        Some(terms.credits(email, &self.groups_of(email), spend))
    }
}
