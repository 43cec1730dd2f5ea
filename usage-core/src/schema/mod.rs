//! The data sources of custom `Analytics` queries: one declarative table per source.
//!
//! Each [`Field`] gives a field's name, role, value type, the aggregations the spec lists
//! for it, and whether it can be selected, filtered and grouped, and says how its value is
//! computed from a record ([`Expr`]). These tables are the single source for validation,
//! evaluation, SQL generation and the docs; no field list is written anywhere else.
//!
//! ```
//! use usage_core::schema::{Source, Role};
//! let f = Source::UserData.spec().resolve("num_acceptances").unwrap();
//! assert_eq!(f.field().role, Role::Metric);
//! let d = Source::ChatData.spec().resolve("date UTC+5:30").unwrap();
//! assert_eq!(d.zone(), usage_core::zone::LocalZone::Fixed(330));
//! let ny = Source::ChatData.spec().resolve("date America/New_York").unwrap();
//! assert_eq!(ny.canonical_name(), "date America/New_York");
//! ```

pub mod docs;
mod enums;
pub mod records;

pub use enums::*;
use records::RecordKind;

use crate::zone::LocalZone;

/// What a field is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A value to group and filter by.
    Dimension,
    /// A number (or boolean) to aggregate.
    Metric,
    /// A count of distinct values (`distinct_*`).
    Distinct,
}

/// The type of a field's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueType {
    /// A calendar date (`YYYY-MM-DD`).
    Date,
    /// The start of a UTC hour.
    Hour,
    /// An instant.
    Timestamp,
    /// Free text, compared bytewise.
    Text,
    /// A closed enumeration with these identifiers.
    Enum(&'static [&'static str]),
    /// A dotted version, compared part by part.
    Version,
    /// An integer.
    Int,
    /// A boolean.
    Bool,
    /// A ratio in `[0, 1]`.
    Ratio,
    /// A JSON document as text.
    Json,
}

/// How a field's value is computed from a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expr {
    /// A stored record field.
    Column(&'static str),
    /// The record's time (its `hour` or `timestamp`).
    Time,
    /// The UTC date of the record's time.
    UtcDate,
    /// The local date of the record's time in the zone written in the field name (a fixed
    /// offset, or an IANA zone's offset at that instant).
    LocalDate,
    /// Distinct `api_key`.
    DistinctUsers,
    /// Distinct (`api_key`, UTC date).
    DistinctDeveloperDays,
    /// Distinct (`api_key`, hour).
    DistinctDeveloperHours,
    /// PCW: `vendor_bytes_by_autocomplete + vendor_bytes_by_command`.
    PcwVendorBytes,
    /// PCW: vendor bytes + `user_bytes`.
    PcwTotalBytes,
    /// PCW: vendor bytes / total bytes.
    PcwPercent,
    /// Agent source: `{"email":"..."}` of the run's user.
    UserMetadata,
}

/// One field of a data source.
#[derive(Debug, PartialEq, Eq)]
pub struct Field {
    /// The field's name; for the `date UTC±H[:MM]` family, the pattern `date UTC±H[:MM]`.
    pub name: &'static str,
    /// What the field means (for docs).
    pub meaning: &'static str,
    /// Its role.
    pub role: Role,
    /// Its value type.
    pub ty: ValueType,
    /// How its value is computed.
    pub expr: Expr,
    /// The aggregation functions the spec lists for it. `UNSPECIFIED` is valid for every
    /// field (contract section 3, Shapes); rule 5 checks the others against this list.
    pub aggs: &'static [Agg],
    /// Whether it can be selected.
    pub select: bool,
    /// Whether it can be filtered on.
    pub filter: bool,
    /// Whether it can be a group-by field.
    pub group: bool,
}

impl Field {
    /// Whether `agg` is valid for this field (rule 5, with `UNSPECIFIED` always valid).
    pub fn allows(&self, agg: Agg) -> bool {
        agg == Agg::Unspecified || self.aggs.contains(&agg)
    }

