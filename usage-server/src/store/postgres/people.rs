//! The users, groups and memberships tables, generated from usage-core's
//! [`records::USERS`] and [`records::GROUPS`] like the record tables are from theirs: the
//! DDL, the upserts that write users and groups, and the reads that load them back as
//! records, column by name. Reordering or adding a field of either kind changes every
//! statement with it; nothing here depends on a field's position.
//!
//! A user's `groups` (group ids) are no column: each is a row of `user_groups`, keyed by
//! the user's identity and the group id.

use deadpool_postgres::GenericClient;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;
use usage_core::eval::TeamData;
use usage_core::load::{Batch, FieldValue, Record};
use usage_core::schema::records::{self, RecordField, RecordKind, RecordType};

use super::dialect;
use super::rows::DecodeError;
use super::{pg_err, refs};
use crate::store::StoreResult;

/// How the records of one kind are stored in their table (named after the kind).
struct Table {
    kind: &'static RecordKind,
    /// Optional fields that every stored record has (their columns are `NOT NULL`):
    /// `prepare` gives a user a `signup_time` when first stored.
    filled: &'static [&'static str],
    /// A field unique within the team, checked at commit (`users.api_key`, section 8).
    unique: Option<&'static str>,
}

/// The `users` table.
const USERS: Table = Table {
    kind: &records::USERS,
    filled: &[records::SIGNUP_TIME],
    unique: Some(records::API_KEY),
};

/// The `groups` table.
const GROUPS: Table = Table {
    kind: &records::GROUPS,
    filled: &[],
    unique: None,
};

/// The table of memberships: a user's identity and a group id per row.
const MEMBERSHIPS: &str = "user_groups";

/// The membership column holding a group id: the groups' identity.
fn group_id() -> &'static str {
    records::GROUPS.identity[0]
}

/// The users' field that lists their group ids.
fn groups_field() -> &'static RecordField {
    records::USERS
        .fields
        .iter()
        .find(|f| f.ty == RecordType::GroupIds)
        .expect("users have a list of group ids")
}

