//! The SQL of record writes: the columns a write supplies, the binary `COPY` into a record
//! table or the session's staging table, and the merge of staged rows into the table
//! (issue 16's bulk writes). `records.rs` runs them; `copy.rs` encodes the rows.

use usage_core::schema::records::RecordKind;

use super::dialect;
use super::names::{CHANGE_SEQ, IDENTITY_KEY, primary_key, quote, table, time_keyed};

/// The columns a write supplies for a record of `kind`, in `COPY` order: the team, the
/// write's change number, the identity key, the version key when the kind has a version,
/// then the kind's fields. The staging table has the same columns, so one encoding of a
/// round serves a `COPY` into either.
pub fn written_columns(kind: &RecordKind) -> Vec<String> {
    let mut cols = vec![
        "team_id".to_string(),
        CHANGE_SEQ.to_string(),
        IDENTITY_KEY.to_string(),
    ];
    if kind.field("version").is_some() {
        cols.push("version_key".into());
    }
    cols.extend(kind.fields.iter().map(|f| quote(f.name)));
    cols
}

/// The binary `COPY` of a round's rows into `table` ([`table`] or [`stage_table`]).
pub fn copy_in(kind: &RecordKind, table: &str) -> String {
    format!(
        "COPY {table} ({}) FROM STDIN (FORMAT binary)",
        written_columns(kind).join(", ")
    )
}

/// The session's staging table of `kind`'s writes (a temporary table: no WAL, private to
/// the connection, emptied at commit).
pub fn stage_table(kind: &RecordKind) -> String {
    format!("stage_{}", kind.name)
}

/// The statement that creates the staging table of `kind` if the session has none.
pub fn create_stage(kind: &RecordKind) -> String {
    let t = dialect::TYPES;
    let mut cols = vec![
        format!("team_id {} NOT NULL", t.text),
        format!("{CHANGE_SEQ} {} NOT NULL", t.int),
        format!("{IDENTITY_KEY} {} NOT NULL", t.bytes),
    ];
    if kind.field("version").is_some() {
        cols.push(format!("version_key {}", t.bytes));
    }
    cols.extend(
        kind.fields
            .iter()
            .map(|f| format!("{} {}", quote(f.name), dialect::column_type(f.ty))),
    );
    format!(
        "CREATE TEMPORARY TABLE IF NOT EXISTS {} ({}) ON COMMIT DELETE ROWS",
        stage_table(kind),
        cols.join(", ")
    )
}

/// The span of times of the team's stored rows of a time-keyed `kind` within a round's
/// (`$1` the team, `$2` and `$3` the round's first and last time): `NULL`s when it has
/// none there. Two reads of the primary key.
pub fn stored_span(kind: &RecordKind) -> String {
    let time = quote(kind.time.expect("a time-keyed kind has a time"));
    format!(
        "SELECT min({time}), max({time}) FROM {} WHERE team_id = $1 AND {time} BETWEEN $2 AND $3",
        table(kind)
    )
}

/// Whether the team (`$1`) has a stored row of any of the given identities: for a
/// time-keyed `kind`, `$2` their times and `$3` their identity keys (arrays of the same
/// length, in step); otherwise `$2` the identity keys. One probe of the primary key each.
pub fn stored_any(kind: &RecordKind) -> String {
    let t = table(kind);
    let ty = dialect::TYPES;
    if time_keyed(kind) {
        let time = quote(kind.time.expect("a time-keyed kind has a time"));
        format!(
            "SELECT EXISTS (SELECT 1 FROM unnest($2::{}[], $3::{}[]) AS k(t, id) \
             JOIN {t} r ON r.team_id = $1 AND r.{time} = k.t AND r.{IDENTITY_KEY} = k.id)",
            ty.int, ty.bytes
        )
    } else {
        format!(
            "SELECT EXISTS (SELECT 1 FROM {t} WHERE team_id = $1 AND {IDENTITY_KEY} = ANY($2::{}[]))",
            ty.bytes
        )
    }
}

/// How a staged row meets the stored row of its identity (`$1` the team; for a kind keyed
/// by time, `$2` and `$3` the staged time range, so the join reads only the team's rows in
/// it).
fn staged_match(kind: &RecordKind) -> String {
    let id = format!("r.{IDENTITY_KEY} = s.{IDENTITY_KEY}");
    if time_keyed(kind) {
        let time = quote(kind.time.expect("a time-keyed kind has a time"));
        format!("r.team_id = $1 AND r.{time} BETWEEN $2 AND $3 AND r.{time} = s.{time} AND {id}")
    } else {
        format!("r.team_id = $1 AND {id}")
    }
}

/// The first statement of a staged merge: the update of the stored rows that staged records
/// replace (to the staged values and change number), `$1` the team (and, for a kind keyed
/// by time, `$2` and `$3` the staged time range, so the join reads only the team's rows in
/// it).
pub fn merge_update(kind: &RecordKind) -> String {
    let sets: Vec<String> = written_columns(kind)
        .into_iter()
        .filter(|c| {
            c != "team_id" && c != IDENTITY_KEY && !kind.identity.iter().any(|i| quote(i) == *c)
        })
        .map(|c| format!("{c} = s.{c}"))
        .collect();
    format!(
        "UPDATE {} r SET {} FROM {} s WHERE {}",
        table(kind),
        sets.join(", "),
        stage_table(kind),
        staged_match(kind)
    )
}

/// The second statement of a staged merge: the insert of the staged records not stored
/// (`anti`: the update replaced the stored ones, which the primary key then skips), or of
/// all of them when the update replaced none: the staged identities are distinct and the
/// team's writer holds its lock, so none is stored, and the primary key refuses a
/// duplicate. No parameters: the staging table holds one team's round. (Not an anti-join
/// with the record table: Citus refuses a join of a local and a distributed table there.)
pub fn merge_insert(kind: &RecordKind, anti: bool) -> String {
    let cols = written_columns(kind);
    let from: Vec<String> = cols.iter().map(|c| format!("s.{c}")).collect();
    let mut insert = format!(
        "INSERT INTO {} ({}) SELECT {} FROM {} s",
        table(kind),
        cols.join(", "),
        from.join(", "),
        stage_table(kind),
    );
    if anti {
        insert.push_str(&format!(
            " ON CONFLICT ({}) DO NOTHING",
            primary_key(kind).join(", ")
        ));
    }
    insert
}
