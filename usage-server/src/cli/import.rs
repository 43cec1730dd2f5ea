//! `import`: streaming JSONL, all-or-nothing (contract section 8).
//!
//! Lines are parsed in chunks on parser threads and handed to the store as a stream in
//! file order, so a file of any size never sits in memory; the store takes them into a
//! segment and writes it in one transaction, or nothing when a line is bad. The first 20
//! bad records are reported.

use std::io::{BufRead, BufReader};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{Value, json};
use usage_core::JsonPath;
use usage_core::load::{FieldValue, Record, parse_record, parse_record_text};
use usage_core::schema::records::{self, RecordKind, kind_names};
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
    /// Of a `users` import: each group id the records name, with the memberships naming
    /// it, in the order first named (at most [`MAX_GROUP_IDS`] ids).
    groups: Vec<(String, u64)>,
    group_index: std::collections::HashMap<String, usize>,
    /// Memberships naming an id past [`MAX_GROUP_IDS`] (not checked).
    unchecked: u64,
}

/// Group ids a `users` import keeps to check against the team's groups.
const MAX_GROUP_IDS: usize = 100_000;

/// Group ids named in the summary of memberships of unknown groups.
const GROUP_EXAMPLES: usize = 5;

impl Report {
    /// Counts a `users` record's memberships.
    fn memberships(&mut self, r: &Record) {
        let FieldValue::Groups(ids) = r.get(records::users::GROUPS.name()) else {
            return;
        };
        for id in ids {
            match self.group_index.get(id) {
                Some(&i) => self.groups[i].1 += 1,
                None if self.groups.len() < MAX_GROUP_IDS => {
                    self.group_index.insert(id.clone(), self.groups.len());
                    self.groups.push((id.clone(), 1));
                }
                None => self.unchecked += 1,
            }
        }
    }
}

/// Lines handed to the parsers: the first line's number and the lines.
struct Chunk {
    first: u64,
    lines: Vec<String>,
}

/// A bad record's violations: field, rule, message.
type Bad = Vec<(String, &'static str, String)>;

/// A chunk parsed: per line, its number and the record or the violations (blank lines
/// are left out).
type Parsed = Vec<(u64, Result<Record, Bad>)>;

/// Lines per chunk: large enough that the hand-offs cost nothing, small enough that the
/// chunks in flight take a few MB.
const CHUNK_LINES: usize = 4096;

/// Parses one line of JSONL into a record of `kind`.
fn parse_line(
    kind: &'static RecordKind,
    line: &str,
) -> Result<Record, Vec<(String, &'static str, String)>> {
    let violations = |v: Vec<usage_core::Violation>| {
        v.iter()
            .map(|v| (v.path(), v.rule().as_str(), v.message().to_string()))
            .collect()
    };
    if let Some(r) = parse_record_text(kind, line, &JsonPath::root()) {
        return r.map_err(violations);
    }
    let value: Value = usage_core::wire::decode::parse_json(line.as_bytes()).map_err(|e| {
        vec![(
            String::new(),
            "malformed_json",
            format!("the line is not JSON: {e}"),
        )]
    })?;
    parse_record(kind, &value, &JsonPath::root()).map_err(violations)
}

/// The records of a JSONL file, in file order: one thread reads lines in chunks, the
/// parsers (one per core) turn chunks into records, and the iterator, on the store's
/// thread, puts the chunks back in order and hands the records on. Parsing, the bulk of
/// an import's work, so runs beside the store's columns being filled.
struct Lines {
    parsed: std::sync::mpsc::Receiver<(u64, Result<Parsed, String>)>,
    /// Chunks parsed ahead of their turn, by chunk number.
    ahead: std::collections::BTreeMap<u64, Result<Parsed, String>>,
    next_chunk: u64,
    current: std::vec::IntoIter<(u64, Result<Record, Bad>)>,
    /// One token per chunk that may be read ahead of the store: it goes back to the
    /// reader when the store has taken the chunk, so the chunks in flight stay bounded
    /// however the threads are scheduled.
    tokens: std::sync::mpsc::SyncSender<()>,
    report: Arc<Mutex<Report>>,
    bar: ProgressBar,
    done: bool,
    /// The kind read (a `users` file's memberships are counted in the report).
    kind: &'static RecordKind,
}

impl Lines {
    fn start(
        mut reader: Box<dyn BufRead + Send>,
        kind: &'static RecordKind,
        report: Arc<Mutex<Report>>,
        bar: ProgressBar,
    ) -> Lines {
        use std::sync::mpsc::{channel, sync_channel};
        let parsers = std::thread::available_parallelism().map_or(1, |n| n.get().clamp(1, 4));
        let (work_tx, work_rx) = sync_channel::<(u64, Result<Chunk, String>)>(2 * parsers);
        let work_rx = Arc::new(Mutex::new(work_rx));
        let (parsed_tx, parsed_rx) = channel();
        let in_flight = 4 * parsers;
        let (tokens, tokens_rx) = sync_channel::<()>(in_flight);
        for _ in 0..in_flight {
            let _ = tokens.send(());
        }
        std::thread::spawn(move || {
            let (mut n, mut line_no) = (0u64, 0u64);
            loop {
                if tokens_rx.recv().is_err() {
                    return;
                }
                let mut lines = Vec::with_capacity(CHUNK_LINES);
                let first = line_no + 1;
                let mut failed = None;
                while lines.len() < CHUNK_LINES {
                    let mut buf = String::new();
                    match reader.read_line(&mut buf) {
                        Ok(0) => break,
                        Ok(_) => {
                            line_no += 1;
                            lines.push(buf);
                        }
                        Err(e) => {
                            failed = Some(format!("reading line {}: {e}", line_no + 1));
                            break;
                        }
                    }
                }
                let end = lines.len() < CHUNK_LINES;
                if !lines.is_empty() {
                    if work_tx.send((n, Ok(Chunk { first, lines }))).is_err() {
                        return;
                    }
                    n += 1;
                }
                if let Some(e) = failed {
                    let _ = work_tx.send((n, Err(e)));
                    return;
                }
                if end {
                    return;
                }
            }
        });
        for _ in 0..parsers {
            let (work_rx, parsed_tx) = (work_rx.clone(), parsed_tx.clone());
            std::thread::spawn(move || {
                loop {
                    let job = work_rx.lock().unwrap_or_else(|e| e.into_inner()).recv();
                    let Ok((n, chunk)) = job else { return };
                    let parsed = chunk.map(|c| {
                        c.lines
                            .iter()
                            .enumerate()
                            .filter(|(_, l)| !l.trim().is_empty())
                            .map(|(i, l)| (c.first + i as u64, parse_line(kind, l.trim())))
                            .collect()
                    });
                    if parsed_tx.send((n, parsed)).is_err() {
                        return;
                    }
                }
            });
        }
        Lines {
            parsed: parsed_rx,
            ahead: std::collections::BTreeMap::new(),
            next_chunk: 0,
            current: Vec::new().into_iter(),
            tokens,
            report,
            bar,
            done: false,
            kind,
        }
    }

    fn bad(&mut self, line_no: u64, violations: Bad) {
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
                .push(format!("line {line_no}: {field}: {rule}: {msg}"));
        }
    }

    /// The next chunk in file order; `None` at the end of the file.
    fn next_chunk(&mut self) -> Option<Result<Parsed, String>> {
        loop {
            if let Some(c) = self.ahead.remove(&self.next_chunk) {
                self.next_chunk += 1;
                let _ = self.tokens.try_send(());
                return Some(c);
            }
            // All senders gone and nothing ahead: the file is read.
            let (n, c) = self.parsed.recv().ok()?;
            self.ahead.insert(n, c);
        }
    }
}

