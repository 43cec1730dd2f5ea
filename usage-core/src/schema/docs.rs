//! The data-source reference page (`docs/data-sources.md`), rendered from the tables.

use std::fmt::Write;

use super::records::KINDS;
use super::{Role, SOURCES, ValueType};

fn type_name(ty: ValueType) -> String {
    match ty {
        ValueType::Date => "date".into(),
        ValueType::Hour => "hour".into(),
        ValueType::Timestamp => "timestamp".into(),
        ValueType::Text => "text".into(),
        ValueType::Enum(ids) => format!(
            "enum: {}",
            ids.iter()
                .map(|i| format!("`{i}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        ValueType::Version => "version".into(),
        ValueType::Int => "integer".into(),
        ValueType::Bool => "boolean".into(),
        ValueType::Ratio => "ratio".into(),
        ValueType::Json => "JSON text".into(),
    }
}

fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "" }
}

/// Renders the reference of every data source and record kind as Markdown.
pub fn markdown() -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Data sources and record kinds\n\n\
         Generated from the schema tables of `usage-core` (`usage_core::schema`); a test keeps this\n\
         page in sync (`UPDATE_DOCS=1 cargo test -p usage-core docs_are_current` rewrites it).\n\
         `UNSPECIFIED` is valid for every field (it selects raw values); the aggregations listed\n\
         are the others each field takes (rule 5).\n"
    );
    for s in SOURCES {
        let _ = writeln!(
            out,
            "## `{}`\n\n{}; reads `{}` records.\n",
            s.source.as_str(),
            s.title,
            s.record.name
        );
        let _ = writeln!(
            out,
            "| field | meaning | role | type | aggregations | select | filter | group by |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|---|---|");
        for f in s.fields {
            let role = match f.role {
                Role::Dimension => "dimension",
                Role::Metric => "metric",
                Role::Distinct => "distinct",
            };
            let _ = writeln!(
                out,
                "| `{}` | {} | {} | {} | {} | {} | {} | {} |",
                f.name,
                f.meaning.replace('|', "\\|"),
                role,
                type_name(f.ty),
                f.aggs_text(),
                yes(f.select),
                yes(f.filter),
                yes(f.group)
            );
        }
        let _ = writeln!(out);
    }
    let _ = writeln!(
        out,
        "## Record kinds (Ingest, import)\n\n| kind | fields (`?` optional) | identity |\n|---|---|---|"
    );
    for k in KINDS {
        let fields: Vec<String> = k
            .fields
            .iter()
            .map(|f| format!("`{}`{}", f.name, if f.required { "" } else { "?" }))
            .collect();
        let identity = if k.identity.is_empty() {
            "the team".to_string()
        } else {
            k.identity.join(", ")
        };
        let _ = writeln!(
            out,
            "| `{}` | {} | {} |",
            k.name,
            fields.join(", "),
            identity
        );
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn docs_are_current() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/data-sources.md");
        let want = super::markdown();
        if std::env::var_os("UPDATE_DOCS").is_some() {
            std::fs::write(path, &want).expect("write docs");
        }
        let have = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            have == want,
            "docs/data-sources.md is stale: run UPDATE_DOCS=1 cargo test -p usage-core docs_are_current"
        );
    }
}