impl Table {
    fn name(&self) -> &'static str {
        self.kind.name
    }

    /// The fields stored in columns of the table, in the kind's order.
    fn columns(&self) -> impl Iterator<Item = &'static RecordField> + '_ {
        self.kind
            .fields
            .iter()
            .filter(|f| f.ty != RecordType::GroupIds)
    }

    fn not_null(&self, f: &RecordField) -> bool {
        f.required || self.filled.contains(&f.name)
    }

    /// `CREATE TABLE` of the table.
    fn ddl(&self) -> String {
        let t = dialect::TYPES;
        let mut cols = vec![format!("team_id {} NOT NULL", t.text)];
        for f in self.columns() {
            let null = if self.not_null(f) { " NOT NULL" } else { "" };
            cols.push(format!("{} {}{null}", f.name, dialect::column_type(f.ty)));
        }
        cols.push(format!(
            "PRIMARY KEY (team_id, {})",
            self.kind.identity.join(", ")
        ));
        if let Some(u) = self.unique {
            cols.push(format!(
                "CONSTRAINT {}_{u} UNIQUE (team_id, {u}) DEFERRABLE INITIALLY DEFERRED",
                self.name()
            ));
        }
        format!(
            "CREATE TABLE IF NOT EXISTS {} ({})",
            self.name(),
            cols.join(", ")
        )
    }

    /// Inserts or replaces one record: `$1` the team, then the columns in order.
    fn upsert(&self) -> String {
        let names: Vec<&str> = self.columns().map(|f| f.name).collect();
        let placeholders: Vec<String> = (1..=names.len() + 1).map(|i| format!("${i}")).collect();
        let updates: Vec<String> = names
            .iter()
            .filter(|n| !self.kind.identity.contains(n))
            .map(|n| format!("{n} = EXCLUDED.{n}"))
            .collect();
        format!(
            "INSERT INTO {} (team_id, {}) VALUES ({}) ON CONFLICT (team_id, {}) DO {}",
            self.name(),
            names.join(", "),
            placeholders.join(", "),
            self.kind.identity.join(", "),
            if updates.is_empty() {
                "NOTHING".to_string()
            } else {
                format!("UPDATE SET {}", updates.join(", "))
            }
        )
    }

    /// The result columns of a record of the table aliased `t`, one per field, named after
    /// it (a user's group ids from the memberships of the team `team`, an expression: the
    /// team as a parameter, so that Citus routes the subquery with the rest).
    fn columns_of(&self, t: &str, team: &str) -> String {
        let cols: Vec<String> = self
            .kind
            .fields
            .iter()
            .map(|f| match f.ty {
                RecordType::GroupIds => format!(
                    "ARRAY(SELECT m.{g} FROM {MEMBERSHIPS} m WHERE m.team_id = {team} AND {} ORDER BY m.{g}) AS \"{}\"",
                    self.kind
                        .identity
                        .iter()
                        .map(|c| format!("m.{c} = {t}.{c}"))
                        .collect::<Vec<_>>()
                        .join(" AND "),
                    f.name,
                    g = group_id(),
                ),
                _ => format!("{t}.{}", f.name),
            })
            .collect();
        cols.join(", ")
    }

    /// The team's (`$1`) records, one result column per field, named after it.
    fn select(&self) -> String {
        format!(
            "SELECT {} FROM {} t WHERE t.team_id = $1",
            self.columns_of("t", "$1"),
            self.name()
        )
    }

    /// The parameters of [`Table::upsert`] for a record. An absent value is NULL, or the
    /// type's zero in a `NOT NULL` column (`prepare` leaves none absent there).
    fn values(&self, team: &str, r: &Record) -> Vec<Box<dyn ToSql + Sync + Send>> {
        let mut out: Vec<Box<dyn ToSql + Sync + Send>> = vec![Box::new(team.to_string())];
        for f in self.columns() {
            let v = r.get(f.name);
            let n = self.not_null(f);
            out.push(match f.ty {
                RecordType::Text | RecordType::Enum(_) | RecordType::GroupIds => {
                    param(v.as_text().map(str::to_string), n)
                }
                RecordType::Hour | RecordType::Timestamp | RecordType::Day => {
                    param(v.as_time().map(|t| t.0), n)
                }
                RecordType::Count => param(v.as_count(), n),
                RecordType::Bool => param(v.as_bool(), n),
            });
        }
        out
    }

    /// A row of [`Table::select`] as a record, each field read by its column's name.
    fn record(&self, row: &Row) -> StoreResult<Record> {
        let values = self
            .kind
            .fields
            .iter()
            .map(|f| field(f, row))
            .collect::<Result<Vec<_>, _>>()
            .map_err(DecodeError::from)?;
        Ok(Record::from_values(self.kind, values))
    }
}

/// A value as a parameter: NULL when absent, or the type's zero when `not_null`.
fn param<T>(v: Option<T>, not_null: bool) -> Box<dyn ToSql + Sync + Send>
where
    T: ToSql + Sync + Send + Default + 'static,
{
    if not_null {
        Box::new(v.unwrap_or_default())
    } else {
        Box::new(v)
    }
}

/// One field of a row, by its name: NULL is absent.
fn field(f: &RecordField, row: &Row) -> Result<FieldValue, tokio_postgres::Error> {
    super::rows::field_value(f.ty, row, f.name)
}

/// The result columns of a user of the `users` table aliased `t` of the team `team` (an
/// expression), named after the fields, which [`user_record`] reads back.
pub(super) fn user_columns(t: &str, team: &str) -> String {
    USERS.columns_of(t, team)
}

/// A row holding [`user_columns`] as the user's record.
pub(super) fn user_record(row: &Row) -> StoreResult<Record> {
    USERS.record(row)
}

/// The names of the users, groups and memberships tables, in that order.
pub(super) fn table_names() -> [&'static str; 3] {
    [USERS.name(), GROUPS.name(), MEMBERSHIPS]
}

/// DDL of the users, groups and memberships tables, in that order.
pub(super) fn create_tables() -> Vec<String> {
    let t = dialect::TYPES;
    let mut keys: Vec<&str> = USERS.kind.identity.to_vec();
    keys.push(group_id());
    let mut cols = vec![format!("team_id {} NOT NULL", t.text)];
    cols.extend(keys.iter().map(|c| format!("{c} {} NOT NULL", t.text)));
    cols.push(format!("PRIMARY KEY (team_id, {})", keys.join(", ")));
    vec![
        USERS.ddl(),
        GROUPS.ddl(),
        format!(
            "CREATE TABLE IF NOT EXISTS {MEMBERSHIPS} ({})",
            cols.join(", ")
        ),
    ]
}

