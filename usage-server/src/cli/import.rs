//! `import`: streaming JSONL, all-or-nothing (contract section 8).
//!
//! Lines are parsed one at a time and handed to the store as a stream, so a file of any
//! size never sits in memory; the store writes them in one transaction and rolls it back
//! when a line is bad. The first 20 bad records are reported.

use std::io::{BufRead, BufReader};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{Value, json};
use usage_core::JsonPath;
use usage_core::load::{Record, parse_record};
use usage_core::schema::records::{RecordKind, kind_names};
use usage_core::time::Timestamp;

use super::{Failure, ImportArgs};
use crate::store::Store;

/// At most this many violation lines follow the summary (contract section 8).
const MAX_LINES: usize = 20;

/// What went wrong while reading, shared between the reader and the command.
#[derive(Debug, Default)]
struct Report {
    lines: u64,
    bad: u64,
    messages: Vec<String>,
    io_error: Option<String>,
}

struct Lines {
    reader: Box<dyn BufRead + Send>,
    kind: &'static RecordKind,
    line_no: u64,
    buf: String,
    report: Arc<Mutex<Report>>,
    bar: ProgressBar,
    done: bool,
}

impl Lines {
    fn bad(&mut self, violations: Vec<(String, &'static str, String)>) {
        let mut r = self.report.lock().unwrap_or_else(|e| e.into_inner());
        r.bad += 1;
        for (field, rule, msg) in violations {
            if r.messages.len() == MAX_LINES {
                break;
            }
            let field = if field.is_empty() {
                "(record)".to_string()
            } else {
                field
            };
            r.messages
                .push(format!("line {}: {field}: {rule}: {msg}", self.line_no));
        }
    }
}

impl Iterator for Lines {
    type Item = Result<Record, ()>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.done {
                return None;
            }
            self.buf.clear();
            match self.reader.read_line(&mut self.buf) {
                Ok(0) => {
                    self.done = true;
                    self.bar.finish_and_clear();
                    return None;
                }
                Ok(_) => {}
                Err(e) => {
                    self.done = true;
                    let mut r = self.report.lock().unwrap_or_else(|e| e.into_inner());
                    r.io_error = Some(format!("reading line {}: {e}", self.line_no + 1));
                    return Some(Err(()));
                }
            }
            self.line_no += 1;
            if self.line_no.is_multiple_of(4096) {
                self.bar.set_position(self.line_no);
                self.report.lock().unwrap_or_else(|e| e.into_inner()).lines = self.line_no;
            }
            let line = self.buf.trim();
            if line.is_empty() {
                continue;
            }
            let value: Value = match serde_json::from_str(line) {
                Ok(v) => v,
                Err(e) => {
                    self.bad(vec![(
                        String::new(),
                        "malformed_json",
                        format!("the line is not JSON: {e}"),
                    )]);
                    return Some(Err(()));
                }
            };
            return Some(match parse_record(self.kind, &value, &JsonPath::root()) {
                Ok(r) => Ok(r),
                Err(v) => {
                    self.bad(
                        v.iter()
                            .map(|v| (v.path(), v.rule().as_str(), v.message().to_string()))
                            .collect(),
                    );
                    Err(())
                }
            });
        }
    }
}

pub(super) async fn run(store: &dyn Store, args: ImportArgs) -> Result<Value, Failure> {
    let kind = RecordKind::by_name(&args.kind).ok_or_else(|| {
        format!(
            "unknown record kind `{}` (allowed: {})",
            args.kind,
            kind_names().join(", ")
        )
    })?;
    store.billing(&args.team).await?;
    let reader: Box<dyn BufRead + Send> = if args.file == "-" {
        Box::new(BufReader::with_capacity(1 << 20, std::io::stdin()))
    } else {
        let f = std::fs::File::open(&args.file)
            .map_err(|e| format!("cannot open {}: {e}", args.file))?;
        Box::new(BufReader::with_capacity(1 << 20, f))
    };
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{spinner} {pos} lines read, {per_sec} ({elapsed})")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    let report = Arc::new(Mutex::new(Report::default()));
    let lines = Lines {
        reader,
        kind,
        line_no: 0,
        buf: String::new(),
        report: report.clone(),
        bar,
        done: false,
    };
    let started = Instant::now();
    let written = store
        .import(&args.team, kind, Box::new(lines), Timestamp::now())
        .await?;
    let r = report.lock().unwrap_or_else(|e| e.into_inner());
    match written {
        Some(n) => {
            let secs = started.elapsed().as_secs_f64();
            eprintln!(
                "imported {n} {} records in {secs:.1} s ({:.0} records/s)",
                kind.name,
                n as f64 / secs.max(1e-9)
            );
            Ok(json!({"kind": kind.name, "records": n}))
        }
        None => {
            let summary = match &r.io_error {
                Some(e) => format!("import failed: {e}; nothing was imported"),
                None => format!(
                    "import failed: {} bad {} record(s) in {}; nothing was imported",
                    r.bad, kind.name, args.file
                ),
            };
            Err(Failure {
                summary,
                lines: r.messages.clone(),
                ..Failure::default()
            })
        }
    }
}
