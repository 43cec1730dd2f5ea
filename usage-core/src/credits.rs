//! Credits against caps (contract section 12): what each user of a team spent in the
//! team's current billing cycle, the cap that applies to them (section 6), what remains
//! of it and whether they may go on drawing add-on credits.
//!
//! Pure: the caller brings the team's caps ([`Caps`]), its cycle and the users' spend
//! ([`Spend`], summed from the team's `agent_runs` by
//! [`TeamData::spend_by_key`](crate::eval::TeamData::spend_by_key)); [`UserCredits`] is the answer of
//! `GET /api/v2/credits/users/{email}`.
//!
//! Amounts are kept in hundredths of a credit (the unit of `prompts_used` and
//! `flex_credits_used`), so every figure is exact; they are written with two decimals
//! (`"12.50"`). `percent_of_cap` has one decimal, truncated toward zero, so that a user
//! shown at `80.0` has reached 80 %: the shown figure and [`UserCredits::reaches`] never
//! disagree.
//!
//! ```
//! use usage_core::credits::{CapSource, Caps, Cycle, Spend, UserCredits};
//! use usage_core::plan::CapScope;
//! use usage_core::time::Timestamp;
//!
//! let mut caps = Caps::default();
//! caps.set(&CapScope::Team, Some(300));
//! caps.set(&CapScope::Group("eng".into()), Some(100));
//! let cap = caps.effective("ada@example.com", &["eng".to_string()]);
//! assert_eq!(cap, Some((100, CapSource::Group("eng".into()))));
//!
//! let cycle = Cycle { start: Timestamp(0), end: Timestamp(86_400_000_000) };
//! let spend = Spend { prompts: 1_250, flex: 8_050 }; // 12.50 and 80.50 credits
//! let c = UserCredits::new("ada@example.com", cycle, 500, spend, cap);
//! let wire = serde_json::to_value(&c).unwrap();
//! assert_eq!(wire["add_on_credits_used"], "80.50");
//! assert_eq!(wire["remaining_add_on_credits"], "19.50");
//! assert_eq!(wire["percent_of_cap"], "80.5");
//! assert_eq!(wire["cap_source"], "group:eng");
//! assert_eq!(wire["has_access"], true);
//! assert!(c.reaches(80) && !c.reaches(81));
//! ```

use std::collections::BTreeMap;
use std::fmt;

use serde::ser::{Serialize, Serializer};

use crate::plan::{CapScope, TimeRange};
use crate::time::Timestamp;

/// A team's caps at every scope, in whole credits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Caps {
    /// The team cap.
    pub team: Option<i64>,
    /// Caps by group id.
    pub groups: BTreeMap<String, i64>,
    /// Caps by user e-mail.
    pub users: BTreeMap<String, i64>,
}

impl Caps {
    /// The caps of `(scope, cap)` pairs (a scope given twice: the last cap).
    pub fn from_entries(entries: impl IntoIterator<Item = (CapScope, i64)>) -> Caps {
        let mut caps = Caps::default();
        for (scope, cap) in entries {
            caps.set(&scope, Some(cap));
        }
        caps
    }

    /// Sets (`Some`) or clears (`None`) the cap of a scope.
    pub fn set(&mut self, scope: &CapScope, cap: Option<i64>) {
        match (scope, cap) {
            (CapScope::Team, c) => self.team = c,
            (CapScope::Group(g), Some(c)) => {
                self.groups.insert(g.clone(), c);
            }
            (CapScope::Group(g), None) => {
                self.groups.remove(g);
            }
            (CapScope::User(u), Some(c)) => {
                self.users.insert(u.clone(), c);
            }
            (CapScope::User(u), None) => {
                self.users.remove(u);
            }
        }
    }

    /// The cap set at exactly this scope.
    pub fn get(&self, scope: &CapScope) -> Option<i64> {
        match scope {
            CapScope::Team => self.team,
            CapScope::Group(g) => self.groups.get(g).copied(),
            CapScope::User(u) => self.users.get(u).copied(),
        }
    }

    /// The cap that applies to a user who is a member of `groups`, and where it comes
    /// from (section 6): their own cap; else the smallest of their groups' caps (on a
    /// tie, the bytewise smallest group id); else the team cap; else none.
    pub fn effective(&self, email: &str, groups: &[String]) -> Option<(i64, CapSource)> {
        if let Some(&c) = self.users.get(email) {
            return Some((c, CapSource::User));
        }
        let group = groups
            .iter()
            .filter_map(|g| self.groups.get(g).map(|&c| (c, g)))
            .min();
        if let Some((c, g)) = group {
            return Some((c, CapSource::Group(g.clone())));
        }
        self.team.map(|c| (c, CapSource::Team))
    }
}

