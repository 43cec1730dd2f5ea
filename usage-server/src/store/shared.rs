//! What the durable stores (SQLite and PostgreSQL) share, so that both store and read the
//! same values the same way: a cap scope as its two columns, a key's permissions as text,
//! the billing row's columns, which record kinds are written whole, and how an ingest goes
//! through the import path. Each store keeps only its own SQL and driver calls.

use usage_core::load::Record;
use usage_core::plan::CapScope;
use usage_core::schema::records::{self, FieldHandle, RecordKind, billing};
use usage_core::schema::{Permission, Plan};
use usage_core::time::Timestamp;

use std::collections::BTreeMap;
use std::sync::Mutex;

use super::billing::NUMBERS;
use super::{
    AdminAction, Billing, Change, KeyInfo, KeyListing, RecordStream, StoreError, StoreResult,
    UnreadableRow,
};

/// The unreadable rows a store has met (contract section 11): each row (its team, kind
/// and row) is logged at `ERROR` once, with the first reason met, and counted for
/// `/healthz`.
#[derive(Debug, Default)]
pub(crate) struct Unreadable {
    rows: Mutex<BTreeMap<(String, String, String), String>>,
}

impl Unreadable {
    /// Notes a row met while reading (logged the first time).
    pub(crate) fn met(&self, row: UnreadableRow) {
        let mut rows = self.rows.lock().unwrap_or_else(|p| p.into_inner());
        if let std::collections::btree_map::Entry::Vacant(e) =
            rows.entry((row.team, row.kind, row.row))
        {
            let (team, kind, at) = e.key();
            tracing::error!(
                team = %team,
                kind = %kind,
                row = %at,
                reason = %row.reason,
                "a stored row cannot be read; it stays in place and answers leave it out"
            );
            e.insert(row.reason);
        }
    }

    /// The rows met, in order.
    pub(crate) fn rows(&self) -> Vec<UnreadableRow> {
        let rows = self.rows.lock().unwrap_or_else(|p| p.into_inner());
        rows.iter()
            .map(|((team, kind, row), reason)| UnreadableRow {
                team: team.clone(),
                kind: kind.clone(),
                row: row.clone(),
                reason: reason.clone(),
            })
            .collect()
    }

    /// How many distinct rows were met.
    pub(crate) fn count(&self) -> u64 {
        self.rows.lock().unwrap_or_else(|p| p.into_inner()).len() as u64
    }
}

/// A cap scope as its `(scope_kind, scope_value)` columns; the team scope's value is `""`.
pub(crate) fn scope_parts(s: &CapScope) -> (&'static str, &str) {
    match s {
        CapScope::Team => ("team", ""),
        CapScope::Group(g) => ("group", g),
        CapScope::User(u) => ("user", u),
    }
}

/// A cap scope from its `(scope_kind, scope_value)` columns (the inverse of
/// [`scope_parts`]).
pub(crate) fn scope_from(kind: &str, value: String) -> CapScope {
    match kind {
        "group" => CapScope::Group(value),
        "user" => CapScope::User(value),
        _ => CapScope::Team,
    }
}

/// An audit entry's change as its `(scope_kind, scope_value, old, new)` columns: a cap's
/// scope and values, or for billing the kind `billing` with both states as JSON in
/// `scope_value` (`{"old": …, "new": …}`) and no numbers.
pub(crate) fn audit_columns(c: &Change) -> (&'static str, String, Option<i64>, Option<i64>) {
    match c {
        Change::Cap { scope, old, new } => {
            let (k, v) = scope_parts(scope);
            (k, v.to_string(), *old, *new)
        }
        Change::Billing { old, new } => (
            "billing",
            serde_json::json!({"old": old.to_json(), "new": new.to_json()}).to_string(),
            None,
            None,
        ),
        Change::Admin {
            action,
            id,
            old,
            new,
        } => (
            action.as_str(),
            serde_json::json!({"id": id, "old": old, "new": new}).to_string(),
            None,
            None,
        ),
    }
}

/// An audit entry's change from its columns (the inverse of [`audit_columns`]).
///
/// # Errors
/// When a billing entry's states do not read.
pub(crate) fn audit_change(
    kind: &str,
    value: String,
    old: Option<i64>,
    new: Option<i64>,
) -> StoreResult<Change> {
    if let Some(action) = AdminAction::parse(kind) {
        let v: serde_json::Value = serde_json::from_str(&value)
            .map_err(|e| StoreError::Internal(format!("a {kind} audit entry: {e}")))?;
        let state = |k: &str| Some(v.get(k)?.clone()).filter(|s| !s.is_null());
        return Ok(Change::Admin {
            action,
            id: v["id"].as_str().unwrap_or_default().to_string(),
            old: state("old"),
            new: state("new"),
        });
    }
    if kind == "billing" {
        let v: serde_json::Value = serde_json::from_str(&value)
            .map_err(|e| StoreError::Internal(format!("a billing audit entry: {e}")))?;
        let state = |k: &str| {
            Billing::from_json(&v[k]).ok_or_else(|| {
                StoreError::Internal(format!("a billing audit entry has no `{k}` state"))
            })
        };
        return Ok(Change::Billing {
            old: state("old")?,
            new: state("new")?,
        });
    }
    Ok(Change::Cap {
        scope: scope_from(kind, value),
        old,
        new,
    })
}

/// A key's permissions as stored in `keys.permissions`: their names joined by commas.
pub(crate) fn permissions_text(permissions: &[Permission]) -> String {
    let names: Vec<&str> = permissions.iter().map(|p| p.as_str()).collect();
    names.join(",")
}

