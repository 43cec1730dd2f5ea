//! The names of the PostgreSQL store's tables and columns that more than one concern
//! reads: the record tables, the columns writes and queries share, and the change feed's
//! tables. A leaf: it names nothing of the other files.

use usage_core::schema::records::RecordKind;

/// The table of a record kind.
pub fn table(kind: &RecordKind) -> String {
    format!("rec_{}", kind.name)
}

/// An identifier quoted for SQL (field names such as `"version"` are SQL keywords).
pub fn quote(ident: &str) -> String {
    format!("\"{ident}\"")
}

/// Whether a kind's records live in a generated record table (not users, groups, billing).
pub fn has_table(kind: &RecordKind) -> bool {
    kind.is_usage()
}

/// The column holding a record table's identity key ([`super::dialect::identity_key`]); with
/// `team_id`, the table's primary key.
pub const IDENTITY_KEY: &str = "identity_key";

/// The generated column that says whether a stored row holds only values the validator
/// accepts ([`super::schema::readable`]); queries read only such rows (contract section 11).
pub const READABLE: &str = "readable";

/// The column of a record table holding the team's change sequence number of the write
/// that last stored the row (migration 5), and the table of each team's last number.
pub const CHANGE_SEQ: &str = "change_seq";

/// The table of each team's change position: the number of its last write of team data
/// (`seq`) and of its last write of users or groups (`people_seq`).
pub const TEAM_CHANGES: &str = "team_changes";

/// Whether a record table's primary key leads with its time column after `team_id`: the
/// kind's identity holds its time (every kind but those identified by an `id`), so the key
/// `(team_id, time, identity_key)` is as unique as `(team_id, identity_key)`, keeps a write
/// in time order on a few index pages, and serves the team's time ranges itself.
pub fn time_keyed(kind: &RecordKind) -> bool {
    kind.time.is_some_and(|t| kind.identity.contains(&t))
}

/// The one-row table of the store's metadata counter (migration 5): bumped by every write
/// of teams, keys, caps and billing, so instances may cache those and drop them when it
/// moves ([`crate::store::cached::CachedMeta`]). Like `teams` and `keys`, it is no team's
/// (a Citus reference table); record writes never touch it.
pub const META_CHANGES: &str = "meta_changes";

/// The statement that bumps [`META_CHANGES`], in the transaction of a metadata write.
pub const BUMP_META: &str = "UPDATE meta_changes SET version = version + 1 WHERE id = 1";

/// The columns of a record table's primary key (migration 6).
pub fn primary_key(kind: &RecordKind) -> Vec<String> {
    let mut key = vec!["team_id".to_string()];
    if time_keyed(kind) {
        key.push(quote(kind.time.expect("a time-keyed kind has a time")));
    }
    key.push(IDENTITY_KEY.to_string());
    key
}