/// Where the cap that applies to a user is set.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CapSource {
    /// Their own cap.
    User,
    /// The cap of this group of theirs.
    Group(String),
    /// The team cap.
    Team,
}

impl fmt::Display for CapSource {
    /// `user`, `group:<group_id>` or `team`, as `effective-cap` and the credits show it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CapSource::User => f.write_str("user"),
            CapSource::Group(g) => write!(f, "group:{g}"),
            CapSource::Team => f.write_str("team"),
        }
    }
}

/// What a user spent in a cycle, in hundredths of a credit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Spend {
    /// Σ `prompts_used` of their runs.
    pub prompts: i64,
    /// Σ `flex_credits_used` of their runs: the add-on credits drawn.
    pub flex: i64,
}

impl Spend {
    /// Adds a run's figures (saturating: a sum past `i64::MAX` stays there).
    pub fn add(&mut self, prompts: i64, flex: i64) {
        self.prompts = self.prompts.saturating_add(prompts);
        self.flex = self.flex.saturating_add(flex);
    }
}

/// A billing cycle: `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cycle {
    /// The first instant of the cycle.
    pub start: Timestamp,
    /// The first instant after it.
    pub end: Timestamp,
}

impl Cycle {
    /// The cycle as a time range of runs' `timestamp`.
    pub fn range(&self) -> TimeRange {
        TimeRange {
            start: Some(self.start),
            end: Some(self.end),
        }
    }
}

/// What a team's users' credits are computed against: its caps, its current cycle and its
/// prompt credits per seat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Terms {
    /// The team's caps at every scope.
    pub caps: Caps,
    /// The team's current billing cycle.
    pub cycle: Cycle,
    /// The team's prompt credits per seat.
    pub prompt_credits_per_seat: i64,
}

impl Terms {
    /// A user's credits from what they spent; `groups`: the ids of their groups.
    pub fn credits(&self, email: &str, groups: &[String], spend: Spend) -> UserCredits {
        UserCredits::new(
            email,
            self.cycle,
            self.prompt_credits_per_seat,
            spend,
            self.caps.effective(email, groups),
        )
    }
}

/// One user's credits in the team's current cycle against the cap that applies to them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserCredits {
    /// The user's e-mail.
    pub email: String,
    /// The cycle.
    pub cycle: Cycle,
    /// The team's prompt credits per seat.
    pub prompt_credits_per_seat: i64,
    /// What they spent in the cycle.
    pub spend: Spend,
    /// The cap that applies, in whole credits, and its source.
    pub cap: Option<(i64, CapSource)>,
}

impl UserCredits {
    /// A user's credits.
    pub fn new(
        email: &str,
        cycle: Cycle,
        prompt_credits_per_seat: i64,
        spend: Spend,
        cap: Option<(i64, CapSource)>,
    ) -> UserCredits {
        UserCredits {
            email: email.to_string(),
            cycle,
            prompt_credits_per_seat,
            spend,
            cap,
        }
    }

    /// The cap in hundredths.
    fn cap_hundredths(&self) -> Option<i128> {
        self.cap.as_ref().map(|(c, _)| i128::from(*c) * 100)
    }

    /// Whether the user may draw add-on credits: without a cap always, with one while
    /// what they used is below it.
    pub fn has_access(&self) -> bool {
        self.cap_hundredths()
            .is_none_or(|c| i128::from(self.spend.flex) < c)
    }

    /// The cap minus what was used, in hundredths (negative when over); `None` without a
    /// cap.
    pub fn remaining(&self) -> Option<i128> {
        self.cap_hundredths()
            .map(|c| c - i128::from(self.spend.flex))
    }

    /// What was used as a percentage of the cap, in tenths of a percent, truncated;
    /// `None` without a cap or with a cap of 0.
    pub fn percent_tenths(&self) -> Option<i128> {
        match &self.cap {
            Some((c, _)) if *c > 0 => Some(i128::from(self.spend.flex) * 10 / i128::from(*c)),
            _ => None,
        }
    }

