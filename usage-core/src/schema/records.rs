//! The record kinds that load data (contract section 8): one table per kind, the single
//! source for parsing Ingest and import records and for the columns of every store.

use super::enums::{
    AgentMode, ChatIntent, CommandSource, IdeType, Plan, ProviderSource, TeamStatus,
};

/// The type of a record field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordType {
    /// Any non-empty text, compared byte for byte.
    Text,
    /// An RFC 3339 instant that is the start of a UTC hour.
    Hour,
    /// An RFC 3339 instant (cut to microseconds).
    Timestamp,
    /// A date `YYYY-MM-DD`.
    Day,
    /// An integer in `0..=i64::MAX` (a JSON number or a decimal string).
    Count,
    /// A JSON boolean.
    Bool,
    /// One of a closed list of identifiers.
    Enum(&'static [&'static str]),
    /// An array of group ids.
    GroupIds,
}

/// One field of a record kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordField {
    /// The field name (snake_case).
    pub name: &'static str,
    /// Its type.
    pub ty: RecordType,
    /// Whether every record must have it.
    pub required: bool,
}

/// A kind of record.
#[derive(Debug, PartialEq, Eq)]
pub struct RecordKind {
    /// The kind's name (`autocomplete`, `agent_runs`, …), as `Ingest` and `import` take it.
    pub name: &'static str,
    /// The fields, in the contract's order.
    pub fields: &'static [RecordField],
    /// The fields that identify a record: a record with an existing identity replaces it.
    /// Empty for `billing`, whose identity is the team.
    pub identity: &'static [&'static str],
    /// The field holding the record's time, if it has one.
    pub time: Option<&'static str>,
}

impl RecordKind {
    /// The field called `name`.
    pub fn field(&self, name: &str) -> Option<&'static RecordField> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// The position of the field called `name`.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|f| f.name == name)
    }

    /// Whether records of this kind are events identified by an `id` (hashed when absent).
    pub fn is_event(&self) -> bool {
        self.identity == ["id"]
    }

    /// The kind called `name`.
    pub fn by_name(name: &str) -> Option<&'static RecordKind> {
        KINDS.iter().copied().find(|k| k.name == name)
    }

    /// Whether this is a kind of usage data (one of [`USAGE`]).
    pub fn is_usage(&self) -> bool {
        USAGE.iter().any(|k| k.name == self.name)
    }
}

// Names of record fields that code reads by name, each spelled once, here; the tables below
// use them.

/// `users.signup_time`: when the user signed up (else when first stored).
pub const SIGNUP_TIME: &str = "signup_time";
/// `pcw.vendor_bytes_by_autocomplete`: assistant bytes from autocomplete.
pub const VENDOR_BYTES_BY_AUTOCOMPLETE: &str = "vendor_bytes_by_autocomplete";
/// `pcw.vendor_bytes_by_command`: assistant bytes from command.
pub const VENDOR_BYTES_BY_COMMAND: &str = "vendor_bytes_by_command";
/// `pcw.user_bytes`: bytes written by the user.
pub const USER_BYTES: &str = "user_bytes";

const fn req(name: &'static str, ty: RecordType) -> RecordField {
    RecordField {
        name,
        ty,
        required: true,
    }
}
const fn opt(name: &'static str, ty: RecordType) -> RecordField {
    RecordField {
        name,
        ty,
        required: false,
    }
}

use RecordType::*;

/// `groups` records.
pub static GROUPS: RecordKind = RecordKind {
    name: "groups",
    fields: &[req("group_id", Text), req("group_name", Text)],
    identity: &["group_id"],
    time: None,
};

/// `users` records.
pub static USERS: RecordKind = RecordKind {
    name: "users",
    fields: &[
        req("email", Text),
        req("name", Text),
        req("api_key", Text),
        opt("team_status", Enum(TeamStatus::IDENTIFIERS)),
        opt("disable_vendor", Bool),
        opt("groups", GroupIds),
        opt(SIGNUP_TIME, Timestamp),
    ],
    identity: &["email"],
    time: None,
};

/// `autocomplete` records: per user, hour, language, IDE and version.
pub static AUTOCOMPLETE: RecordKind = RecordKind {
    name: "autocomplete",
    fields: &[
        req("api_key", Text),
        req("hour", Hour),
        req("language", Text),
        req("ide", Text),
        req("version", Text),
        req("num_acceptances", Count),
        req("num_lines_accepted", Count),
        req("num_bytes_accepted", Count),
    ],
    identity: &["api_key", "hour", "language", "ide", "version"],
    time: Some("hour"),
};

