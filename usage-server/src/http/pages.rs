//! The rows of a v2 answer, kept for its next pages: paging through an answer of `n` pages
//! computes it once, not `n` times (contract section 11, cost bounds).
//!
//! An entry is keyed by the team, the endpoint and its parameters (the cursor's
//! fingerprint, which leaves out `limit` and `cursor`), and holds the versions it was
//! computed at: the store's change counter and the team's change number
//! ([`StoreOps::change_version`](crate::store::StoreOps::change_version),
//! [`StoreOps::team_version`](crate::store::StoreOps::team_version)). A write of the team, by
//! this process or another, moves one of them and so retires the entry. Entries live at most [`TTL`], and the cache holds at most [`MAX_ROWS`]
//! rows, dropping the oldest entries first. A store without a change version (`memory:`)
//! is not cached.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The rows of an answer: each with its key, in key order.
pub(crate) type Rows = Arc<Vec<(Vec<String>, Value)>>;

/// The versions an answer was computed at: the store's change counter and the team's
/// change number (0 where the store has none).
pub(crate) type Version = (i64, i64);

/// How long an answer is kept.
pub(crate) const TTL: Duration = Duration::from_secs(60);

/// The most rows kept, all entries together.
pub(crate) const MAX_ROWS: usize = 200_000;

struct Entry {
    team: String,
    fingerprint: String,
    version: Version,
    made: Instant,
    rows: Rows,
}

/// Recently computed v2 answers.
#[derive(Default)]
pub(crate) struct Pages {
    entries: Mutex<VecDeque<Entry>>,
}

impl Pages {
    /// The rows computed for `team`'s request `fingerprint` at store version `version`,
    /// if still kept.
    pub(crate) fn get(&self, team: &str, fingerprint: &str, version: Version) -> Option<Rows> {
        let mut entries = self.lock();
        entries.retain(|e| e.made.elapsed() < TTL);
        entries
            .iter()
            .find(|e| e.team == team && e.fingerprint == fingerprint && e.version == version)
            .map(|e| e.rows.clone())
    }

    /// Keeps `rows` for later pages (an answer of more than [`MAX_ROWS`] is not kept).
    pub(crate) fn put(&self, team: &str, fingerprint: &str, version: Version, rows: Rows) {
        if rows.len() > MAX_ROWS {
            return;
        }
        let mut entries = self.lock();
        entries.retain(|e| {
            e.made.elapsed() < TTL
                && !(e.team == team && (e.fingerprint == fingerprint || e.version != version))
        });
        while entries.iter().map(|e| e.rows.len()).sum::<usize>() + rows.len() > MAX_ROWS {
            entries.pop_front();
        }
        entries.push_back(Entry {
            team: team.to_string(),
            fingerprint: fingerprint.to_string(),
            version,
            made: Instant::now(),
            rows,
        });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Entry>> {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rows(n: usize) -> Rows {
        Arc::new(
            (0..n)
                .map(|i| (vec![format!("{i:05}")], json!(i)))
                .collect(),
        )
    }

    #[test]
    fn an_answer_is_found_by_team_request_and_version_only() {
        let p = Pages::default();
        p.put("t1", "fp", (7, 0), rows(3));
        assert_eq!(p.get("t1", "fp", (7, 0)).unwrap().len(), 3);
        assert!(p.get("t1", "fp", (8, 0)).is_none(), "another version");
        assert!(p.get("t2", "fp", (7, 0)).is_none(), "another team");
        assert!(p.get("t1", "fp2", (7, 0)).is_none(), "other parameters");
        assert!(p.get("t1", "fp", (7, 1)).is_none(), "another team version");
        // A team's new version retires its old entries as soon as something is kept, and
        // leaves the other teams'.
        p.put("t2", "fp", (7, 0), rows(2));
        p.put("t1", "fp2", (8, 0), rows(1));
        assert!(p.get("t1", "fp", (7, 0)).is_none());
        assert_eq!(p.get("t1", "fp2", (8, 0)).unwrap().len(), 1);
        assert_eq!(p.get("t2", "fp", (7, 0)).unwrap().len(), 2);
    }

    #[test]
    fn the_rows_kept_stay_within_the_bound() {
        let p = Pages::default();
        p.put("t", "a", (1, 0), rows(MAX_ROWS / 2));
        p.put("t", "b", (1, 0), rows(MAX_ROWS / 2));
        p.put("t", "c", (1, 0), rows(10));
        assert!(p.get("t", "a", (1, 0)).is_none(), "the oldest goes first");
        assert!(p.get("t", "b", (1, 0)).is_some());
        assert!(p.get("t", "c", (1, 0)).is_some());
        p.put("t", "huge", (1, 0), rows(MAX_ROWS + 1));
        assert!(p.get("t", "huge", (1, 0)).is_none());
        assert!(p.get("t", "b", (1, 0)).is_some());
    }
}