    /// Whether the user has a cap and used at least `percent` of it (a cap of 0 is
    /// reached by any use, and by none at 0 %).
    pub fn reaches(&self, percent: i64) -> bool {
        match &self.cap {
            None => false,
            Some((0, _)) => self.spend.flex > 0 || percent <= 0,
            Some((c, _)) => i128::from(self.spend.flex) >= i128::from(percent) * i128::from(*c),
        }
    }
}

/// A user's credits before and after a cap change: a row of the preview of a change
/// (`POST /api/v2/caps/preview`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Change<'a> {
    /// The user's e-mail.
    pub email: &'a str,
    /// Their credits now.
    pub before: &'a UserCredits,
    /// Their credits with the change.
    pub after: &'a UserCredits,
}

/// The users whose cap, its source or access differ between two answers over the same
/// users (both in e-mail order, as [`TeamData::credits`](crate::eval::TeamData::credits)
/// gives them): the preview of a cap change, in e-mail order.
pub fn changed<'a>(before: &'a [UserCredits], after: &'a [UserCredits]) -> Vec<Change<'a>> {
    before
        .iter()
        .zip(after)
        .filter(|(b, a)| {
            debug_assert_eq!(b.email, a.email);
            b.cap != a.cap || b.has_access() != a.has_access()
        })
        .map(|(before, after)| Change {
            email: &before.email,
            before,
            after,
        })
        .collect()
}

/// Hundredths written with two decimals: `1250` as `"12.50"`, `-5` as `"-0.05"`.
pub fn hundredths(v: i128) -> String {
    let sign = if v < 0 { "-" } else { "" };
    let a = v.unsigned_abs();
    format!("{sign}{}.{:02}", a / 100, a % 100)
}

/// Tenths written with one decimal: `805` as `"80.5"`.
fn tenths(v: i128) -> String {
    let sign = if v < 0 { "-" } else { "" };
    let a = v.unsigned_abs();
    format!("{sign}{}.{}", a / 10, a % 10)
}

/// The credits object of contract section 12 as it is sent: the cap's fields are left out
/// without a cap, and `percent_of_cap` with a cap of 0.
#[derive(serde::Serialize)]
struct Wire<'a> {
    email: &'a str,
    cycle_start: Timestamp,
    cycle_end: Timestamp,
    prompt_credits_per_seat: i64,
    prompt_credits_used: String,
    add_on_credits_used: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    add_on_credit_cap: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cap_source: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    remaining_add_on_credits: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    percent_of_cap: Option<String>,
    has_access: bool,
}

