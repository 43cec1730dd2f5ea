//! A team's audit log: what each entry records ([`Change`]), who made it, and the log as
//! `usage-server audit` prints it and `GET /api/v2/audit` answers it ([`audit_log`]).

use std::collections::HashMap;

use serde_json::{Value, json};
use usage_core::plan::CapScope;
use usage_core::schema::Permission;
use usage_core::time::Timestamp;

use super::{Billing, Store, StoreResult};

/// What an audit entry records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A cap set or cleared at a scope.
    Cap {
        /// Where.
        scope: CapScope,
        /// The cap before (`None`: no cap).
        old: Option<i64>,
        /// The cap after.
        new: Option<i64>,
    },
    /// The team's plan, seats, credits or cycle, changed by `billing` records (`Ingest`
    /// or `import`; contract section 11).
    Billing {
        /// Before.
        old: Billing,
        /// After.
        new: Billing,
    },
    /// A team created, a key created or revoked, a webhook added or removed.
    Admin {
        /// What was done.
        action: AdminAction,
        /// The id of the team, key or webhook.
        id: String,
        /// Its state before (`None`: it did not exist, or was not in force).
        old: Option<Value>,
        /// Its state after.
        new: Option<Value>,
    },
}

impl Change {
    /// A team created: its name and first billing state.
    pub fn team_created(id: &str, name: &str, billing: &Billing) -> Change {
        let mut state = json!({"name": name});
        if let (Value::Object(out), Value::Object(b)) = (&mut state, billing.to_json()) {
            out.extend(b);
        }
        Change::Admin {
            action: AdminAction::TeamCreate,
            id: id.to_string(),
            old: None,
            new: Some(state),
        }
    }

    /// A key created.
    pub fn key_created(key: &super::KeyRecord) -> Change {
        Change::Admin {
            action: AdminAction::KeyCreate,
            id: key.key_id.clone(),
            old: None,
            new: Some(KeyListing::audit_state(
                key.name.as_deref(),
                &key.permissions,
            )),
        }
    }

    /// A key revoked.
    pub fn key_revoked(key_id: &str, name: Option<&str>, permissions: &[Permission]) -> Change {
        Change::Admin {
            action: AdminAction::KeyRevoke,
            id: key_id.to_string(),
            old: Some(KeyListing::audit_state(name, permissions)),
            new: None,
        }
    }

    /// A webhook added (`added`) or removed: its URL, events and thresholds, never its
    /// secret.
    pub fn webhook(hook: &super::webhooks::Webhook, added: bool) -> Change {
        let state = Some(hook.to_json(false));
        let (action, old, new) = if added {
            (AdminAction::WebhookAdd, None, state)
        } else {
            (AdminAction::WebhookRemove, state, None)
        };
        Change::Admin {
            action,
            id: hook.id.clone(),
            old,
            new,
        }
    }
}

/// The administrative changes the audit log records beside caps and billing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminAction {
    /// `team create`: the team's name and first billing state.
    TeamCreate,
    /// `key create` (or the demo's key): the key's name and permissions, never its secret.
    KeyCreate,
    /// `key revoke`.
    KeyRevoke,
    /// A webhook registered (`POST /api/v2/webhooks`, `webhook add`), never its secret.
    WebhookAdd,
    /// A webhook removed.
    WebhookRemove,
}

impl AdminAction {
    /// Every action.
    pub const ALL: [AdminAction; 5] = [
        AdminAction::TeamCreate,
        AdminAction::KeyCreate,
        AdminAction::KeyRevoke,
        AdminAction::WebhookAdd,
        AdminAction::WebhookRemove,
    ];

    /// The `action` of an entry (also the stored `scope_kind`).
    pub fn as_str(self) -> &'static str {
        match self {
            AdminAction::TeamCreate => "team.create",
            AdminAction::KeyCreate => "key.create",
            AdminAction::KeyRevoke => "key.revoke",
            AdminAction::WebhookAdd => "webhook.add",
            AdminAction::WebhookRemove => "webhook.remove",
        }
    }

    /// The action an [`AdminAction::as_str`] names.
    pub fn parse(s: &str) -> Option<AdminAction> {
        AdminAction::ALL.into_iter().find(|a| a.as_str() == s)
    }

    /// The `scope` prefix of its entries: `team`, `key` or `webhook`.
    fn subject(self) -> &'static str {
        match self {
            AdminAction::TeamCreate => "team",
            AdminAction::KeyCreate | AdminAction::KeyRevoke => "key",
            AdminAction::WebhookAdd | AdminAction::WebhookRemove => "webhook",
        }
    }
}

/// One change in a team's audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    /// When.
    pub time: Timestamp,
    /// The key that made it; [`CLI_ACTOR`] for an admin command, [`IMPORT_ACTOR`] for
    /// `usage-server import`, [`DEMO_ACTOR`] for `serve --demo`, `-` for a write with no
    /// key (embedding code).
    pub key_id: String,
    /// What changed.
    pub change: Change,
}

/// The `key_id` of the audit entries of the admin commands (`team create`, `key …`,
/// `cap …`, `webhook …`).
pub const CLI_ACTOR: &str = "cli";