    /// The valid aggregations as the spec writes them (`UNSPECIFIED, COUNT`).
    pub fn aggs_text(&self) -> String {
        self.aggs
            .iter()
            .map(|a| a.short().to_ascii_uppercase())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Every valid aggregation, `UNSPECIFIED` first (it is valid for every field):
    /// `UNSPECIFIED, SUM, COUNT`. Rule 5's messages list these.
    pub fn valid_text(&self) -> String {
        let mut all = vec![Agg::Unspecified];
        all.extend(self.aggs.iter().copied().filter(|a| *a != Agg::Unspecified));
        all.iter()
            .map(|a| a.short().to_ascii_uppercase())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Whether this is the `date UTC±H[:MM]` family.
    pub fn is_local_date(&self) -> bool {
        self.expr == Expr::LocalDate
    }
}

/// A data source: its identifier, its record kind and its fields.
#[derive(Debug)]
pub struct SourceSpec {
    /// The source.
    pub source: Source,
    /// What it holds (for docs).
    pub title: &'static str,
    /// The records it reads.
    pub record: &'static RecordKind,
    /// Its fields, in the spec's order.
    pub fields: &'static [Field],
    /// Whether queries of this source can group (PCW cannot: it always answers one item).
    pub groupable: bool,
}

/// A resolved field reference: a field of a source, with the zone of a
/// `date UTC±H[:MM]` or `date <IANA zone>` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FieldRef {
    source: Source,
    index: u16,
    zone: LocalZone,
}

impl FieldRef {
    /// The field's table entry.
    pub fn field(self) -> &'static Field {
        &self.source.spec().fields[self.index as usize]
    }

    /// The source.
    pub fn source(self) -> Source {
        self.source
    }

    /// The position of the field in its source's table.
    pub fn index(self) -> usize {
        self.index as usize
    }

    /// The zone of a local-date field ([`LocalZone::UTC`] for other fields).
    pub fn zone(self) -> LocalZone {
        self.zone
    }

    /// The canonical name: the table's name, or `date UTC+05:30` / `date America/New_York`
    /// (the database's spelling) for the local-date family.
    pub fn canonical_name(self) -> String {
        if self.field().is_local_date() {
            format!("date {}", self.zone.name())
        } else {
            self.field().name.to_string()
        }
    }
}

impl SourceSpec {
    /// Resolves a field name as written in a request; `date UTC±H[:MM]` and
    /// `date <IANA zone>` are parsed ([`LocalZone::parse`]).
    pub fn resolve(&self, name: &str) -> Option<FieldRef> {
        let make = |index: usize, zone: LocalZone| FieldRef {
            source: self.source,
            index: index as u16,
            zone,
        };
        if let Some(i) = self
            .fields
            .iter()
            .position(|f| f.name == name && !f.is_local_date())
        {
            return Some(make(i, LocalZone::UTC));
        }
        let i = self.fields.iter().position(Field::is_local_date)?;
        LocalZone::parse(name.strip_prefix("date ")?).map(|z| make(i, z))
    }

    /// The field names a user can write in `role`'s place, for "did you mean".
    pub fn names(&self, pred: impl Fn(&Field) -> bool) -> Vec<&'static str> {
        self.fields
            .iter()
            .filter(|f| pred(f))
            .map(|f| {
                if f.is_local_date() {
                    "date UTC-8"
                } else {
                    f.name
                }
            })
            .collect()
    }

    /// The field whose value is this stored record column.
    pub fn column_field(&self, column: &str) -> Option<&'static Field> {
        self.fields
            .iter()
            .find(|f| matches!(f.expr, Expr::Column(c) if c == column))
    }
}

impl Source {
    /// This source's table.
    pub fn spec(self) -> &'static SourceSpec {
        match self {
            Source::UserData => &USER_DATA,
            Source::ChatData => &CHAT_DATA,
            Source::CommandData => &COMMAND_DATA,
            Source::PcwData => &PCW_DATA,
            Source::AgentData => &AGENT_DATA,
        }
    }
}

use Agg::{Avg, Count, Max, Min, Sum, Unspecified};

const DIM_AGGS: &[Agg] = &[Unspecified, Count];
const METRIC_AGGS: &[Agg] = &[Sum, Max, Min, Avg];
const BOOL_AGGS: &[Agg] = &[Sum, Count];
const ONLY_UNSPECIFIED: &[Agg] = &[Unspecified];

