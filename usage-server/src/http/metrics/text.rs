//! The two text formats of `GET /metrics`, written from one model, and the one a scraper's
//! `Accept` header asks for.
//!
//! - [`Format::Classic`], the Prometheus text format 0.0.4: `# HELP` and `# TYPE` name the
//!   series (`usage_http_requests_total` for a counter), no `_created` sample, no `# EOF`.
//!   What every scraper reads, and the answer unless OpenMetrics is asked for.
//! - [`Format::OpenMetrics`], OpenMetrics 1.0: the metadata name the family
//!   (`usage_http_requests`, whose samples are `usage_http_requests_total`), info families
//!   have the type `info`, and the text ends with `# EOF`.
//!
//! The samples are the same in both: one model ([`Family`]), two spellings of its metadata.

use std::fmt::Write as _;

/// A text format of the answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// The Prometheus text format 0.0.4.
    Classic,
    /// OpenMetrics 1.0.
    OpenMetrics,
}

impl Format {
    /// The `Content-Type` of an answer in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Classic => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }

    /// The format an `Accept` header asks for: OpenMetrics when it names
    /// `application/openmetrics-text` (no version, `1.0.0` or `0.0.1`) with a q-value above
    /// 0 and at least that of every range the classic format matches (`text/plain`,
    /// `text/*`, `*/*`); the classic format otherwise, also when nothing matches (a scraper
    /// that asks for neither gets the format every scraper reads, not a 406).
    pub fn negotiate(accept: Option<&str>) -> Format {
        let (mut open_metrics, mut classic) = (0.0_f32, 0.0_f32);
        for range in accept.unwrap_or("").split(',') {
            let mut parts = range.split(';');
            let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
            let (mut q, mut version) = (Some(1.0_f32), None);
            for param in parts {
                let Some((k, v)) = param.split_once('=') else {
                    continue;
                };
                let v = v.trim().trim_matches('"');
                match k.trim().to_ascii_lowercase().as_str() {
                    "q" => q = v.parse().ok().filter(|q| (0.0..=1.0).contains(q)),
                    "version" => version = Some(v.to_string()),
                    _ => {}
                }
            }
            // A range whose q-value is not a number from 0 to 1 counts for nothing.
            let Some(q) = q else { continue };
            match media.as_str() {
                "application/openmetrics-text"
                    if matches!(version.as_deref(), None | Some("1.0.0" | "0.0.1")) =>
                {
                    open_metrics = open_metrics.max(q);
                }
                "text/plain" | "text/*" | "*/*" => classic = classic.max(q),
                _ => {}
            }
        }
        if open_metrics > 0.0 && open_metrics >= classic {
            Format::OpenMetrics
        } else {
            Format::Classic
        }
    }
}

/// The type of a family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Type {
    /// A count that only grows: samples `<name>_total`.
    Counter,
    /// A value that goes up and down: samples `<name>`.
    Gauge,
    /// Observations in cumulative buckets: samples `<name>_bucket`, `_sum`, `_count`.
    Histogram,
    /// Labels describing the target, value 1: samples `<name>_info`; a gauge of that name
    /// in the classic format.
    Info,
}

/// A value of a sample.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A whole number.
    Int(u64),
    /// A number with a fraction.
    Float(f64),
    /// A histogram: the upper bounds, the number of observations at most each bound (not
    /// cumulative; those above the last bound are `count` minus their sum), their sum and
    /// their count.
    Histogram {
        /// The bucket's upper bounds, increasing, without `+Inf`.
        bounds: &'static [f64],
        /// Observations per bucket, not cumulative (as many as `bounds`).
        counts: Vec<u64>,
        /// The sum of the observations.
        sum: f64,
        /// Every observation, those above the last bound included.
        count: u64,
    },
}

/// One series of a family: its labels and its value.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// The labels, in the order written.
    pub labels: Vec<(&'static str, String)>,
    /// The value (a [`Value::Histogram`] in a histogram family, a number in the others).
    pub value: Value,
}

