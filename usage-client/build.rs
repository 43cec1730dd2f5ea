//! Generates the typed field set of every data source from usage-core's schema tables, so
//! that the client repeats no field list: `src/query/fields.rs` includes the output.

use std::fmt::Write;

use usage_core::schema::{Expr, Role, SOURCES, SourceSpec, ValueType};

fn module_name(spec: &SourceSpec) -> &'static str {
    match spec.record.name {
        "autocomplete" => "autocomplete",
        "chat" => "chat",
        "command" => "command",
        "pcw" => "pcw",
        "agent_runs" => "agent",
        other => panic!("no client module for record kind {other}"),
    }
}

fn marker(spec: &SourceSpec) -> String {
    let m = module_name(spec);
    let mut c = m.chars();
    let first = c.next().expect("name").to_ascii_uppercase();
    format!("{first}{}", c.as_str())
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let mut out = String::new();
    for spec in SOURCES {
        let m = module_name(spec);
        let marker = marker(spec);
        let _ = writeln!(
            out,
            "/// Marker type of {id} ({title}).\n#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]\npub struct {marker};\n\
             impl crate::query::DataSource for {marker} {{ const SOURCE: usage_core::schema::Source = usage_core::schema::Source::{variant:?}; }}\n",
            id = spec.source.as_str(),
            title = spec.title,
            variant = spec.source,
        );
        let _ = writeln!(
            out,
            "/// Typed fields of {id}: {title}.\npub mod {m} {{\n    use super::*;\n    \
             /// A new query of this source.\n    pub fn query() -> crate::query::QueryBuilder<{marker}> {{ crate::query::QueryBuilder::new() }}",
            id = spec.source.as_str(),
            title = spec.title,
        );
        for f in spec.fields {
            let aggs = f.aggs_text();
            let doc = format!("{} (`{}`; valid aggregations: {aggs})", f.meaning, f.name);
            let (ty, ctor) = match (f.role, f.ty, f.select, f.filter, f.group) {
                (Role::Distinct, ..) => (format!("Distinct<{marker}>"), "Distinct::new"),
                (_, ValueType::Json, ..) => (format!("SelectOnly<{marker}>"), "SelectOnly::new"),
                (Role::Metric, ValueType::Bool, ..) => (format!("Flag<{marker}>"), "Flag::new"),
                (Role::Metric, _, true, true, _) => (format!("Metric<{marker}>"), "Metric::new"),
                (Role::Metric, _, true, false, _) => {
                    (format!("SelectOnly<{marker}>"), "SelectOnly::new")
                }
                (Role::Dimension, ty, select, true, group) => {
                    let k = match ty {
                        ValueType::Date => "DateValue",
                        ValueType::Hour | ValueType::Timestamp => "TimeValue",
                        ValueType::Version => "VersionValue",
                        ValueType::Enum(_) => "EnumValue",
                        _ => "TextValue",
                    };
                    if select && group {
                        (format!("Dimension<{marker}, {k}>"), "Dimension::new")
                    } else {
                        (format!("FilterOnly<{marker}, {k}>"), "FilterOnly::new")
                    }
                }
                other => panic!(
                    "field {} of {} has no client type: {other:?}",
                    f.name,
                    spec.source.as_str()
                ),
            };
            if f.expr == Expr::LocalDate {
                let _ = writeln!(
                    out,
                    "    /// {doc}.\n    ///\n    /// `offset_minutes` lies in −720..=840 (`date UTC-8` is −480, `date UTC+5:30` is 330).\n    \
                     pub fn date_utc(offset_minutes: i32) -> {ty} {{ {ctor}(crate::query::local_date_name(offset_minutes)) }}"
                );
                let _ = writeln!(
                    out,
                    "    /// {doc}: the local date in an IANA time zone (`date America/New_York`; an \
                     extension of this server).\n    ///\n    /// A name the server's time-zone \
                     database does not hold is answered 400 `unknown_field`.\n    \
                     pub fn date_in(zone: &str) -> {ty} {{ {ctor}(format!(\"date {{zone}}\")) }}"
                );
            } else {
                let _ = writeln!(
                    out,
                    "    /// {doc}.\n    pub fn {name}() -> {ty} {{ {ctor}(\"{name}\".into()) }}",
                    name = f.name
                );
            }
        }
        let _ = writeln!(out, "}}\n");
    }
    let dir = std::env::var("OUT_DIR").expect("OUT_DIR");
    std::fs::write(format!("{dir}/fields.rs"), out).expect("write fields.rs");
}
