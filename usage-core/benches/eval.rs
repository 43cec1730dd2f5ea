//! Benchmark of the columnar evaluator on the six queries of `shared/bench/QUERIES.md`.
//!
//! Run through `bench/run.sh`, which also runs DuckDB on the same rows and prints the
//! comparison. Two commands (cargo appends `--bench`, which is ignored):
//!
//! - `gen --rows N --csv PATH`: writes deterministic synthetic autocomplete records: 2,000
//!   users with heavy-tailed activity (Pareto weights) and their own time zone, 120 days,
//!   busier weekdays and local working hours, 30 languages, 8 IDEs, 40 dotted versions
//!   released over time; one row per (user, hour, language, ide, version) with usage,
//!   in time order, exactly as many as asked.
//! - `run --csv PATH --runs R --out PATH`: loads the CSV through `TeamData::apply`, then runs
//!   each query `R` times as a JSON request decoded, validated and answered by
//!   `TeamData::analytics` (the server's code path), and writes load time, memory,
//!   medians and the answers (columns in the SQL's order) as JSON.
//! - `jsonl --csv PATH --out PATH`: rewrites the CSV as JSONL records of the contract's load
//!   format (section 8: `hour` as RFC 3339 UTC, counts as numbers), what `usage-server
//!   import --kind autocomplete` reads (`bench/embedded.sh`).
//! - `queries --first-day YYYY-MM-DD`: prints the six queries, one JSON line each:
//!   `{"name", "body", "columns"}`, the request body (service key not included) and the
//!   aliases in the SQL's column order (`bench/embedded.sh` sends them over HTTP).

use std::alloc::{GlobalAlloc, Layout, System};
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use serde_json::json;
use usage_core::eval::TeamData;
use usage_core::plan::Limits;
use usage_core::time::Date;

mod common;
use common::{load, median, plan_of, queries};