impl Series {
    /// A series of `labels` and `value`.
    pub fn new(labels: Vec<(&'static str, String)>, value: Value) -> Series {
        Series { labels, value }
    }
}

/// A family of series: its name, help, type and series.
#[derive(Clone, Debug, PartialEq)]
pub struct Family {
    /// The family's name, without the `_total` of a counter's or the `_info` of an info's
    /// samples.
    pub name: &'static str,
    /// One line of help.
    pub help: &'static str,
    /// The type.
    pub ty: Type,
    /// The series, in the order written.
    pub series: Vec<Series>,
}

/// `families` in `format`.
pub fn encode(families: &[Family], format: Format) -> String {
    let mut out = String::new();
    for f in families {
        // The name the metadata give: the family's in OpenMetrics, the samples' in the
        // classic format (which has no family name of its own).
        let (meta_name, ty) = match (format, f.ty) {
            (Format::Classic, Type::Counter) => (format!("{}_total", f.name), "counter"),
            (Format::Classic, Type::Info) => (format!("{}_info", f.name), "gauge"),
            (Format::OpenMetrics, Type::Counter) => (f.name.to_string(), "counter"),
            (Format::OpenMetrics, Type::Info) => (f.name.to_string(), "info"),
            (_, Type::Gauge) => (f.name.to_string(), "gauge"),
            (_, Type::Histogram) => (f.name.to_string(), "histogram"),
        };
        let _ = writeln!(out, "# HELP {meta_name} {}", escape_help(f.help, format));
        let _ = writeln!(out, "# TYPE {meta_name} {ty}");
        for s in &f.series {
            match (&s.value, f.ty) {
                (Value::Histogram { .. }, Type::Histogram) => histogram(&mut out, f, s, format),
                (v, Type::Counter) => sample(&mut out, f.name, "_total", &s.labels, None, v),
                (v, Type::Info) => sample(&mut out, f.name, "_info", &s.labels, None, v),
                (v, _) => sample(&mut out, f.name, "", &s.labels, None, v),
            }
        }
    }
    if format == Format::OpenMetrics {
        out.push_str("# EOF\n");
    }
    out
}

/// The lines of one histogram series: its cumulative buckets, `+Inf` last, its sum and
/// its count.
fn histogram(out: &mut String, f: &Family, s: &Series, format: Format) {
    let Value::Histogram {
        bounds,
        counts,
        sum,
        count,
    } = &s.value
    else {
        return;
    };
    let mut cumulative = 0;
    for (bound, n) in bounds.iter().zip(counts) {
        cumulative += n;
        let bucket = ("le", le(*bound, format));
        let c = Value::Int(cumulative);
        sample(out, f.name, "_bucket", &s.labels, Some(bucket), &c);
    }
    let inf = ("le", "+Inf".to_string());
    sample(
        out,
        f.name,
        "_bucket",
        &s.labels,
        Some(inf),
        &Value::Int(*count),
    );
    sample(out, f.name, "_sum", &s.labels, None, &Value::Float(*sum));
    sample(out, f.name, "_count", &s.labels, None, &Value::Int(*count));
}

/// One sample line: `name{labels} value`.
fn sample(
    out: &mut String,
    name: &str,
    suffix: &str,
    labels: &[(&'static str, String)],
    extra: Option<(&'static str, String)>,
    value: &Value,
) {
    out.push_str(name);
    out.push_str(suffix);
    let mut all = labels.iter().map(|(k, v)| (*k, v.as_str())).peekable();
    let extra = extra.as_ref().map(|(k, v)| (*k, v.as_str()));
    if all.peek().is_some() || extra.is_some() {
        out.push('{');
        for (i, (k, v)) in all.chain(extra).enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{k}=\"{}\"", escape_label(v));
        }
        out.push('}');
    }
    out.push(' ');
    match value {
        Value::Int(n) => {
            let _ = write!(out, "{n}");
        }
        Value::Float(x) => out.push_str(&number(*x)),
        // Not a sample value; `histogram` writes those.
        Value::Histogram { .. } => out.push_str("NaN"),
    }
    out.push('\n');
}

/// A number as both formats write it: `+Inf`, `-Inf`, `NaN`, or the shortest decimal
/// that reads back as the same `f64` (never an exponent).
fn number(x: f64) -> String {
    if x.is_nan() {
        "NaN".into()
    } else if x.is_infinite() {
        if x > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{x}")
    }
}

/// A bucket's bound as its `le` label: OpenMetrics writes a whole number as a float
/// (`1.0`), as its canonical numbers ask; the classic format as Prometheus' clients do
/// (`1`).
fn le(bound: f64, format: Format) -> String {
    let s = number(bound);
    if format == Format::OpenMetrics && bound.is_finite() && bound.fract() == 0.0 {
        format!("{s}.0")
    } else {
        s
    }
}

/// A label value with `\`, `"` and line feeds escaped (both formats).
fn escape_label(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// A help text with `\` and line feeds escaped, and `"` too in OpenMetrics.
fn escape_help(v: &str, format: Format) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '"' if format == Format::OpenMetrics => out.push_str("\\\""),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn families() -> Vec<Family> {
        vec![
            Family {
                name: "t_requests",
                help: "Requests \"answered\", a\\b\nc",
                ty: Type::Counter,
                series: vec![
                    Series::new(
                        vec![("op", "a\"b\\c\nd".into()), ("status", "200".into())],
                        Value::Int(3),
                    ),
                    Series::new(vec![("op", "x".into())], Value::Int(0)),
                ],
            },
            Family {
                name: "t_latency_seconds",
                help: "Latency",
                ty: Type::Histogram,
                series: vec![Series::new(
                    vec![("op", "a".into())],
                    Value::Histogram {
                        bounds: &[0.5, 1.0],
                        counts: vec![1, 2],
                        sum: 2.75,
                        count: 4,
                    },
                )],
            },
            Family {
                name: "t_bytes",
                help: "Bytes",
                ty: Type::Gauge,
                series: vec![Series::new(vec![], Value::Float(f64::INFINITY))],
            },
            Family {
                name: "t_build",
                help: "Build",
                ty: Type::Info,
                series: vec![Series::new(
                    vec![("version", "1.2.3".into())],
                    Value::Int(1),
                )],
            },
        ]
    }

    #[test]
    fn classic_names_the_series_and_has_no_eof() {
        assert_eq!(
            encode(&families(), Format::Classic),
            "# HELP t_requests_total Requests \"answered\", a\\\\b\\nc\n\
             # TYPE t_requests_total counter\n\
             t_requests_total{op=\"a\\\"b\\\\c\\nd\",status=\"200\"} 3\n\
             t_requests_total{op=\"x\"} 0\n\
             # HELP t_latency_seconds Latency\n\
             # TYPE t_latency_seconds histogram\n\
             t_latency_seconds_bucket{op=\"a\",le=\"0.5\"} 1\n\
             t_latency_seconds_bucket{op=\"a\",le=\"1\"} 3\n\
             t_latency_seconds_bucket{op=\"a\",le=\"+Inf\"} 4\n\
             t_latency_seconds_sum{op=\"a\"} 2.75\n\
             t_latency_seconds_count{op=\"a\"} 4\n\
             # HELP t_bytes Bytes\n\
             # TYPE t_bytes gauge\n\
             t_bytes +Inf\n\
             # HELP t_build_info Build\n\
             # TYPE t_build_info gauge\n\
             t_build_info{version=\"1.2.3\"} 1\n"
        );
    }

    #[test]
    fn open_metrics_names_the_family_and_ends_with_eof() {
        assert_eq!(
            encode(&families(), Format::OpenMetrics),
            "# HELP t_requests Requests \\\"answered\\\", a\\\\b\\nc\n\
             # TYPE t_requests counter\n\
             t_requests_total{op=\"a\\\"b\\\\c\\nd\",status=\"200\"} 3\n\
             t_requests_total{op=\"x\"} 0\n\
             # HELP t_latency_seconds Latency\n\
             # TYPE t_latency_seconds histogram\n\
             t_latency_seconds_bucket{op=\"a\",le=\"0.5\"} 1\n\
             t_latency_seconds_bucket{op=\"a\",le=\"1.0\"} 3\n\
             t_latency_seconds_bucket{op=\"a\",le=\"+Inf\"} 4\n\
             t_latency_seconds_sum{op=\"a\"} 2.75\n\
             t_latency_seconds_count{op=\"a\"} 4\n\
             # HELP t_bytes Bytes\n\
             # TYPE t_bytes gauge\n\
             t_bytes +Inf\n\
             # HELP t_build Build\n\
             # TYPE t_build info\n\
             t_build_info{version=\"1.2.3\"} 1\n\
             # EOF\n"
        );
    }

    #[test]
    fn numbers() {
        assert_eq!(number(0.0001), "0.0001");
        assert_eq!(number(13.1072), "13.1072");
        assert_eq!(number(1e21), "1000000000000000000000");
        assert_eq!(number(f64::NEG_INFINITY), "-Inf");
        assert_eq!(number(f64::NAN), "NaN");
        assert_eq!(le(2.0, Format::Classic), "2");
        assert_eq!(le(2.0, Format::OpenMetrics), "2.0");
        assert_eq!(le(0.25, Format::OpenMetrics), "0.25");
    }

    #[test]
    fn negotiation() {
        use Format::{Classic, OpenMetrics};
        let cases: &[(Option<&str>, Format)] = &[
            (None, Classic),
            (Some(""), Classic),
            (Some("*/*"), Classic),
            (Some("text/plain"), Classic),
            (Some("application/json"), Classic),
            (Some("application/openmetrics-text"), OpenMetrics),
            (
                Some("Application/OpenMetrics-Text; Version=1.0.0"),
                OpenMetrics,
            ),
            (
                Some("application/openmetrics-text; version=\"0.0.1\""),
                OpenMetrics,
            ),
            // A version we do not write.
            (Some("application/openmetrics-text; version=2.0.0"), Classic),
            // q=0: "not acceptable".
            (Some("application/openmetrics-text;q=0"), Classic),
            (
                Some("application/openmetrics-text;q=0.000, text/plain"),
                Classic,
            ),
            (
                Some("application/openmetrics-text;q=0.4, text/plain;q=0.5"),
                Classic,
            ),
            (
                Some("application/openmetrics-text;q=0.5, */*;q=0.5"),
                OpenMetrics,
            ),
            (
                Some("text/plain;q=0.2, application/openmetrics-text;q=0.3"),
                OpenMetrics,
            ),
            // An unreadable q-value counts for nothing.
            (
                Some("application/openmetrics-text;q=high, text/plain;q=0.1"),
                Classic,
            ),
            (Some("application/openmetrics-text;q=2"), Classic),
            // Prometheus 2's default scrape header.
            (
                Some(
                    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;\
                     version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
                ),
                OpenMetrics,
            ),
            // Prometheus with `scrape_protocols: [PrometheusText0.0.4]`.
            (Some("text/plain;version=0.0.4"), Classic),
        ];
        for (accept, want) in cases {
            assert_eq!(Format::negotiate(*accept), *want, "{accept:?}");
        }
        assert_eq!(
            Classic.content_type(),
            "text/plain; version=0.0.4; charset=utf-8"
        );
        assert_eq!(
            OpenMetrics.content_type(),
            "application/openmetrics-text; version=1.0.0; charset=utf-8"
        );
    }
}