/// A stored key (`id`, `team_id`, `hash`, `permissions`) as [`KeyInfo`]: `None` when the
/// stored hash is not 32 bytes; names that are no permission are dropped.
pub(crate) fn key_info(
    key_id: String,
    team_id: String,
    hash: Vec<u8>,
    permissions: &str,
) -> Option<KeyInfo> {
    let hash: [u8; 32] = hash.try_into().ok()?;
    Some(KeyInfo {
        key_id,
        team_id,
        hash,
        permissions: permissions_of(permissions),
    })
}

/// A stored key's listing columns (`id`, `name`, `permissions`, `created`, `revoked`) as
/// [`KeyListing`]; names that are no permission are dropped.
pub(crate) fn key_listing(
    key_id: String,
    name: Option<String>,
    permissions: &str,
    created: i64,
    revoked: Option<i64>,
) -> KeyListing {
    KeyListing {
        key_id,
        name,
        permissions: permissions_of(permissions),
        created: Timestamp(created),
        revoked: revoked.map(Timestamp),
    }
}

/// A key's permissions from `keys.permissions` (the inverse of [`permissions_text`]).
pub(crate) fn permissions_of(text: &str) -> Vec<Permission> {
    text.split(',')
        .filter_map(|p| p.parse::<Permission>().ok())
        .collect()
}

/// The column of the `billing` table that stores a field of `billing` records: its name,
/// but for the cycle, whose columns the table had before the records named them.
fn billing_column(f: FieldHandle) -> &'static str {
    if f == billing::BILLING_CYCLE_START {
        "cycle_start"
    } else if f == billing::BILLING_CYCLE_END {
        "cycle_end"
    } else {
        f.name()
    }
}

/// The columns of the `billing` table after `team_id`: `plan`, then the column of each of
/// [`NUMBERS`], in the order of [`billing_row`] and [`billing_from_row`].
pub(crate) fn billing_columns() -> Vec<&'static str> {
    std::iter::once(billing_column(billing::PLAN))
        .chain(NUMBERS.iter().map(|&f| billing_column(f)))
        .collect()
}

/// A billing state as the values of [`billing_columns`]: the plan's name, then the six
/// numbers (times in microseconds).
pub(crate) fn billing_row(b: &Billing) -> (&'static str, [i64; 6]) {
    (b.plan.as_str(), NUMBERS.map(|f| b.number(f)))
}

/// A billing state read back from a row of [`billing_columns`]: `plan` (an unknown name
/// reads as `pro`) and `number(i)`, the number in column `i` (1 to 6).
///
/// # Errors
/// The first error of `number`.
pub(crate) fn billing_from_row<E>(
    plan: &str,
    mut number: impl FnMut(usize) -> Result<i64, E>,
) -> Result<Billing, E> {
    let mut b = Billing::new(plan.parse().unwrap_or(Plan::Pro), 0, 0, Timestamp(0));
    for (i, f) in NUMBERS.into_iter().enumerate() {
        b.set_number(f, number(i + 1)?);
    }
    Ok(b)
}

/// Whether records of this kind are written whole, after reading what is stored: users
/// and groups (their rules, section 8, read the stored ones) and billing (applied to the
/// stored row). Other kinds stream in chunks.
pub(crate) fn written_whole(kind: &RecordKind) -> bool {
    std::ptr::eq(kind, &records::USERS)
        || std::ptr::eq(kind, &records::GROUPS)
        || std::ptr::eq(kind, &records::BILLING)
}

/// Records known to be valid (a validated batch) as a stream for the import path, which
/// ingest shares.
pub(crate) fn stream(records: Vec<Record>) -> RecordStream {
    Box::new(records.into_iter().map(Ok))
}

/// The import path's answer to a validated batch, as ingest's: it holds no bad record,
/// so a refusal is a broken invariant.
pub(crate) fn ingested(written: Option<u64>) -> StoreResult<u64> {
    written.ok_or_else(|| StoreError::Internal("a validated batch was refused".into()))
}

/// The error of every call on a closed store.
pub(crate) fn closed() -> StoreError {
    StoreError::Unavailable("the store is closed".into())
}

/// The error of a poisoned lock (a thread panicked holding it).
pub(crate) fn poisoned<T>(_: T) -> StoreError {
    StoreError::Internal("a lock was poisoned".into())
}

/// A team of at most this many usage records is answered on the caller's thread: its
/// answers take well under a millisecond, and the hand-off to the blocking pool was half
/// of a small query's cost. Larger teams, and teams not loaded yet or being written, go
/// to the blocking pool so that no answer holds up the async runtime for long.
pub(crate) const INLINE_ROWS: usize = 100_000;

/// Records held per kind by teams in memory ([`super::StoreOps::record_counts`]): every kind
/// of team data, in [`TeamData::segment_kinds`] order, zero included.
pub(crate) fn count_records<'a>(
    teams: impl Iterator<Item = &'a std::sync::RwLock<usage_core::eval::TeamData>>,
) -> Vec<(&'static str, u64)> {
    use usage_core::eval::TeamData;
    let mut out: Vec<(&'static str, u64)> =
        TeamData::segment_kinds().map(|k| (k.name, 0)).collect();
    for t in teams {
        let d = t.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        for (kind, (_, n)) in TeamData::segment_kinds().zip(out.iter_mut()) {
            *n += d.len(kind) as u64;
        }
    }
    out
}