/// The team's users and groups as records (groups first), for the checks of section 8.
pub(super) async fn load(c: &impl GenericClient, team: &str) -> StoreResult<TeamData> {
    let mut data = TeamData::new();
    for table in [&GROUPS, &USERS] {
        let rows = c
            .query(table.select().as_str(), &[&team])
            .await
            .map_err(pg_err)?;
        let records = rows
            .iter()
            .map(|r| table.record(r))
            .collect::<StoreResult<Vec<_>>>()?;
        data.apply(&Batch {
            kind: table.kind,
            records,
        });
    }
    Ok(data)
}

/// Upserts prepared users or groups one by one (few), a user's memberships with them.
pub(super) async fn write(
    c: &impl GenericClient,
    team: &str,
    kind: &'static RecordKind,
    records: &[Record],
) -> StoreResult<()> {
    let users = std::ptr::eq(kind, USERS.kind);
    let table = if users { &USERS } else { &GROUPS };
    let upsert = table.upsert();
    let (forget, remember) = memberships();
    for r in records {
        let values = table.values(team, r);
        c.execute(upsert.as_str(), &refs(&values))
            .await
            .map_err(pg_err)?;
        if !users {
            continue;
        }
        let mut key: Vec<Box<dyn ToSql + Sync + Send>> = vec![Box::new(team.to_string())];
        for name in USERS.kind.identity {
            key.push(Box::new(r.text(name).to_string()));
        }
        c.execute(forget.as_str(), &refs(&key))
            .await
            .map_err(pg_err)?;
        let groups = match r.get(groups_field().name) {
            FieldValue::Groups(g) => g.clone(),
            _ => Vec::new(),
        };
        key.push(Box::new(groups));
        c.execute(remember.as_str(), &refs(&key))
            .await
            .map_err(pg_err)?;
    }
    Ok(())
}

/// The statements that replace a user's memberships: delete them (`$1` the team, then the
/// user's identity), then insert one per group id of the text array that follows.
fn memberships() -> (String, String) {
    let identity = USERS.kind.identity;
    let forget: Vec<String> = identity
        .iter()
        .enumerate()
        .map(|(i, c)| format!("{c} = ${}", i + 2))
        .collect();
    let given: Vec<String> = (2..identity.len() + 2).map(|i| format!("${i}")).collect();
    (
        format!(
            "DELETE FROM {MEMBERSHIPS} WHERE team_id = $1 AND {}",
            forget.join(" AND ")
        ),
        format!(
            "INSERT INTO {MEMBERSHIPS} (team_id, {}, {g}) SELECT $1, {}, g FROM UNNEST(${}::text[]) g ON CONFLICT DO NOTHING",
            identity.join(", "),
            given.join(", "),
            identity.len() + 2,
            g = group_id(),
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The statements as they were written by hand before they were generated.
    #[test]
    fn statements_are_the_ones_written_by_hand() {
        assert_eq!(
            USERS.upsert(),
            "INSERT INTO users (team_id, email, name, api_key, team_status, disable_vendor, signup_time) \
             VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (team_id, email) DO UPDATE SET name = EXCLUDED.name, \
             api_key = EXCLUDED.api_key, team_status = EXCLUDED.team_status, disable_vendor = EXCLUDED.disable_vendor, \
             signup_time = EXCLUDED.signup_time"
        );
        assert_eq!(
            GROUPS.upsert(),
            "INSERT INTO groups (team_id, group_id, group_name) VALUES ($1, $2, $3) \
             ON CONFLICT (team_id, group_id) DO UPDATE SET group_name = EXCLUDED.group_name"
        );
        assert_eq!(
            memberships(),
            (
                "DELETE FROM user_groups WHERE team_id = $1 AND email = $2".to_string(),
                "INSERT INTO user_groups (team_id, email, group_id) SELECT $1, $2, g FROM UNNEST($3::text[]) g ON CONFLICT DO NOTHING"
                    .to_string()
            )
        );
        assert_eq!(
            USERS.select(),
            "SELECT t.email, t.name, t.api_key, t.team_status, t.disable_vendor, \
             ARRAY(SELECT m.group_id FROM user_groups m WHERE m.team_id = $1 AND m.email = t.email ORDER BY m.group_id) AS \"groups\", \
             t.signup_time FROM users t WHERE t.team_id = $1"
        );
        assert_eq!(
            GROUPS.select(),
            "SELECT t.group_id, t.group_name FROM groups t WHERE t.team_id = $1"
        );
    }
}