impl Iterator for Lines {
    type Item = Result<Record, ()>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some((line_no, r)) = self.current.next() {
                if let Ok(r) = &r
                    && std::ptr::eq(self.kind, &records::USERS)
                {
                    self.report
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .memberships(r);
                }
                return Some(r.map_err(|v| self.bad(line_no, v)));
            }
            if self.done {
                return None;
            }
            match self.next_chunk() {
                None => {
                    self.done = true;
                    self.bar.finish_and_clear();
                    return None;
                }
                Some(Err(e)) => {
                    self.done = true;
                    self.report
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .io_error = Some(e);
                    return Some(Err(()));
                }
                Some(Ok(parsed)) => {
                    if let Some((last, _)) = parsed.last() {
                        self.bar.set_position(*last);
                        self.report.lock().unwrap_or_else(|e| e.into_inner()).lines = *last;
                    }
                    self.current = parsed.into_iter();
                }
            }
        }
    }
}

/// The memberships of an imported `users` file that name groups the team lacks:
/// `{"memberships": N, "groups": G, "examples": [first ids in file order]}`, and
/// `unchecked`: the memberships of ids past [`MAX_GROUP_IDS`], when there are any.
async fn unknown_groups(store: &dyn Store, team: &str, r: &Report) -> Result<Value, Failure> {
    let (mut memberships, mut groups, mut examples) = (0u64, 0u64, Vec::new());
    for (id, n) in &r.groups {
        if !store.has_group_id(team, id).await? {
            memberships += n;
            groups += 1;
            if examples.len() < GROUP_EXAMPLES {
                examples.push(id.clone());
            }
        }
    }
    let mut v = json!({"memberships": memberships, "groups": groups, "examples": examples});
    if r.unchecked > 0 {
        v["unchecked"] = json!(r.unchecked);
    }
    Ok(v)
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
    let lines = Lines::start(reader, kind, report.clone(), bar);
    let started = Instant::now();
    let written = store
        .import(&args.team, kind, Box::new(lines), Timestamp::now())
        .await?;
    let r = std::mem::take(&mut *report.lock().unwrap_or_else(|e| e.into_inner()));
    match written {
        Some(n) => {
            let secs = started.elapsed().as_secs_f64();
            eprintln!(
                "imported {n} {} records in {secs:.1} s ({:.0} records/s)",
                kind.name,
                n as f64 / secs.max(1e-9)
            );
            let mut summary = json!({"kind": kind.name, "records": n});
            if std::ptr::eq(kind, &records::USERS) {
                // Only when there is something to report: a clean import answers the
                // contract's `{"kind", "records"}` exactly (section 10).
                let unknown = unknown_groups(store, &args.team, &r).await?;
                if unknown["memberships"].as_u64() != Some(0) {
                    eprintln!(
                        "{} memberships name groups team {} does not have (e.g. {}): they count once the groups are imported",
                        unknown["memberships"], args.team, unknown["examples"]
                    );
                    summary["unknown_groups"] = unknown;
                } else if unknown.get("unchecked").is_some() {
                    summary["unknown_groups"] = unknown;
                }
            }
            Ok(summary)
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