const fn dim(name: &'static str, meaning: &'static str, ty: ValueType, expr: Expr) -> Field {
    Field {
        name,
        meaning,
        role: Role::Dimension,
        ty,
        expr,
        aggs: DIM_AGGS,
        select: true,
        filter: true,
        group: true,
    }
}
const fn text(name: &'static str, meaning: &'static str) -> Field {
    dim(name, meaning, ValueType::Text, Expr::Column(name))
}
const fn version() -> Field {
    dim(
        "version",
        "client version",
        ValueType::Version,
        Expr::Column("version"),
    )
}
const fn closed(name: &'static str, meaning: &'static str, ids: &'static [&'static str]) -> Field {
    dim(name, meaning, ValueType::Enum(ids), Expr::Column(name))
}
const fn metric(name: &'static str, meaning: &'static str) -> Field {
    Field {
        name,
        meaning,
        role: Role::Metric,
        ty: ValueType::Int,
        expr: Expr::Column(name),
        aggs: METRIC_AGGS,
        select: true,
        filter: true,
        group: false,
    }
}
const fn flag(name: &'static str, meaning: &'static str) -> Field {
    Field {
        ty: ValueType::Bool,
        aggs: BOOL_AGGS,
        ..metric(name, meaning)
    }
}
const fn distinct(name: &'static str, meaning: &'static str, expr: Expr) -> Field {
    Field {
        name,
        meaning,
        role: Role::Distinct,
        ty: ValueType::Int,
        expr,
        aggs: DIM_AGGS,
        select: true,
        filter: false,
        group: false,
    }
}
const fn pcw(name: &'static str, meaning: &'static str, ty: ValueType, expr: Expr) -> Field {
    Field {
        name,
        meaning,
        role: Role::Metric,
        ty,
        expr,
        aggs: ONLY_UNSPECIFIED,
        select: true,
        filter: false,
        group: false,
    }
}
const fn filter_only(f: Field) -> Field {
    Field {
        select: false,
        group: false,
        ..f
    }
}

const API_KEY: Field = text("api_key", "hash of the user's API key");
const fn date(meaning: &'static str) -> Field {
    dim("date", meaning, ValueType::Date, Expr::UtcDate)
}
const LOCAL_DATE: Field = dim(
    "date UTC±H[:MM]",
    "date at a time-zone offset (`date UTC-8`, `date UTC+5:30`; offsets −12:00 to +14:00) or in an IANA time zone, daylight saving time applied per instant (`date America/New_York`; extension)",
    ValueType::Date,
    Expr::LocalDate,
);
const IDE: Field = text("ide", "IDE in use");
const LANGUAGE: Field = text("language", "programming language");

/// Autocomplete data (`QUERY_DATA_SOURCE_USER_DATA`), per user per hour.
pub static USER_DATA: SourceSpec = SourceSpec {
    source: Source::UserData,
    title: "autocomplete data, aggregated per user per hour",
    record: &records::AUTOCOMPLETE,
    groupable: true,
    fields: &[
        API_KEY,
        date("UTC date of the autocompletion"),
        LOCAL_DATE,
        dim(
            "hour",
            "UTC hour of the autocompletion",
            ValueType::Hour,
            Expr::Time,
        ),
        LANGUAGE,
        IDE,
        version(),
        metric("num_acceptances", "number of acceptances"),
        metric("num_lines_accepted", "lines accepted"),
        metric("num_bytes_accepted", "bytes accepted"),
        distinct("distinct_users", "distinct users", Expr::DistinctUsers),
        distinct(
            "distinct_developer_days",
            "distinct (user, day) tuples",
            Expr::DistinctDeveloperDays,
        ),
        distinct(
            "distinct_developer_hours",
            "distinct (user, hour) tuples",
            Expr::DistinctDeveloperHours,
        ),
    ],
};

/// Chat data (`QUERY_DATA_SOURCE_CHAT_DATA`): chat model responses of the older plugins.
pub static CHAT_DATA: SourceSpec = SourceSpec {
    source: Source::ChatData,
    title: "chat model responses of the older non-agentic plugins",
    record: &records::CHAT,
    groupable: true,
    fields: &[
        API_KEY,
        text("model_id", "chat model id"),
        date("UTC date of the chat response"),
        LOCAL_DATE,
        IDE,
        version(),
        closed(
            "latest_intent_type",
            "chat intent type",
            ChatIntent::IDENTIFIERS,
        ),
        metric("num_chats_received", "number of chat messages received"),
        flag("chat_accepted", "whether the chat was accepted (thumbs up)"),
        flag(
            "chat_inserted_at_cursor",
            "whether the Insert button was clicked",
        ),
        flag("chat_applied", "whether the Apply Diff button was clicked"),
        metric("chat_loc_used", "lines of code used from chat"),
    ],
};