/// Counts the bytes allocated and not yet freed.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size(), Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size(), Ordering::Relaxed);
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new, Ordering::Relaxed);
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Resident memory of this process in bytes (Linux), else 0.
fn rss() -> usize {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<usize>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// The data's generator: deterministic, so every run writes the same rows.
type Rng = usage_core::rng::SplitMix64;

const USERS: usize = 2_000;
const DAYS: i64 = 120;
/// The first day, a Monday.
const FIRST_DAY: &str = "2025-01-06";
const LANGUAGES: [&str; 30] = [
    "PYTHON",
    "TYPESCRIPT",
    "JAVA",
    "GO",
    "JAVASCRIPT",
    "RUST",
    "CPP",
    "CSHARP",
    "KOTLIN",
    "C",
    "RUBY",
    "PHP",
    "SWIFT",
    "SCALA",
    "SQL",
    "SHELL",
    "HTML",
    "CSS",
    "DART",
    "LUA",
    "R",
    "JULIA",
    "HASKELL",
    "ELIXIR",
    "ERLANG",
    "CLOJURE",
    "PERL",
    "YAML",
    "JSON",
    "MARKDOWN",
];
const IDES: [&str; 8] = [
    "vscode",
    "jetbrains",
    "neovim",
    "visual_studio",
    "emacs",
    "xcode",
    "eclipse",
    "sublime",
];
/// Time zones of users (hours from UTC), so that working hours spread over the UTC day.
const ZONES: [i64; 8] = [-8, -7, -5, -5, 0, 1, 1, 8];

/// Versions `1.6.0` … `1.13.4`, in release order: one every three days.
fn versions() -> Vec<String> {
    (6..14)
        .flat_map(|minor| (0..5).map(move |patch| format!("1.{minor}.{patch}")))
        .collect()
}

struct User {
    key: String,
    weight: f64,
    zone: i64,
    langs: Vec<usize>,
    ides: Vec<usize>,
    lag: i64,
    /// Noise of each (day, hour): drawn identically in both passes.
    noise: Rng,
    /// Everything else.
    rng: Rng,
}

fn users() -> Vec<User> {
    let mut rng = Rng::new(42);
    (0..USERS)
        .map(|i| {
            let key = format!("{:016x}{:016x}", rng.next_u64(), rng.next_u64());
            // Pareto(alpha 1.2) activity, capped: a few users do most of the work.
            let weight = (1.0 - rng.unit()).powf(-1.0 / 1.2).min(60.0);
            // Languages: a Zipf-like pick, the first ones far more common.
            let n_langs = 1 + (rng.unit() * rng.unit() * 6.0) as usize;
            let mut langs = Vec::new();
            while langs.len() < n_langs {
                let l = ((rng.unit().powi(3)) * LANGUAGES.len() as f64) as usize;
                if !langs.contains(&l) {
                    langs.push(l);
                }
            }
            let mut ides = vec![[0, 0, 0, 1, 1, 2, 3, 4, 5, 6, 7][rng.below(11) as usize]];
            if rng.below(4) == 0 {
                let second = rng.below(IDES.len() as u64) as usize;
                if !ides.contains(&second) {
                    ides.push(second);
                }
            }
            User {
                key,
                weight,
                zone: ZONES[rng.below(ZONES.len() as u64) as usize],
                langs,
                ides,
                lag: rng.below(7) as i64,
                noise: Rng::new(1000 + i as u64),
                rng: Rng::new(5000 + i as u64),
            }
        })
        .collect()
}

/// How busy a UTC (day, hour) is for a user in time zone `zone`.
fn activity(day: i64, hour: i64, zone: i64) -> f64 {
    let local = day * 24 + hour + zone;
    let (ld, lh) = (local.div_euclid(24), local.rem_euclid(24));
    let weekday = if ld.rem_euclid(7) < 5 { 1.0 } else { 0.12 };
    let hours = match lh {
        9..=17 => 1.0,
        8 | 18..=20 => 0.35,
        _ => 0.03,
    };
    weekday * hours
}

fn generate(rows: u64, csv: &str) -> std::io::Result<()> {
    let versions = versions();
    let d0 = Date::parse(FIRST_DAY).expect("date");
    let mut users = users();
    // Pass 1: the total expected activity, to scale it to `rows`.
    let mut total = 0.0;
    for u in &mut users {
        let mut noise = u.noise.clone();
        for day in 0..DAYS {
            for hour in 0..24 {
                total += u.weight * activity(day, hour, u.zone) * (0.5 + noise.unit());
            }
        }
    }
    // Half a row over, so that float rounding cannot leave the last row out.
    let scale = (rows as f64 + 0.5) / total;
    let mut out = BufWriter::with_capacity(1 << 20, File::create(csv)?);
    writeln!(
        out,
        "api_key,hour,language,ide,version,num_acceptances,num_lines_accepted,num_bytes_accepted"
    )?;
    let (mut target, mut written) = (0.0f64, 0u64);
    let mut combos: Vec<(usize, usize, usize)> = Vec::new();
    for day in 0..DAYS {
        let date = Date(d0.0 + day as i32).to_iso();
        // One version released every three days; users upgrade with a lag.
        let released = (day / 3).min(versions.len() as i64 - 1);
        for hour in 0..24 {
            for u in &mut users {
                let lambda =
                    scale * u.weight * activity(day, hour, u.zone) * (0.5 + u.noise.unit());
                target += lambda;
                let want = (target as u64).min(rows) - written;
                if want == 0 {
                    continue;
                }
                let current = (released - u.lag).max(0) as usize;
                combos.clear();
                for &l in &u.langs {
                    for &i in &u.ides {
                        combos.push((l, i, current));
                        if current > 0 && u.rng.below(3) == 0 {
                            combos.push((l, i, current - 1));
                        }
                    }
                }
                // Short of combinations: the rest carries over to later cells.
                let k = (want as usize).min(combos.len());
                for j in 0..k {
                    let pick = j + u.rng.below((combos.len() - j) as u64) as usize;
                    combos.swap(j, pick);
                    let (l, i, v) = combos[j];
                    let acc = 1 + (u.rng.unit().ln() / 0.65f64.ln()) as u64;
                    let lines = acc * (1 + u.rng.below(4));
                    let bytes = lines * (12 + u.rng.below(60));
                    writeln!(
                        out,
                        "{},{date} {hour:02}:00:00,{},{},{},{acc},{lines},{bytes}",
                        u.key, LANGUAGES[l], IDES[i], versions[v]
                    )?;
                }
                written += k as u64;
            }
        }
    }
    out.flush()?;
    eprintln!("wrote {written} rows to {csv}");
    Ok(())
}

fn run(csv: &str, runs: usize, out: &str) -> std::io::Result<()> {
    let (rss0, heap0) = (rss(), LIVE.load(Ordering::Relaxed));
    let mut team = TeamData::new();
    let start = Instant::now();
    let (rows, d0) = load(csv, &mut team)?;
    let load_s = start.elapsed().as_secs_f64();
    let (rss1, heap1) = (rss(), LIVE.load(Ordering::Relaxed));
    eprintln!("loaded {rows} rows in {load_s:.2} s");
    let mut results = serde_json::Map::new();
    for (name, body, columns) in queries(d0) {
        let plan = plan_of(&body);
        let mut times = Vec::with_capacity(runs);
        let mut answer = None;
        for _ in 0..runs {
            let t = Instant::now();
            let r = team
                .analytics(&plan, &Limits::default())
                .expect("an answer");
            times.push(t.elapsed().as_secs_f64());
            answer = Some(r);
        }
        let answer = answer.expect("at least one run");
        let rows: Vec<Vec<&str>> = answer.query_results[0]
            .response_items
            .iter()
            .map(|i| {
                columns
                    .iter()
                    .map(|c| i.item.get(c).unwrap_or(""))
                    .collect()
            })
            .collect();
        let med = median(&mut times);
        eprintln!("{name}: {:.4} s ({} rows)", med, rows.len());
        results.insert(
            name.to_string(),
            json!({"median_s": med, "runs_s": times, "rows": rows}),
        );
    }
    let report = json!({
        "engine": "usage-core",
        "rows": rows,
        "first_day": d0.to_iso(),
        "load_s": load_s,
        "rss_bytes": rss1.saturating_sub(rss0),
        "heap_bytes": heap1.saturating_sub(heap0),
        "table_heap_bytes": team.usage_heap_bytes(),
        "queries": results,
    });
    std::fs::write(out, serde_json::to_string_pretty(&report).expect("JSON"))?;
    Ok(())
}

/// The CSV as JSONL load records. Byte-level: the CSV's fields are plain (hex keys,
/// identifiers, dotted versions, digits), checked here rather than escaped.
fn to_jsonl(csv: &str, out: &str) -> std::io::Result<()> {
    let mut reader = BufReader::with_capacity(1 << 20, File::open(csv)?);
    let mut out = BufWriter::with_capacity(1 << 20, File::create(out)?);
    let (mut line, mut n) = (String::new(), 0u64);
    reader.read_line(&mut line)?;
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            break;
        }
        let bad = || std::io::Error::other(format!("bad line: {line}"));
        let mut f = [""; 8];
        let mut parts = line.trim_end().split(',');
        for x in &mut f {
            *x = parts.next().ok_or_else(bad)?;
        }
        let plain = |s: &str| {
            s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        };
        let hour = f[1].as_bytes();
        if !f.iter().enumerate().all(|(i, s)| i == 1 || plain(s))
            || hour.len() != 19
            || hour[10] != b' '
        {
            return Err(bad());
        }
        writeln!(
            out,
            "{{\"api_key\":\"{}\",\"hour\":\"{}T{}Z\",\"language\":\"{}\",\"ide\":\"{}\",\"version\":\"{}\",\"num_acceptances\":{},\"num_lines_accepted\":{},\"num_bytes_accepted\":{}}}",
            f[0],
            &f[1][..10],
            &f[1][11..],
            f[2],
            f[3],
            f[4],
            f[5],
            f[6],
            f[7]
        )?;
        n += 1;
    }
    out.flush()?;
    eprintln!("wrote {n} records");
    Ok(())
}

