//! `Analytics` answers as CSV or NDJSON (an extension: `Accept: text/csv` or
//! `Accept: application/x-ndjson` on `POST /api/v1/Analytics`, and `usage-server
//! export`): one line per response item, the values exactly as in the JSON answer.
//!
//! - **CSV** (RFC 4180): a header row of the query's aliases in answer order
//!   ([`QueryPlan::output_aliases`]), then one row per item; a value the JSON answer leaves
//!   out (null) is an empty cell (`""` when it is the row's only cell, as an empty line is
//!   no record). A text cell starting with `=`, `+`, `-`, `@`, TAB or CR, which a
//!   spreadsheet would run as a formula, is written with a leading `'` (OWASP CSV
//!   injection; header cells too). A cell holding a comma, a double quote, CR or LF is
//!   quoted, its quotes doubled. Lines end with CRLF.
//! - **NDJSON**: one JSON object per item, the item as the JSON answer has it (the same
//!   keys, in the same order, values as strings), each line ending with LF.
//!
//! An export holds one query: the answer of a request of several has no single header.
//!
//! ```
//! use usage_core::wire::export::{Format, encode};
//! use usage_core::wire::{Item, QueryResult, ResponseItem};
//!
//! let result = QueryResult {
//!     response_items: vec![ResponseItem {
//!         item: Item(vec![("lang".into(), "go, rust".into()), ("n".into(), "3".into())]),
//!     }],
//! };
//! let aliases = ["lang", "n"];
//! assert_eq!(encode(Format::Csv, &aliases, &result), "lang,n\r\n\"go, rust\",3\r\n");
//! assert_eq!(encode(Format::Ndjson, &aliases, &result), "{\"lang\":\"go, rust\",\"n\":\"3\"}\n");
//! ```

use crate::plan::{QueryPlan, QueryShape};
use crate::wire::{Item, QueryResult};

/// An export format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `text/csv`.
    Csv,
    /// `application/x-ndjson`.
    Ndjson,
}

impl Format {
    /// Both formats.
    pub const ALL: [Format; 2] = [Format::Csv, Format::Ndjson];

    /// The media type of the format's answers.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Csv => "text/csv; charset=utf-8",
            Format::Ndjson => "application/x-ndjson",
        }
    }

    /// The format's name on the command line: `csv` or `ndjson`.
    pub fn name(self) -> &'static str {
        match self {
            Format::Csv => "csv",
            Format::Ndjson => "ndjson",
        }
    }

    /// The format named `csv` or `ndjson` (any case).
    pub fn parse(s: &str) -> Option<Format> {
        Format::ALL
            .into_iter()
            .find(|f| f.name().eq_ignore_ascii_case(s.trim()))
    }

    /// The export an `Accept` header asks for: the first media range (in the header's
    /// order, `q=0` ranges skipped) that is `text/csv` or `application/x-ndjson` (also
    /// `application/ndjson`), unless JSON or a wildcard comes first; `None` means JSON.
    pub fn from_accept(accept: &str) -> Option<Format> {
        for range in accept.split(',') {
            let mut parts = range.split(';');
            let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
            let refused = parts.any(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f64>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            if refused || media.is_empty() {
                continue;
            }
            match media.as_str() {
                "text/csv" => return Some(Format::Csv),
                "application/x-ndjson" | "application/ndjson" => return Some(Format::Ndjson),
                "application/json" | "*/*" | "application/*" => return None,
                _ => {}
            }
        }
        None
    }
}

impl QueryPlan {
    /// The aliases an item of this query's answer may hold, in answer order: the
    /// selections', then (except for raw and PCW queries) the group-by fields', each once.
    pub fn output_aliases(&self) -> Vec<&str> {
        let groups = match self.shape {
            QueryShape::Raw | QueryShape::Pcw => &[][..],
            _ => &self.group_by[..],
        };
        let mut out: Vec<&str> = Vec::with_capacity(self.selections.len() + groups.len());
        for a in self
            .selections
            .iter()
            .map(|s| s.alias.as_str())
            .chain(groups.iter().map(|g| g.alias.as_str()))
        {
            if !out.contains(&a) {
                out.push(a);
            }
        }
        out
    }
}

/// The violation of a request for an export of several queries (or none).
pub fn one_query(format: Format) -> crate::Violations {
    let mut v = crate::Violations::new();
    v.push(crate::error::Violation::new(
        crate::JsonPath::root().key("query_requests", 0),
        crate::error::Rule::TooMany,
        format!(
            "an export as {} holds exactly one query; send one request per query",
            format.name()
        ),
    ));
    v
}

/// The first characters that make a spreadsheet read a cell as a formula (OWASP, CSV
/// injection): such a text cell is written with a leading `'`.
const FORMULA_STARTS: [char; 6] = ['=', '+', '-', '@', '\t', '\r'];

/// Appends a CSV cell: a text a spreadsheet would run as a formula (`=HYPERLINK(…)`)
/// behind a `'`, then quoted if it holds a comma, a quote, CR or LF. No number of an
/// answer starts with one of those characters (counts and sums are never negative), so
/// only text cells, aliases included, are ever marked.
fn cell(out: &mut String, v: &str) {
    let marked;
    let v = if v.starts_with(FORMULA_STARTS) {
        marked = format!("'{v}");
        marked.as_str()
    } else {
        v
    };
    if v.contains([',', '"', '\r', '\n']) {
        out.push('"');
        out.push_str(&v.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(v);
    }
}

/// The first line of an export: the CSV header of `aliases`; nothing for NDJSON.
pub fn header<A: AsRef<str>>(format: Format, aliases: &[A], out: &mut String) {
    if format == Format::Csv {
        for (i, a) in aliases.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            cell(out, a.as_ref());
        }
        out.push_str("\r\n");
    }
}