/// Command data (`QUERY_DATA_SOURCE_COMMAND_DATA`), declined commands included.
pub static COMMAND_DATA: SourceSpec = SourceSpec {
    source: Source::CommandData,
    title: "commands, declined ones included",
    record: &records::COMMAND,
    groupable: true,
    fields: &[
        API_KEY,
        date("UTC date of the command"),
        dim(
            "timestamp",
            "UTC timestamp of the command",
            ValueType::Timestamp,
            Expr::Time,
        ),
        LANGUAGE,
        IDE,
        version(),
        closed(
            "command_source",
            "trigger source",
            CommandSource::IDENTIFIERS,
        ),
        closed(
            "provider_source",
            "generation or edit mode",
            ProviderSource::IDENTIFIERS,
        ),
        metric("lines_added", "lines added"),
        metric("lines_removed", "lines removed"),
        metric("bytes_added", "bytes added"),
        metric("bytes_removed", "bytes removed"),
        metric("selection_lines", "lines selected (zero for generations)"),
        metric("selection_bytes", "bytes selected (zero for generations)"),
        flag("accepted", "whether the command was accepted"),
    ],
};

/// Percent-code-written data (`QUERY_DATA_SOURCE_PCW_DATA`): one item per query.
pub static PCW_DATA: SourceSpec = SourceSpec {
    source: Source::PcwData,
    title: "percent code written, with autocomplete and command contributions",
    record: &records::PCW,
    groupable: false,
    fields: &[
        pcw(
            "percent_code_written",
            "vendor_bytes / (vendor_bytes + user_bytes)",
            ValueType::Ratio,
            Expr::PcwPercent,
        ),
        pcw(
            "vendor_bytes",
            "total bytes generated by the assistant",
            ValueType::Int,
            Expr::PcwVendorBytes,
        ),
        pcw(
            records::USER_BYTES,
            "total bytes written by the user",
            ValueType::Int,
            Expr::Column(records::USER_BYTES),
        ),
        pcw(
            "total_bytes",
            "vendor_bytes + user_bytes",
            ValueType::Int,
            Expr::PcwTotalBytes,
        ),
        pcw(
            records::VENDOR_BYTES_BY_AUTOCOMPLETE,
            "assistant bytes from autocomplete",
            ValueType::Int,
            Expr::Column(records::VENDOR_BYTES_BY_AUTOCOMPLETE),
        ),
        pcw(
            records::VENDOR_BYTES_BY_COMMAND,
            "assistant bytes from command",
            ValueType::Int,
            Expr::Column(records::VENDOR_BYTES_BY_COMMAND),
        ),
        filter_only(LANGUAGE),
        filter_only(IDE),
        filter_only(version()),
    ],
};

/// Agent runs (`QUERY_DATA_SOURCE_AGENT_DATA`, contract section 3, extension).
pub static AGENT_DATA: SourceSpec = SourceSpec {
    source: Source::AgentData,
    title: "agent runs (extension)",
    record: &records::AGENT_RUNS,
    groupable: true,
    fields: &[
        API_KEY,
        date("the run's UTC date"),
        dim(
            "timestamp",
            "the run's time",
            ValueType::Timestamp,
            Expr::Time,
        ),
        text("model", "model name"),
        text("agent_id", "unique conversation id"),
        dim(
            "ide",
            "the run's IDE type (`editor`, `plugin`)",
            ValueType::Text,
            Expr::Column("ide_type"),
        ),
        closed("mode", "agent mode", AgentMode::IDENTIFIERS),
        Field {
            aggs: &[Unspecified, Sum, Max, Min, Avg],
            ..metric("messages_sent", "messages sent")
        },
        Field {
            aggs: &[Unspecified, Sum, Max, Min, Avg],
            ..metric(
                "prompts_used",
                "prompt credits consumed, in hundredths of a credit",
            )
        },
        Field {
            aggs: &[Unspecified, Sum, Max, Min, Avg],
            ..metric(
                "flex_credits_used",
                "flex credits consumed, in hundredths of a credit",
            )
        },
        Field {
            name: "metadata",
            meaning: "the JSON object {\"email\":\"...\"} of the run's user",
            role: Role::Dimension,
            ty: ValueType::Json,
            expr: Expr::UserMetadata,
            aggs: ONLY_UNSPECIFIED,
            select: true,
            filter: false,
            group: false,
        },
        distinct("distinct_users", "distinct users", Expr::DistinctUsers),
        distinct(
            "distinct_developer_days",
            "distinct (user, day) tuples",
            Expr::DistinctDeveloperDays,
        ),
    ],
};