/// `chat` records: one per chat model response.
pub static CHAT: RecordKind = RecordKind {
    name: "chat",
    fields: &[
        opt("id", Text),
        req("api_key", Text),
        req("timestamp", Timestamp),
        req("model_id", Text),
        req("ide", Text),
        req("version", Text),
        req("latest_intent_type", Enum(ChatIntent::IDENTIFIERS)),
        req("num_chats_received", Count),
        req("chat_accepted", Bool),
        req("chat_inserted_at_cursor", Bool),
        req("chat_applied", Bool),
        req("chat_loc_used", Count),
    ],
    identity: &["id"],
    time: Some("timestamp"),
};

/// `command` records: one per command, declined ones too.
pub static COMMAND: RecordKind = RecordKind {
    name: "command",
    fields: &[
        opt("id", Text),
        req("api_key", Text),
        req("timestamp", Timestamp),
        req("language", Text),
        req("ide", Text),
        req("version", Text),
        req("command_source", Enum(CommandSource::IDENTIFIERS)),
        req("provider_source", Enum(ProviderSource::IDENTIFIERS)),
        req("lines_added", Count),
        req("lines_removed", Count),
        req("bytes_added", Count),
        req("bytes_removed", Count),
        req("selection_lines", Count),
        req("selection_bytes", Count),
        req("accepted", Bool),
    ],
    identity: &["id"],
    time: Some("timestamp"),
};

/// `pcw` records: per user, hour, language, IDE and version.
pub static PCW: RecordKind = RecordKind {
    name: "pcw",
    fields: &[
        req("api_key", Text),
        req("hour", Hour),
        req("language", Text),
        req("ide", Text),
        req("version", Text),
        req(VENDOR_BYTES_BY_AUTOCOMPLETE, Count),
        req(VENDOR_BYTES_BY_COMMAND, Count),
        req(USER_BYTES, Count),
    ],
    identity: &["api_key", "hour", "language", "ide", "version"],
    time: Some("hour"),
};

/// `agent_lines` records: per user, day and IDE type.
pub static AGENT_LINES: RecordKind = RecordKind {
    name: "agent_lines",
    fields: &[
        req("api_key", Text),
        req("day", Day),
        req("ide_type", Enum(IdeType::IDENTIFIERS)),
        req("lines_suggested", Count),
        req("lines_accepted", Count),
    ],
    identity: &["api_key", "day", "ide_type"],
    time: Some("day"),
};

/// `agent_runs` records: one per agent run.
pub static AGENT_RUNS: RecordKind = RecordKind {
    name: "agent_runs",
    fields: &[
        opt("id", Text),
        req("api_key", Text),
        req("timestamp", Timestamp),
        req("ide_type", Enum(IdeType::IDENTIFIERS)),
        req("model", Text),
        req("mode", Enum(AgentMode::IDENTIFIERS)),
        req("messages_sent", Count),
        req("agent_id", Text),
        req("prompts_used", Count),
        opt("flex_credits_used", Count),
    ],
    identity: &["id"],
    time: Some("timestamp"),
};

/// `agent_tool_usage` records: per user, day, IDE type and tool.
pub static AGENT_TOOL_USAGE: RecordKind = RecordKind {
    name: "agent_tool_usage",
    fields: &[
        req("api_key", Text),
        req("day", Day),
        req("ide_type", Enum(IdeType::IDENTIFIERS)),
        req("tool", Text),
        req("count", Count),
    ],
    identity: &["api_key", "day", "ide_type", "tool"],
    time: Some("day"),
};

/// `billing` records: the team's plan, seats, credits and cycle; every field optional.
pub static BILLING: RecordKind = RecordKind {
    name: "billing",
    fields: &[
        opt("plan", Enum(Plan::IDENTIFIERS)),
        opt("num_seats", Count),
        opt("prompt_credits_per_seat", Count),
        opt("billing_cycle_start", Timestamp),
        opt("billing_cycle_end", Timestamp),
        opt("add_on_credits_available", Count),
        opt("add_on_credits_used", Count),
    ],
    identity: &[],
    time: None,
};

/// Every record kind, in the contract's order.
pub static KINDS: &[&RecordKind] = &[
    &GROUPS,
    &USERS,
    &AUTOCOMPLETE,
    &CHAT,
    &COMMAND,
    &PCW,
    &AGENT_LINES,
    &AGENT_RUNS,
    &AGENT_TOOL_USAGE,
    &BILLING,
];