/// The six queries as JSON lines: name, request body, columns.
fn print_queries(first_day: &str) -> std::io::Result<()> {
    let d0 = Date::parse(first_day)
        .ok_or_else(|| std::io::Error::other(format!("bad first day {first_day}")))?;
    let mut out = std::io::stdout().lock();
    for (name, body, columns) in queries(d0) {
        writeln!(
            out,
            "{}",
            json!({"name": name, "body": body, "columns": columns})
        )?;
    }
    Ok(())
}

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let usage = "usage: eval gen --rows N --csv PATH | eval run --csv PATH [--runs R] --out PATH \
                 | eval jsonl --csv PATH --out PATH | eval queries --first-day YYYY-MM-DD";
    match args.first().map(String::as_str) {
        Some("gen") => {
            let rows = flag("--rows").and_then(|r| r.parse().ok()).expect(usage);
            generate(rows, &flag("--csv").expect(usage))
        }
        Some("run") => {
            let runs = flag("--runs").and_then(|r| r.parse().ok()).unwrap_or(5);
            run(
                &flag("--csv").expect(usage),
                runs,
                &flag("--out").expect(usage),
            )
        }
        Some("jsonl") => to_jsonl(&flag("--csv").expect(usage), &flag("--out").expect(usage)),
        Some("queries") => print_queries(&flag("--first-day").expect(usage)),
        _ => {
            eprintln!("{usage}");
            Ok(())
        }
    }
}