/// How a PCW output is computed from sums of `pcw` record columns over the matching records
/// (contract section 3, Shapes): a byte count is the sum of its columns; the ratio
/// `percent_code_written` is the sum of its numerator columns over the sum of its
/// denominator columns, as `f64`s, and 0 when the denominator is 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PcwSums {
    /// The columns whose sum is the output (for the ratio, its numerator).
    pub numerator: &'static [&'static str],
    /// For the ratio, the columns whose sum is its denominator; `None` for byte counts.
    pub denominator: Option<&'static [&'static str]>,
}

const PCW_VENDOR: &[&str] = &[
    records::VENDOR_BYTES_BY_AUTOCOMPLETE,
    records::VENDOR_BYTES_BY_COMMAND,
];
const PCW_TOTAL: &[&str] = &[
    records::VENDOR_BYTES_BY_AUTOCOMPLETE,
    records::VENDOR_BYTES_BY_COMMAND,
    records::USER_BYTES,
];
const fn pcw_sum(columns: &'static [&'static str]) -> PcwSums {
    PcwSums {
        numerator: columns,
        denominator: None,
    }
}

/// Every PCW output (each field of [`PCW_DATA`] that can be selected, by its [`Expr`]) as
/// sums of `pcw` columns: the one place that says which columns make which output.
pub static PCW_OUTPUTS: [(Expr, PcwSums); 6] = [
    (
        Expr::PcwPercent,
        PcwSums {
            numerator: PCW_VENDOR,
            denominator: Some(PCW_TOTAL),
        },
    ),
    (Expr::PcwVendorBytes, pcw_sum(PCW_VENDOR)),
    (
        Expr::Column(records::USER_BYTES),
        pcw_sum(&[records::USER_BYTES]),
    ),
    (Expr::PcwTotalBytes, pcw_sum(PCW_TOTAL)),
    (
        Expr::Column(records::VENDOR_BYTES_BY_AUTOCOMPLETE),
        pcw_sum(&[records::VENDOR_BYTES_BY_AUTOCOMPLETE]),
    ),
    (
        Expr::Column(records::VENDOR_BYTES_BY_COMMAND),
        pcw_sum(&[records::VENDOR_BYTES_BY_COMMAND]),
    ),
];

/// The `pcw` columns the outputs of [`PCW_OUTPUTS`] sum, each once, in the record's field
/// order: a PCW query sums these over its matching records, then computes every selected
/// output from the sums.
pub static PCW_COLUMNS: [&str; 3] = [
    records::VENDOR_BYTES_BY_AUTOCOMPLETE,
    records::VENDOR_BYTES_BY_COMMAND,
    records::USER_BYTES,
];

impl Expr {
    /// How this PCW output is computed ([`PCW_OUTPUTS`]); `None` for an expression that is
    /// not one (no other source has the `pcw` columns).
    pub fn pcw_sums(self) -> Option<&'static PcwSums> {
        PCW_OUTPUTS
            .iter()
            .find(|(e, _)| *e == self)
            .map(|(_, sums)| sums)
    }
}

