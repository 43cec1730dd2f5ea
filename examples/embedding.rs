//! Embedding the engine: load records into `usage_core::eval::TeamData`, run a query, print
//! a table. No server, no I/O beyond printing.
//!
//! ```sh
//! cargo run --example embedding
//! ```

use serde_json::json;
use usage::core::eval::TeamData;
use usage::core::load::ingest;
use usage::core::plan::Limits;
use usage::core::time::Timestamp;
use usage::core::validate;
use usage::core::wire::decode::decode;
use usage::core::wire::{AnalyticsRequest, IngestRequest};

fn load(team: &mut TeamData, kind: &str, records: Vec<serde_json::Value>) -> Result<(), String> {
    let req = IngestRequest {
        service_key: None,
        kind: Some(kind.into()),
        records,
    };
    let show = |v: usage::core::Violations| {
        v.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    };
    let batch = ingest(&req, &Limits::default()).map_err(show)?;
    let batch = team.prepare(&batch, Timestamp::now()).map_err(show)?;
    team.apply(&batch);
    Ok(())
}

fn main() -> Result<(), String> {
    let mut team = TeamData::new();
    load(
        &mut team,
        "groups",
        vec![json!({"group_id": "g-eng", "group_name": "engineering"})],
    )?;
    load(
        &mut team,
        "users",
        vec![
            json!({"email": "ada@example.com", "name": "Ada", "api_key": "key-ada", "groups": ["g-eng"]}),
            json!({"email": "bo@example.com", "name": "Bo", "api_key": "key-bo"}),
        ],
    )?;
    let mut records = Vec::new();
    for (i, (key, lang)) in [
        ("key-ada", "RUST"),
        ("key-ada", "PYTHON"),
        ("key-bo", "PYTHON"),
        ("key-bo", "GO"),
    ]
    .iter()
    .enumerate()
    {
        for day in 1..=3 {
            records.push(json!({
                "api_key": key, "hour": format!("2025-05-0{day}T1{i}:00:00Z"), "language": lang,
                "ide": "vscode", "version": "1.10.0",
                "num_acceptances": 3 * day + i as i64, "num_lines_accepted": 5 * day, "num_bytes_accepted": 80 * day
            }));
        }
    }
    load(&mut team, "autocomplete", records)?;

    // The request exactly as a client would send it.
    let body = json!({"query_requests": [{
        "data_source": "QUERY_DATA_SOURCE_USER_DATA",
        "selections": [
            {"field": "num_acceptances", "aggregation_function": "QUERY_AGGREGATION_SUM", "name": "accepted"},
            {"field": "num_lines_accepted", "aggregation_function": "QUERY_AGGREGATION_AVG", "name": "avg_lines"},
            {"field": "distinct_users"}
        ],
        "aggregations": [{"field": "language", "name": "language"}]
    }]});
    let decoded =
        decode::<AnalyticsRequest>(body.to_string().as_bytes()).map_err(|e| e.to_string())?;
    let plan = validate::with_decoded(&decoded, |r, _| validate::analytics(r, &Limits::default()))
        .map_err(|v| {
            v.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n")
        })?;
    let answer = team
        .analytics(&plan, &Limits::default())
        .map_err(|e| e.to_string())?;

    println!(
        "{:<10} {:>9} {:>10} {:>6}",
        "language", "accepted", "avg_lines", "users"
    );
    for item in &answer.query_results[0].response_items {
        let get = |k: &str| item.item.get(k).unwrap_or("-");
        println!(
            "{:<10} {:>9} {:>10} {:>6}",
            get("language"),
            get("accepted"),
            get("avg_lines"),
            get("distinct_users")
        );
    }
    Ok(())
}

#[cfg(test)]
#[test]
fn example_runs() {
    main().unwrap();
}