impl Serialize for UserCredits {
    /// The credits object of contract section 12: the cap's fields left out without a cap,
    /// `percent_of_cap` with a cap of 0.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Wire {
            email: &self.email,
            cycle_start: self.cycle.start,
            cycle_end: self.cycle.end,
            prompt_credits_per_seat: self.prompt_credits_per_seat,
            prompt_credits_used: hundredths(i128::from(self.spend.prompts)),
            add_on_credits_used: hundredths(i128::from(self.spend.flex)),
            add_on_credit_cap: self.cap.as_ref().map(|(c, _)| *c),
            cap_source: self.cap.as_ref().map(|(_, s)| s.to_string()),
            remaining_add_on_credits: self.remaining().map(hundredths),
            percent_of_cap: self.percent_tenths().map(tenths),
            has_access: self.has_access(),
        }
        .serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(flex: i64, cap: Option<i64>) -> UserCredits {
        let cycle = Cycle {
            start: Timestamp(0),
            end: Timestamp(1),
        };
        UserCredits::new(
            "a@x",
            cycle,
            0,
            Spend { prompts: 0, flex },
            cap.map(|c| (c, CapSource::Team)),
        )
    }

    #[test]
    fn amounts_are_written_exactly() {
        assert_eq!(hundredths(0), "0.00");
        assert_eq!(hundredths(5), "0.05");
        assert_eq!(hundredths(1250), "12.50");
        assert_eq!(hundredths(-5), "-0.05");
        assert_eq!(hundredths(-1234), "-12.34");
        assert_eq!(hundredths(i128::from(i64::MAX)), "92233720368547758.07");
        assert_eq!(tenths(805), "80.5");
        assert_eq!(tenths(0), "0.0");
    }

    #[test]
    fn access_remaining_and_percent_at_the_edges() {
        // Without a cap: access, and none of the cap's figures.
        let none = with(1_000_000, None);
        assert!(none.has_access() && !none.reaches(0));
        assert_eq!((none.remaining(), none.percent_tenths()), (None, None));
        let v = serde_json::to_value(&none).unwrap();
        for k in [
            "add_on_credit_cap",
            "cap_source",
            "remaining_add_on_credits",
            "percent_of_cap",
        ] {
            assert!(v.get(k).is_none(), "{k} in {v}");
        }
        // One hundredth below, at and above a cap of 3.
        let below = with(299, Some(3));
        assert!(below.has_access());
        assert_eq!(below.remaining(), Some(1));
        assert_eq!(below.percent_tenths(), Some(996));
        assert!(below.reaches(99) && !below.reaches(100));
        let at = with(300, Some(3));
        assert!(!at.has_access() && at.reaches(100));
        assert_eq!((at.remaining(), at.percent_tenths()), (Some(0), Some(1000)));
        let over = with(301, Some(3));
        assert_eq!(over.remaining(), Some(-1));
        assert_eq!(
            serde_json::to_value(&over).unwrap()["remaining_add_on_credits"],
            "-0.01"
        );
        // A cap of 0: no access, no percent; reached by any use.
        let zero = with(0, Some(0));
        assert!(!zero.has_access());
        assert_eq!(zero.percent_tenths(), None);
        assert!(zero.reaches(0) && !zero.reaches(1));
        assert!(with(1, Some(0)).reaches(100_000));
        // Truncated, never rounded up: 79.96 % is shown as 79.9 and has not reached 80.
        let almost = with(7_996, Some(100));
        assert_eq!(almost.percent_tenths(), Some(799));
        assert!(!almost.reaches(80));
    }

    #[test]
    fn a_preview_lists_the_users_whose_cap_source_or_access_change() {
        let cycle = Cycle {
            start: Timestamp(0),
            end: Timestamp(1),
        };
        let user = |email: &str, flex, cap: Option<(i64, CapSource)>| {
            UserCredits::new(email, cycle, 0, Spend { prompts: 0, flex }, cap)
        };
        let before = [
            user("a@x", 500, Some((10, CapSource::Team))),
            user("b@x", 0, Some((10, CapSource::Team))),
            user("c@x", 0, None),
            user("d@x", 900, Some((10, CapSource::Team))),
        ];
        let after = [
            // The same cap from another scope: listed.
            user("a@x", 500, Some((10, CapSource::Group("g".into())))),
            user("b@x", 0, Some((10, CapSource::Team))),
            // A cap that blocks nothing yet: listed (the cap changes).
            user("c@x", 0, Some((5, CapSource::Team))),
            // Over the new cap: listed (access changes too).
            user("d@x", 900, Some((5, CapSource::Team))),
        ];
        let emails: Vec<&str> = changed(&before, &after)
            .iter()
            .map(|c| {
                assert_eq!(
                    (&c.before.email, &c.after.email),
                    (&c.email.to_string(), &c.email.to_string())
                );
                c.email
            })
            .collect();
        assert_eq!(emails, ["a@x", "c@x", "d@x"]);
        assert!(changed(&before, &before).is_empty());
    }

    #[test]
    fn the_cap_that_applies_follows_user_then_smallest_group_then_team() {
        let mut caps = Caps::default();
        assert_eq!(caps.effective("a@x", &[]), None);
        caps.set(&CapScope::Team, Some(50));
        assert_eq!(caps.effective("a@x", &[]), Some((50, CapSource::Team)));
        caps.set(&CapScope::Group("b".into()), Some(70));
        caps.set(&CapScope::Group("a".into()), Some(70));
        caps.set(&CapScope::Group("c".into()), Some(90));
        let groups = ["c".to_string(), "b".to_string(), "a".to_string()];
        // The smallest cap, the bytewise smallest id on a tie; higher than the team's.
        assert_eq!(
            caps.effective("a@x", &groups),
            Some((70, CapSource::Group("a".into())))
        );
        caps.set(&CapScope::User("a@x".into()), Some(0));
        assert_eq!(caps.effective("a@x", &groups), Some((0, CapSource::User)));
        assert_eq!(
            caps.effective("b@x", &groups[..1]),
            Some((90, CapSource::Group("c".into())))
        );
        caps.set(&CapScope::User("a@x".into()), None);
        caps.set(&CapScope::Group("a".into()), None);
        assert_eq!(
            caps.effective("a@x", &groups),
            Some((70, CapSource::Group("b".into())))
        );
        assert_eq!(caps.get(&CapScope::Group("a".into())), None);
        assert_eq!(caps.get(&CapScope::Team), Some(50));
    }
}