/// Every source, in the order of its identifier list.
pub static SOURCES: &[&SourceSpec] = &[
    &USER_DATA,
    &CHAT_DATA,
    &COMMAND_DATA,
    &PCW_DATA,
    &AGENT_DATA,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_consistent() {
        for s in SOURCES {
            assert_eq!(s.source.spec().source, s.source);
            for f in s.fields {
                if let Expr::Column(c) = f.expr {
                    assert!(s.record.field(c).is_some(), "{}: {c}", f.name);
                }
                if f.role == Role::Metric || f.role == Role::Distinct {
                    assert!(!f.group, "{} is groupable", f.name);
                }
                if f.role == Role::Distinct {
                    assert!(!f.filter);
                }
                if !s.groupable {
                    assert!(!f.group);
                }
                assert!(!f.aggs.is_empty());
            }
            let mut names: Vec<_> = s.fields.iter().map(|f| f.name).collect();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), s.fields.len());
        }
    }

    #[test]
    fn local_date_parsing() {
        let s = USER_DATA.resolve("date UTC-8").unwrap();
        assert_eq!(s.zone(), LocalZone::Fixed(-480));
        assert_eq!(s.canonical_name(), "date UTC-08:00");
        assert_eq!(
            USER_DATA.resolve("date UTC+05:30"),
            USER_DATA.resolve("date UTC+5:30")
        );
        assert_eq!(
            USER_DATA.resolve("date UTC+14").unwrap().zone(),
            LocalZone::Fixed(840)
        );
        assert_eq!(
            USER_DATA.resolve("date UTC-12:00").unwrap().zone(),
            LocalZone::Fixed(-720)
        );
        let ny = USER_DATA.resolve("date america/new_york").unwrap();
        assert_eq!(ny.canonical_name(), "date America/New_York");
        assert_eq!(ny, USER_DATA.resolve("date America/New_York").unwrap());
        assert_ne!(ny, USER_DATA.resolve("date America/Chicago").unwrap());
        for bad in [
            "date UTC+15",
            "date UTC-12:01",
            "date UTC+5:3",
            "date UTC+5:60",
            "date UTC8",
            "date UTC+123",
            "date utc-8",
            "date America/Nowhere",
            "date America/New_York ",
            "date  America/New_York",
            "dateAmerica/New_York",
            "date UTC+08:00 America/New_York",
        ] {
            assert_eq!(USER_DATA.resolve(bad), None, "{bad}");
        }
        assert_eq!(COMMAND_DATA.resolve("date UTC-8"), None);
        assert_eq!(USER_DATA.resolve("date UTC±H[:MM]"), None);
    }

    #[test]
    fn pcw_outputs_cover_the_pcw_fields_and_sum_pcw_counts() {
        let selectable: Vec<Expr> = PCW_DATA
            .fields
            .iter()
            .filter(|f| f.select)
            .map(|f| f.expr)
            .collect();
        let outputs: Vec<Expr> = PCW_OUTPUTS.iter().map(|(e, _)| *e).collect();
        assert_eq!(selectable, outputs);
        let mut named: Vec<&str> = Vec::new();
        for (_, sums) in &PCW_OUTPUTS {
            named.extend(sums.numerator);
            named.extend(sums.denominator.unwrap_or(&[]));
        }
        let in_record_order: Vec<&str> = records::PCW
            .fields
            .iter()
            .map(|f| f.name)
            .filter(|n| named.contains(n))
            .collect();
        assert_eq!(PCW_COLUMNS.to_vec(), in_record_order);
        for c in PCW_COLUMNS {
            assert_eq!(
                records::PCW.field(c).map(|f| f.ty),
                Some(records::RecordType::Count)
            );
        }
        // Only percent_code_written is a ratio: vendor bytes over all bytes.
        let percent = Expr::PcwPercent.pcw_sums().unwrap();
        assert_eq!(
            percent.numerator,
            ["vendor_bytes_by_autocomplete", "vendor_bytes_by_command"]
        );
        assert_eq!(percent.denominator.map(<[_]>::len), Some(3));
        assert_eq!(Expr::PcwTotalBytes.pcw_sums().unwrap().numerator.len(), 3);
        for s in SOURCES.iter().filter(|s| s.source != Source::PcwData) {
            for f in s.fields {
                assert_eq!(f.expr.pcw_sums(), None, "{}", f.name);
            }
        }
    }

    #[test]
    fn agent_ide_reads_ide_type() {
        let f = AGENT_DATA.resolve("ide").unwrap().field();
        assert_eq!(f.expr, Expr::Column("ide_type"));
    }
}
