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

// Names of record fields that code reads across kinds or by name; each comes from a
// handle, so the tables spell every name once.

/// `users.signup_time`: when the user signed up (else when first stored).
pub const SIGNUP_TIME: &str = users::SIGNUP_TIME.name();

/// `pcw.vendor_bytes_by_autocomplete`: assistant bytes from autocomplete.
pub const VENDOR_BYTES_BY_AUTOCOMPLETE: &str = pcw::VENDOR_BYTES_BY_AUTOCOMPLETE.name();

/// `pcw.vendor_bytes_by_command`: assistant bytes from command.
pub const VENDOR_BYTES_BY_COMMAND: &str = pcw::VENDOR_BYTES_BY_COMMAND.name();

/// `pcw.user_bytes`: bytes written by the user.
pub const USER_BYTES: &str = pcw::USER_BYTES.name();

/// `api_key`: the user's key hash, the first field of every kind of usage data and a field
/// of `users` (a test checks every usage kind has it).
pub const API_KEY: &str = users::API_KEY.name();

/// A field of one record kind, found in the kind's table when the program is compiled:
/// `records::users::EMAIL`. The handles are made from the kinds' tables (`record_kind!`), and one
/// naming no field of its kind fails to compile (a panic in constant evaluation), so a
/// misspelt column is a compile error rather than a read of nothing.
#[derive(Debug, Clone, Copy)]
pub struct FieldHandle {
    /// The kind.
    pub kind: &'static RecordKind,
    /// The field's position in the kind's fields.
    pub index: usize,
}

/// Whether two texts are equal, in constant evaluation.
const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Handles are equal when they are of the same kind (the same table, not an equal one)
/// and position.
impl PartialEq for FieldHandle {
    fn eq(&self, other: &FieldHandle) -> bool {
        std::ptr::eq(self.kind, other.kind) && self.index == other.index
    }
}

impl Eq for FieldHandle {}

impl FieldHandle {
    /// The field `name` of `kind`.
    ///
    /// # Panics
    /// When `kind` has no such field: in a constant, the program does not compile.
    pub const fn of(kind: &'static RecordKind, name: &str) -> FieldHandle {
        let mut index = 0;
        while index < kind.fields.len() {
            if same(kind.fields[index].name, name) {
                return FieldHandle { kind, index };
            }
            index += 1;
        }
        panic!("no field of this name in the record kind");
    }

    /// The field's name.
    pub const fn name(self) -> &'static str {
        self.kind.fields[self.index].name
    }

    /// The field.
    pub const fn field(self) -> &'static RecordField {
        &self.kind.fields[self.index]
    }
}