/// The `key_id` of the audit entries of `usage-server import`.
pub const IMPORT_ACTOR: &str = "cli:import";

/// The `key_id` of the audit entries of `serve --demo` (its team and keys).
pub const DEMO_ACTOR: &str = "cli:demo";

/// A service key as `key list` shows it: never its secret or its hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyListing {
    /// Its id.
    pub key_id: String,
    /// Its name.
    pub name: Option<String>,
    /// Its permissions.
    pub permissions: Vec<Permission>,
    /// When it was made.
    pub created: Timestamp,
    /// When it was revoked (`None`: it is in force).
    pub revoked: Option<Timestamp>,
}

impl KeyListing {
    /// The key as `key list` prints it: `key_id`, `name`, `permissions`, `created`,
    /// `revoked` (RFC 3339 or null).
    pub fn to_json(&self) -> Value {
        json!({
            "key_id": self.key_id,
            "name": self.name,
            "permissions": permission_names(&self.permissions),
            "created": self.created.to_rfc3339(),
            "revoked": self.revoked.map(|t| t.to_rfc3339()),
        })
    }

    /// What a key's audit entries show of it: its name and permissions.
    pub fn audit_state(name: Option<&str>, permissions: &[Permission]) -> Value {
        json!({"name": name, "permissions": permission_names(permissions)})
    }
}

fn permission_names(permissions: &[Permission]) -> Vec<&'static str> {
    permissions.iter().map(|p| p.as_str()).collect()
}

impl AuditEntry {
    /// The entry as `usage-server audit` prints it and `GET /api/v2/audit` answers it:
    /// `time` (RFC 3339), `action` (`cap.change`, `billing.change`, or an
    /// [`AdminAction`]), `key_id`, `key_name` (see [`audit_log`]), `scope` (`team`,
    /// `group:ID`, `user:EMAIL` for a cap; `billing`; `team:ID`, `key:ID`, `webhook:ID`
    /// for an admin change), `old`, `new` (a cap; for `billing` the state of
    /// [`Billing::to_json`]; for an admin change the subject's state, or null).
    pub fn to_json(&self, key_name: Option<&str>) -> Value {
        let (action, scope, old, new) = match &self.change {
            Change::Cap { scope, old, new } => {
                ("cap.change", scope.label(), json!(old), json!(new))
            }
            Change::Billing { old, new } => (
                "billing.change",
                "billing".to_string(),
                old.to_json(),
                new.to_json(),
            ),
            Change::Admin {
                action,
                id,
                old,
                new,
            } => (
                action.as_str(),
                format!("{}:{id}", action.subject()),
                json!(old),
                json!(new),
            ),
        };
        json!({
            "time": self.time.to_rfc3339(),
            "action": action,
            "key_id": self.key_id,
            "key_name": key_name,
            "scope": scope,
            "old": old,
            "new": new,
        })
    }
}

impl AuditEntry {
    /// The entry as a `caps.changed` event carries it: [`AuditEntry::to_json`] without
    /// `key_name` (the event is made inside the write, where key names are not read).
    pub fn event_json(&self) -> Value {
        let mut v = self.to_json(None);
        if let Value::Object(m) = &mut v {
            m.remove("key_name");
        }
        v
    }
}

/// The team's audit log, oldest first, as [`AuditEntry::to_json`] shows it. `key_name` is
/// the name of the key that made the change (null when it has none), `cli` for an admin
/// command, an import or the demo (their `key_id` starts with `cli`), null for a write
/// with no key.
///
/// # Errors
/// An unknown team, or a store failure.
pub async fn audit_log(store: &dyn Store, team: &str) -> StoreResult<Vec<Value>> {
    store.billing(team).await?;
    let names: HashMap<String, Option<String>> = store
        .keys(team)
        .await?
        .into_iter()
        .map(|k| (k.key_id, k.name))
        .collect();
    Ok(store
        .audit(team)
        .await?
        .iter()
        .map(|e| {
            let name = if e.key_id == CLI_ACTOR || e.key_id.starts_with("cli:") {
                Some(CLI_ACTOR)
            } else {
                names.get(&e.key_id).and_then(|n| n.as_deref())
            };
            e.to_json(name)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_action_reads_back_from_its_name() {
        for a in AdminAction::ALL {
            assert_eq!(AdminAction::parse(a.as_str()), Some(a));
        }
        assert_eq!(AdminAction::parse("team"), None);
        assert_eq!(AdminAction::parse("billing"), None);
    }

    #[test]
    fn an_admin_entry_names_its_subject() {
        let e = AuditEntry {
            time: Timestamp(0),
            key_id: CLI_ACTOR.into(),
            change: Change::Admin {
                action: AdminAction::KeyRevoke,
                id: "key_1".into(),
                old: Some(KeyListing::audit_state(
                    Some("ci"),
                    &[Permission::AnalyticsRead],
                )),
                new: None,
            },
        };
        assert_eq!(
            e.to_json(Some("cli")),
            json!({
                "time": "1970-01-01T00:00:00Z",
                "action": "key.revoke",
                "key_id": "cli",
                "key_name": "cli",
                "scope": "key:key_1",
                "old": {"name": "ci", "permissions": ["analytics-read"]},
                "new": null,
            })
        );
    }
}