/// The kinds of usage data, in the contract's order: every kind that has a time (not
/// `users`, `groups` or `billing`). Stores keep each in a table of its own; user statistics
/// and custom queries read them.
pub static USAGE: [&RecordKind; 7] = [
    &AUTOCOMPLETE,
    &CHAT,
    &COMMAND,
    &PCW,
    &AGENT_LINES,
    &AGENT_RUNS,
    &AGENT_TOOL_USAGE,
];

/// Which of a user's latest usage times (`UserPageAnalytics`) a kind of activity feeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LastUse {
    /// `lastAutocompleteUsageTime`.
    Autocomplete = 0,
    /// `lastChatUsageTime` (chat and agent runs).
    Chat = 1,
    /// `lastCommandUsageTime`.
    Command = 2,
}

impl LastUse {
    /// Its place among the three latest times, in the order above.
    pub const fn index(self) -> usize {
        self as usize
    }
}

/// The kinds of a user's activity (`activeDays` counts a day with a record of any of
/// them), each with the latest time it feeds, if any: the one list the engine and the
/// PostgreSQL store read (the oracle keeps its own, on purpose).
pub static ACTIVITY: [(&RecordKind, Option<LastUse>); 6] = [
    (&AUTOCOMPLETE, Some(LastUse::Autocomplete)),
    (&CHAT, Some(LastUse::Chat)),
    (&COMMAND, Some(LastUse::Command)),
    (&AGENT_LINES, None),
    (&AGENT_RUNS, Some(LastUse::Chat)),
    (&AGENT_TOOL_USAGE, None),
];

/// The names of every record kind, for messages.
pub fn kind_names() -> Vec<&'static str> {
    KINDS.iter().map(|k| k.name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_and_times_name_fields() {
        for k in KINDS {
            for id in k.identity {
                assert!(
                    *id == "id" || k.field(id).is_some_and(|f| f.required),
                    "{}.{id}",
                    k.name
                );
            }
            if let Some(t) = k.time {
                assert!(k.field(t).is_some(), "{}.{t}", k.name);
            }
            if k.is_event() {
                assert!(!k.field("id").unwrap().required);
            }
        }
    }

    #[test]
    fn usage_kinds_are_the_kinds_with_a_time() {
        let timed: Vec<&str> = KINDS
            .iter()
            .filter(|k| k.time.is_some())
            .map(|k| k.name)
            .collect();
        let usage: Vec<&str> = USAGE.iter().map(|k| k.name).collect();
        assert_eq!(usage, timed);
        assert_eq!(
            usage,
            [
                "autocomplete",
                "chat",
                "command",
                "pcw",
                "agent_lines",
                "agent_runs",
                "agent_tool_usage"
            ]
        );
        assert!(PCW.is_usage() && AGENT_TOOL_USAGE.is_usage());
        assert!(!USERS.is_usage() && !GROUPS.is_usage() && !BILLING.is_usage());
    }

    /// A user's activity is every kind of usage but PCW (a team-wide measure), in order;
    /// three of them feed the latest times, agent runs the chat's.
    #[test]
    fn activity_is_the_usage_of_users() {
        let activity: Vec<&str> = ACTIVITY.iter().map(|(k, _)| k.name).collect();
        let usage: Vec<&str> = USAGE
            .iter()
            .filter(|k| k.name != PCW.name)
            .map(|k| k.name)
            .collect();
        assert_eq!(activity, usage);
        let feeds = |l: LastUse| -> Vec<&str> {
            ACTIVITY
                .iter()
                .filter(|(_, x)| *x == Some(l))
                .map(|(k, _)| k.name)
                .collect()
        };
        assert_eq!(feeds(LastUse::Autocomplete), ["autocomplete"]);
        assert_eq!(feeds(LastUse::Chat), ["chat", "agent_runs"]);
        assert_eq!(feeds(LastUse::Command), ["command"]);
        assert_eq!(
            [LastUse::Autocomplete, LastUse::Chat, LastUse::Command].map(LastUse::index),
            [0, 1, 2]
        );
    }

    #[test]
    fn named_fields_exist() {
        assert_eq!(USERS.field(SIGNUP_TIME).map(|f| f.ty), Some(Timestamp));
        for name in [
            VENDOR_BYTES_BY_AUTOCOMPLETE,
            VENDOR_BYTES_BY_COMMAND,
            USER_BYTES,
        ] {
            assert_eq!(PCW.field(name).map(|f| f.ty), Some(Count), "{name}");
        }
    }
}