/// The line of one item.
pub fn line<A: AsRef<str>>(format: Format, aliases: &[A], item: &Item, out: &mut String) {
    match format {
        Format::Csv => {
            for (i, a) in aliases.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                match item.get(a.as_ref()) {
                    Some(v) => cell(out, v),
                    // A lone empty cell is written `""`: an empty line is no record.
                    None if aliases.len() == 1 => out.push_str("\"\""),
                    None => {}
                }
            }
            out.push_str("\r\n");
        }
        Format::Ndjson => {
            // An item of strings always serializes.
            out.push_str(&serde_json::to_string(item).unwrap_or_default());
            out.push('\n');
        }
    }
}

/// A whole query result in `format`: the header, then a line per item.
pub fn encode(format: Format, aliases: &[&str], result: &QueryResult) -> String {
    let mut out = String::with_capacity(64 * (result.response_items.len() + 1));
    header(format, aliases, &mut out);
    for it in &result.response_items {
        line(format, aliases, &it.item, &mut out);
    }
    out
}

/// [`encode`] a line at a time, the header first, taking the result: for a caller that
/// sends each line as it is made (the server streams exports).
pub fn into_lines(
    format: Format,
    aliases: Vec<String>,
    result: QueryResult,
) -> impl Iterator<Item = String> + Send + Sync + 'static {
    let mut head = String::new();
    header(format, &aliases, &mut head);
    let head = (!head.is_empty()).then_some(head);
    head.into_iter()
        .chain(result.response_items.into_iter().map(move |it| {
            let mut out = String::new();
            line(format, &aliases, &it.item, &mut out);
            out
        }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ResponseItem;

    #[test]
    fn accept_picks_the_first_export_unless_json_comes_first() {
        let cases: [(&str, Option<Format>); 9] = [
            ("text/csv", Some(Format::Csv)),
            ("TEXT/CSV; charset=utf-8", Some(Format::Csv)),
            ("application/x-ndjson", Some(Format::Ndjson)),
            ("application/ndjson", Some(Format::Ndjson)),
            ("application/json, text/csv", None),
            ("text/csv;q=0, application/x-ndjson", Some(Format::Ndjson)),
            ("text/html, text/csv", Some(Format::Csv)),
            ("*/*", None),
            ("", None),
        ];
        for (accept, want) in cases {
            assert_eq!(Format::from_accept(accept), want, "{accept}");
        }
    }

    /// Contract section 11 (v5): a text cell starting with `=`, `+`, `-`, `@`, TAB or CR
    /// gets a leading `'`, in the header too; other cells and NDJSON are unchanged.
    #[test]
    fn csv_cells_that_a_spreadsheet_would_run_get_a_quote() {
        let cases = [
            (
                "=HYPERLINK(\"http://x\",\"y\")",
                "\"'=HYPERLINK(\"\"http://x\"\",\"\"y\"\")\"",
            ),
            ("+1", "'+1"),
            ("-cmd", "'-cmd"),
            ("@SUM(A1)", "'@SUM(A1)"),
            ("\tx", "'\tx"),
            ("\rx", "\"'\rx\""),
            ("a=b", "a=b"),
            ("'=x", "'=x"),
            ("12", "12"),
            ("", ""),
        ];
        for (v, want) in cases {
            let mut out = String::new();
            cell(&mut out, v);
            assert_eq!(out, want, "{v:?}");
        }
        let item = Item(vec![("=a".into(), "@b".into())]);
        let result = QueryResult {
            response_items: vec![ResponseItem { item }],
        };
        assert_eq!(encode(Format::Csv, &["=a"], &result), "'=a\r\n'@b\r\n");
        assert_eq!(
            encode(Format::Ndjson, &["=a"], &result),
            "{\"=a\":\"@b\"}\n"
        );
    }

    #[test]
    fn csv_quotes_what_needs_quoting_and_leaves_nulls_empty() {
        let item = Item(vec![
            ("a".into(), "x\"y".into()),
            ("c".into(), "line\nbreak".into()),
        ]);
        let mut out = String::new();
        header(Format::Csv, &["a", "b,1", "c"], &mut out);
        line(Format::Csv, &["a", "b,1", "c"], &item, &mut out);
        assert_eq!(out, "a,\"b,1\",c\r\n\"x\"\"y\",,\"line\nbreak\"\r\n");
    }

    #[test]
    fn a_row_of_one_null_is_a_quoted_empty_cell() {
        let mut out = String::new();
        line(Format::Csv, &["a"], &Item(Vec::new()), &mut out);
        assert_eq!(out, "\"\"\r\n");
    }

    #[test]
    fn lines_one_at_a_time_are_the_whole_encoding() {
        let item = |v: &[(&str, &str)]| ResponseItem {
            item: Item(
                v.iter()
                    .map(|(k, x)| (k.to_string(), x.to_string()))
                    .collect(),
            ),
        };
        let result = QueryResult {
            response_items: vec![item(&[("a", "1"), ("b", "x,y")]), item(&[("a", "2")])],
        };
        for f in [Format::Csv, Format::Ndjson] {
            let whole = encode(f, &["a", "b"], &result);
            let lines: Vec<String> =
                into_lines(f, vec!["a".into(), "b".into()], result.clone()).collect();
            assert_eq!(lines.len(), if f == Format::Csv { 3 } else { 2 });
            assert_eq!(lines.concat(), whole);
        }
    }

    #[test]
    fn formats_parse_by_name() {
        assert_eq!(Format::parse("CSV"), Some(Format::Csv));
        assert_eq!(Format::parse("ndjson"), Some(Format::Ndjson));
        assert_eq!(Format::parse("xml"), None);
    }
}