/// A record kind's table and a module of handles of its fields: `record_kind! { /// doc
/// USERS, mod users = "users" { EMAIL: req("email", Text), ... } identity: ..., time:
/// ..., }` makes `pub static USERS: RecordKind` and `pub mod users { pub const EMAIL:
/// FieldHandle }`.
macro_rules! record_kind {
    (
        $(#[$doc:meta])*
        $KIND:ident, mod $module:ident = $name:literal {
            $($H:ident: $req:ident($fname:literal, $ty:expr),)*
        }
        identity: $identity:expr,
        time: $time:expr,
    ) => {
        $(#[$doc])*
        pub static $KIND: RecordKind = RecordKind {
            name: $name,
            fields: &[$($req($fname, $ty)),*],
            identity: $identity,
            time: $time,
        };

        #[doc = concat!("Handles of the fields of `", $name, "` records ([`", stringify!($KIND), "`]).")]
        pub mod $module {
            use super::{FieldHandle, $KIND};
            $(
                #[doc = concat!("`", $name, ".", $fname, "`.")]
                pub const $H: FieldHandle = FieldHandle::of(&$KIND, $fname);
            )*
        }
    };
}

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

record_kind! {
    /// `groups` records.
    GROUPS, mod groups = "groups" {
        GROUP_ID: req("group_id", Text),
        GROUP_NAME: req("group_name", Text),
    }
    identity: &["group_id"],
    time: None,
}

record_kind! {
    /// `users` records.
    USERS, mod users = "users" {
        EMAIL: req("email", Text),
        NAME: req("name", Text),
        API_KEY: req("api_key", Text),
        TEAM_STATUS: opt("team_status", Enum(TeamStatus::IDENTIFIERS)),
        DISABLE_VENDOR: opt("disable_vendor", Bool),
        GROUPS: opt("groups", GroupIds),
        SIGNUP_TIME: opt("signup_time", Timestamp),
    }
    identity: &["email"],
    time: None,
}

record_kind! {
    /// `autocomplete` records: per user, hour, language, IDE and version.
    AUTOCOMPLETE, mod autocomplete = "autocomplete" {
        API_KEY: req("api_key", Text),
        HOUR: req("hour", Hour),
        LANGUAGE: req("language", Text),
        IDE: req("ide", Text),
        VERSION: req("version", Text),
        NUM_ACCEPTANCES: req("num_acceptances", Count),
        NUM_LINES_ACCEPTED: req("num_lines_accepted", Count),
        NUM_BYTES_ACCEPTED: req("num_bytes_accepted", Count),
    }
    identity: &["api_key", "hour", "language", "ide", "version"],
    time: Some("hour"),
}

record_kind! {
    /// `chat` records: one per chat model response.
    CHAT, mod chat = "chat" {
        ID: opt("id", Text),
        API_KEY: req("api_key", Text),
        TIMESTAMP: req("timestamp", Timestamp),
        MODEL_ID: req("model_id", Text),
        IDE: req("ide", Text),
        VERSION: req("version", Text),
        LATEST_INTENT_TYPE: req("latest_intent_type", Enum(ChatIntent::IDENTIFIERS)),
        NUM_CHATS_RECEIVED: req("num_chats_received", Count),
        CHAT_ACCEPTED: req("chat_accepted", Bool),
        CHAT_INSERTED_AT_CURSOR: req("chat_inserted_at_cursor", Bool),
        CHAT_APPLIED: req("chat_applied", Bool),
        CHAT_LOC_USED: req("chat_loc_used", Count),
    }
    identity: &["id"],
    time: Some("timestamp"),
}

record_kind! {
    /// `command` records: one per command, declined ones too.
    COMMAND, mod command = "command" {
        ID: opt("id", Text),
        API_KEY: req("api_key", Text),
        TIMESTAMP: req("timestamp", Timestamp),
        LANGUAGE: req("language", Text),
        IDE: req("ide", Text),
        VERSION: req("version", Text),
        COMMAND_SOURCE: req("command_source", Enum(CommandSource::IDENTIFIERS)),
        PROVIDER_SOURCE: req("provider_source", Enum(ProviderSource::IDENTIFIERS)),
        LINES_ADDED: req("lines_added", Count),
        LINES_REMOVED: req("lines_removed", Count),
        BYTES_ADDED: req("bytes_added", Count),
        BYTES_REMOVED: req("bytes_removed", Count),
        SELECTION_LINES: req("selection_lines", Count),
        SELECTION_BYTES: req("selection_bytes", Count),
        ACCEPTED: req("accepted", Bool),
    }
    identity: &["id"],
    time: Some("timestamp"),
}

record_kind! {
    /// `pcw` records: per user, hour, language, IDE and version.
    PCW, mod pcw = "pcw" {
        API_KEY: req("api_key", Text),
        HOUR: req("hour", Hour),
        LANGUAGE: req("language", Text),
        IDE: req("ide", Text),
        VERSION: req("version", Text),
        VENDOR_BYTES_BY_AUTOCOMPLETE: req("vendor_bytes_by_autocomplete", Count),
        VENDOR_BYTES_BY_COMMAND: req("vendor_bytes_by_command", Count),
        USER_BYTES: req("user_bytes", Count),
    }
    identity: &["api_key", "hour", "language", "ide", "version"],
    time: Some("hour"),
}

record_kind! {
    /// `agent_lines` records: per user, day and IDE type.
    AGENT_LINES, mod agent_lines = "agent_lines" {
        API_KEY: req("api_key", Text),
        DAY: req("day", Day),
        IDE_TYPE: req("ide_type", Enum(IdeType::IDENTIFIERS)),
        LINES_SUGGESTED: req("lines_suggested", Count),
        LINES_ACCEPTED: req("lines_accepted", Count),
    }
    identity: &["api_key", "day", "ide_type"],
    time: Some("day"),
}

record_kind! {
    /// `agent_runs` records: one per agent run.
    AGENT_RUNS, mod agent_runs = "agent_runs" {
        ID: opt("id", Text),
        API_KEY: req("api_key", Text),
        TIMESTAMP: req("timestamp", Timestamp),
        IDE_TYPE: req("ide_type", Enum(IdeType::IDENTIFIERS)),
        MODEL: req("model", Text),
        MODE: req("mode", Enum(AgentMode::IDENTIFIERS)),
        MESSAGES_SENT: req("messages_sent", Count),
        AGENT_ID: req("agent_id", Text),
        PROMPTS_USED: req("prompts_used", Count),
        FLEX_CREDITS_USED: opt("flex_credits_used", Count),
    }
    identity: &["id"],
    time: Some("timestamp"),
}

record_kind! {
    /// `agent_tool_usage` records: per user, day, IDE type and tool.
    AGENT_TOOL_USAGE, mod agent_tool_usage = "agent_tool_usage" {
        API_KEY: req("api_key", Text),
        DAY: req("day", Day),
        IDE_TYPE: req("ide_type", Enum(IdeType::IDENTIFIERS)),
        TOOL: req("tool", Text),
        COUNT: req("count", Count),
    }
    identity: &["api_key", "day", "ide_type", "tool"],
    time: Some("day"),
}

record_kind! {
    /// `billing` records: the team's plan, seats, credits and cycle; every field optional.
    BILLING, mod billing = "billing" {
        PLAN: opt("plan", Enum(Plan::IDENTIFIERS)),
        NUM_SEATS: opt("num_seats", Count),
        PROMPT_CREDITS_PER_SEAT: opt("prompt_credits_per_seat", Count),
        BILLING_CYCLE_START: opt("billing_cycle_start", Timestamp),
        BILLING_CYCLE_END: opt("billing_cycle_end", Timestamp),
        ADD_ON_CREDITS_AVAILABLE: opt("add_on_credits_available", Count),
        ADD_ON_CREDITS_USED: opt("add_on_credits_used", Count),
    }
    identity: &[],
    time: None,
}

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
