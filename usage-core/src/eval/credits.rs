//! What the users of a team spent in a time range (contract section 12), from the
//! `agent_runs` table, and their credits against the caps that apply
//! ([`crate::credits`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::TeamData;
use super::select::{select, time_range_pred};
use crate::credits::{Spend, Terms, UserCredits};
use crate::plan::TimeRange;
use crate::schema::records::{AGENT_RUNS, USERS, agent_runs, users};

/// The spend by `api_key` of the last range asked for, kept until the team's records
/// change (a new one is made then): the check of one user before each of their requests
/// is a lookup, not a scan of the team's runs.
#[derive(Default)]
pub(super) struct SpendMemo(Mutex<Option<(TimeRange, SpendByKey)>>);

/// Spend by `api_key`, shared by the answers that read it.
type SpendByKey = Arc<HashMap<String, Spend>>;

impl Clone for SpendMemo {
    /// A copy of a team computes afresh.
    fn clone(&self) -> SpendMemo {
        SpendMemo::default()
    }
}

impl std::fmt::Debug for SpendMemo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SpendMemo")
    }
}

impl TeamData {
    /// Σ `prompts_used` and Σ `flex_credits_used` of the agent runs with a `timestamp` in
    /// `range`, by `api_key`: computed once per range until the records change.
    pub fn spend_by_key(&self, range: TimeRange) -> Arc<HashMap<String, Spend>> {
        let mut memo = self.spend.0.lock().unwrap_or_else(PoisonError::into_inner);
        match &*memo {
            Some((r, by_key)) if *r == range => by_key.clone(),
            _ => {
                let by_key = Arc::new(self.sum_spend(range));
                *memo = Some((range, by_key.clone()));
                by_key
            }
        }
    }

    /// The sums of [`TeamData::spend_by_key`], by a scan of the runs.
    fn sum_spend(&self, range: TimeRange) -> HashMap<String, Spend> {
        let mut by_key: HashMap<String, Spend> = HashMap::new();
        let Some(t) = self.table(&AGENT_RUNS) else {
            return by_key;
        };
        let Some(time) = t.time_column() else {
            return by_key;
        };
        let key = t.col(agent_runs::API_KEY);
        let sel = select(t.len(), vec![time_range_pred(time, range)]);
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
        self.credits_with(&self.spend_by_key(terms.cycle.range()), terms)
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
            .spend_by_key(terms.cycle.range())
            .get(key)
            .copied()
            .unwrap_or_default();
        Some(terms.credits(email, &self.groups_of(email), spend))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::JsonPath;
    use crate::load::{Batch, parse_record};
    use crate::time::Timestamp;

    fn runs(list: &[(&str, &str, i64, i64)]) -> Batch {
        let records = list
            .iter()
            .map(|(id, at, p, f)| {
                let v = serde_json::json!({"id": id, "api_key": "k", "timestamp": at,
                    "ide_type": "editor", "model": "m",
                    "mode": "CONVERSATIONAL_PLANNER_MODE_DEFAULT", "messages_sent": 1,
                    "agent_id": "a", "prompts_used": p, "flex_credits_used": f});
                parse_record(&AGENT_RUNS, &v, &JsonPath::root()).unwrap()
            })
            .collect();
        Batch {
            kind: &AGENT_RUNS,
            records,
        }
    }

    /// The kept sums follow every change of the runs: a new run, a replaced one, a
    /// segment installed; another range is summed afresh.
    #[test]
    fn kept_spend_follows_the_runs() {
        let day = |d: u32| Timestamp::parse_rfc3339(&format!("2025-05-{d:02}T00:00:00Z")).unwrap();
        let may = TimeRange {
            start: Some(day(1)),
            end: Some(day(31)),
        };
        let spent = |d: &TeamData, r| d.spend_by_key(r).get("k").copied().unwrap_or_default();
        let mut d = TeamData::new();
        assert_eq!(spent(&d, may), Spend::default());
        d.apply(&runs(&[("r1", "2025-05-02T00:00:00Z", 100, 5)]));
        assert_eq!(
            spent(&d, may),
            Spend {
                prompts: 100,
                flex: 5
            }
        );
        d.apply(&runs(&[("r2", "2025-05-03T00:00:00Z", 1, 1)]));
        assert_eq!(
            spent(&d, may),
            Spend {
                prompts: 101,
                flex: 6
            }
        );
        // A run replaced by its id: counted once, with its new figures.
        d.apply(&runs(&[("r1", "2025-05-02T00:00:00Z", 10, 0)]));
        assert_eq!(
            spent(&d, may),
            Spend {
                prompts: 11,
                flex: 1
            }
        );
        let first_day = TimeRange {
            start: Some(day(1)),
            end: Some(day(3)),
        };
        assert_eq!(
            spent(&d, first_day),
            Spend {
                prompts: 10,
                flex: 0
            }
        );
        // A segment installed replaces the runs.
        let mut other = TeamData::new();
        other.apply(&runs(&[("r9", "2025-05-09T00:00:00Z", 7, 7)]));
        let bytes = other.segment(&AGENT_RUNS).unwrap();
        d.install(crate::eval::segment::Segment::decode(&bytes).unwrap());
        assert_eq!(
            spent(&d, may),
            Spend {
                prompts: 7,
                flex: 7
            }
        );
    }
}
