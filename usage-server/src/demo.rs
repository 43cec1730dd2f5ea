//! The demo team of `serve --demo`: deterministic data (a seeded PRNG) for 240 users in
//! six groups, 90 days of every record kind ending today, an enterprise plan, a billing
//! cycle around today, and caps at every scope with users past 80 % and 100 % of theirs.

use std::net::SocketAddr;

use usage_core::load::{Batch, FieldValue, Record};
use usage_core::schema::Plan;
use usage_core::schema::records::{self, FieldHandle, RecordKind};
use usage_core::time::{Date, MICROS_PER_HOUR, MICROS_PER_SECOND, Timestamp};

use crate::store::{DEMO_ACTOR, NewTeam, Store, StoreResult};

/// The name of the demo team.
pub const TEAM_NAME: &str = "demo";
/// The name of the key `serve --demo` makes; a start revokes the earlier ones.
pub const KEY_NAME: &str = "demo";
/// Users of the demo team.
pub const DEMO_USERS: usize = 240;
/// Days of records, ending today.
pub const DAYS: i32 = 90;
/// The demo groups: (id, name).
pub const DEMO_GROUPS: [(&str, &str); 6] = [
    ("grp-eng", "engineering"),
    ("grp-platform", "platform"),
    ("grp-data", "data"),
    ("grp-mobile", "mobile"),
    ("grp-design", "design"),
    ("grp-support", "support"),
];

/// Where the demo users work: a zone and its UTC offset in hours (standard time). A user
/// works from 08:00 to 18:00 in their zone, so the team's activity spreads over the UTC
/// day and a `time_zone` in a query moves it between days.
pub const DEMO_ZONES: [(&str, i64); 6] = [
    ("America/Los_Angeles", -8),
    ("America/New_York", -5),
    ("Europe/London", 0),
    ("Europe/Berlin", 1),
    ("Asia/Kolkata", 5),
    ("Asia/Tokyo", 9),
];

/// The zone offset of demo user `i` (not tied to their group).
fn zone_offset(i: usize) -> i64 {
    DEMO_ZONES[(i / DEMO_GROUPS.len()) % DEMO_ZONES.len()].1
}

const LANGUAGES: [&str; 8] = [
    "PYTHON",
    "TYPESCRIPT",
    "GO",
    "RUST",
    "JAVA",
    "KOTLIN",
    "CPP",
    "SQL",
];
const IDES: [&str; 4] = ["vscode", "jetbrains", "neovim", "editor"];
const VERSIONS: [&str; 5] = ["1.9.12", "1.10.0", "1.10.2", "1.11.0", "1.12.1"];
const MODELS: [&str; 3] = ["model-large", "model-fast", "model-reasoning"];
const TOOLS: [&str; 8] = [
    "CODE_ACTION",
    "VIEW_FILE",
    "RUN_COMMAND",
    "GREP_SEARCH",
    "FIND",
    "MQUERY",
    "LIST_DIRECTORY",
    "PROPOSE_CODE",
];

/// The demo's generator: deterministic, so every demo team holds the same records.
type Rng = usage_core::rng::SplitMix64;

/// A record of `kind` with these fields (the others absent); the fields are handles of
/// the kind's table, so a misspelt one does not compile.
fn rec(kind: &'static RecordKind, fields: Vec<(FieldHandle, FieldValue)>) -> Record {
    let mut values = vec![FieldValue::Absent; kind.fields.len()];
    for (f, v) in fields {
        assert!(
            std::ptr::eq(f.kind, kind),
            "a field of {} in a {} record",
            f.kind.name,
            kind.name
        );
        values[f.index] = v;
    }
    Record::from_values(kind, values)
}

fn text(s: impl Into<String>) -> FieldValue {
    FieldValue::Text(s.into())
}

fn count(n: u64) -> FieldValue {
    FieldValue::Count(n as i64)
}

/// Every demo record by kind, for the 90 days ending on `now`'s day.
pub fn records(now: Timestamp) -> Vec<Batch> {
    use records::*;
    let mut rng = Rng::new(0x5EED_0000_D3E0);
    let today = now.date();
    let mut out: Vec<(&'static RecordKind, Vec<Record>)> = [
        &GROUPS as &'static RecordKind,
        &USERS,
        &AUTOCOMPLETE,
        &PCW,
        &CHAT,
        &COMMAND,
        &AGENT_LINES,
        &AGENT_RUNS,
        &AGENT_TOOL_USAGE,
        &BILLING,
    ]
    .into_iter()
    .map(|k| (k, Vec::new()))
    .collect();
    let mut push = |k: &'static RecordKind, r: Record| {
        if let Some((_, v)) = out.iter_mut().find(|(kk, _)| std::ptr::eq(*kk, k)) {
            v.push(r);
        }
    };
    for (id, name) in DEMO_GROUPS {
        push(
            &GROUPS,
            rec(
                &GROUPS,
                vec![
                    (groups::GROUP_ID, text(id)),
                    (groups::GROUP_NAME, text(name)),
                ],
            ),
        );
    }
    let mut activity = Vec::with_capacity(DEMO_USERS);
    for i in 0..DEMO_USERS {
        let g1 = DEMO_GROUPS[i % 6].0;
        let mut groups = vec![g1.to_string()];
        if i % 5 == 0 {
            groups.push(DEMO_GROUPS[(i / 5) % 6].0.to_string());
        }
        groups.dedup();
        let status = match i % 40 {
            7 => "USER_TEAM_STATUS_PENDING",
            13 => "USER_TEAM_STATUS_REJECTED",
            _ => "USER_TEAM_STATUS_APPROVED",
        };
        let signup = (today.start().0 - i64::from(DAYS + 30) * 24 * MICROS_PER_HOUR)
            + (i as i64) * 3 * MICROS_PER_HOUR;
        let mut fields = vec![
            (users::EMAIL, text(format!("user{i:03}@demo.example"))),
            (users::NAME, text(format!("Demo User {i:03}"))),
            (users::API_KEY, text(format!("demo-key-{i:03}"))),
            (users::TEAM_STATUS, text(status)),
            (users::GROUPS, FieldValue::Groups(groups)),
            (users::SIGNUP_TIME, FieldValue::Time(Timestamp(signup))),
        ];
        if i % 37 == 11 {
            fields.push((users::DISABLE_VENDOR, FieldValue::Bool(true)));
        }
        push(&USERS, rec(&USERS, fields));
        // Heavy-tailed activity: a few power users, many occasional ones.
        let u = (rng.below(1000) as f64 + 1.0) / 1000.0;
        activity.push((0.15 + 0.8 * u * u).min(0.95));
    }
    let mut event = 0u64;
    for day in 0..DAYS {
        let date = Date(today.0 - (DAYS - 1) + day);
        let weekday = (date.0 + 4).rem_euclid(7); // 0 = Sunday
        let weekend = weekday == 0 || weekday == 6;
        for (i, p) in activity.iter().enumerate() {
            let p = if weekend { p * 0.2 } else { *p };
            if !rng.chance(p) {
                continue;
            }
            let key = format!("demo-key-{i:03}");
            let lang = *rng.pick(&LANGUAGES);
            let ide = *rng.pick(&IDES);
            let version = *rng.pick(&VERSIONS);
            let ide_type = if i % 3 == 0 { "plugin" } else { "editor" };
            // Local working hours, shifted to UTC by the user's zone.
            let offset = zone_offset(i);
            let first = Date(today.0 - DAYS + 1).start();
            let mut hours: Vec<u64> = (0..1 + rng.below(3)).map(|_| 8 + rng.below(10)).collect();
            hours.sort_unstable();
            hours.dedup();
            for h in hours {
                let hour = Timestamp(date.start().0 + (h as i64 - offset) * MICROS_PER_HOUR);
                if hour > now || hour < first {
                    continue;
                }
                let acc = rng.below(40);
                push(
                    &AUTOCOMPLETE,
                    rec(
                        &AUTOCOMPLETE,
                        vec![
                            (autocomplete::API_KEY, text(&key)),
                            (autocomplete::HOUR, FieldValue::Time(hour)),
                            (autocomplete::LANGUAGE, text(lang)),
                            (autocomplete::IDE, text(ide)),
                            (autocomplete::VERSION, text(version)),
                            (autocomplete::NUM_ACCEPTANCES, count(acc)),
                            (
                                autocomplete::NUM_LINES_ACCEPTED,
                                count(acc * (1 + rng.below(4))),
                            ),
                            (
                                autocomplete::NUM_BYTES_ACCEPTED,
                                count(acc * (20 + rng.below(60))),
                            ),
                        ],
                    ),
                );
                push(
                    &PCW,
                    rec(
                        &PCW,
                        vec![
                            (pcw::API_KEY, text(&key)),
                            (pcw::HOUR, FieldValue::Time(hour)),
                            (pcw::LANGUAGE, text(lang)),
                            (pcw::IDE, text(ide)),
                            (pcw::VERSION, text(version)),
                            (pcw::VENDOR_BYTES_BY_AUTOCOMPLETE, count(rng.below(4000))),
                            (pcw::VENDOR_BYTES_BY_COMMAND, count(rng.below(1500))),
                            (pcw::USER_BYTES, count(500 + rng.below(6000))),
                        ],
                    ),
                );
            }
            let at = |rng: &mut Rng| {
                Timestamp(
                    date.start().0
                        + ((8 + rng.below(10)) as i64 - offset) * MICROS_PER_HOUR
                        + rng.below(3600) as i64 * MICROS_PER_SECOND,
                )
            };
            for _ in 0..rng.below(3) {
                let t = at(&mut rng);
                event += 1;
                if t > now || t < first {
                    continue;
                }
                push(
                    &CHAT,
                    rec(
                        &CHAT,
                        vec![
                            (chat::ID, text(format!("demo-chat-{event}"))),
                            (chat::API_KEY, text(&key)),
                            (chat::TIMESTAMP, FieldValue::Time(t)),
                            (chat::MODEL_ID, text(*rng.pick(&MODELS))),
                            (chat::IDE, text(ide)),
                            (chat::VERSION, text(version)),
                            (
                                chat::LATEST_INTENT_TYPE,
                                text(*rng.pick(usage_core::schema::ChatIntent::IDENTIFIERS)),
                            ),
                            (chat::NUM_CHATS_RECEIVED, count(1 + rng.below(5))),
                            (chat::CHAT_ACCEPTED, FieldValue::Bool(rng.chance(0.6))),
                            (
                                chat::CHAT_INSERTED_AT_CURSOR,
                                FieldValue::Bool(rng.chance(0.3)),
                            ),
                            (chat::CHAT_APPLIED, FieldValue::Bool(rng.chance(0.2))),
                            (chat::CHAT_LOC_USED, count(rng.below(50))),
                        ],
                    ),
                );
            }
            for _ in 0..rng.below(3) {
                let t = at(&mut rng);
                event += 1;
                if t > now || t < first {
                    continue;
                }
                let generate = rng.chance(0.5);
                push(
                    &COMMAND,
                    rec(
                        &COMMAND,
                        vec![
                            (command::ID, text(format!("demo-command-{event}"))),
                            (command::API_KEY, text(&key)),
                            (command::TIMESTAMP, FieldValue::Time(t)),
                            (command::LANGUAGE, text(lang)),
                            (command::IDE, text(ide)),
                            (command::VERSION, text(version)),
                            (
                                command::COMMAND_SOURCE,
                                text(*rng.pick(usage_core::schema::CommandSource::IDENTIFIERS)),
                            ),
                            (
                                command::PROVIDER_SOURCE,
                                text(if generate {
                                    "PROVIDER_SOURCE_COMMAND_GENERATE"
                                } else {
                                    "PROVIDER_SOURCE_COMMAND_EDIT"
                                }),
                            ),
                            (command::LINES_ADDED, count(rng.below(60))),
                            (command::LINES_REMOVED, count(rng.below(30))),
                            (command::BYTES_ADDED, count(rng.below(3000))),
                            (command::BYTES_REMOVED, count(rng.below(1500))),
                            (
                                command::SELECTION_LINES,
                                count(if generate { 0 } else { rng.below(40) }),
                            ),
                            (
                                command::SELECTION_BYTES,
                                count(if generate { 0 } else { rng.below(2000) }),
                            ),
                            (command::ACCEPTED, FieldValue::Bool(rng.chance(0.7))),
                        ],
                    ),
                );
            }
            let suggested = rng.below(300);
            push(
                &AGENT_LINES,
                rec(
                    &AGENT_LINES,
                    vec![
                        (agent_lines::API_KEY, text(&key)),
                        (agent_lines::DAY, FieldValue::Day(date)),
                        (agent_lines::IDE_TYPE, text(ide_type)),
                        (agent_lines::LINES_SUGGESTED, count(suggested)),
                        (
                            agent_lines::LINES_ACCEPTED,
                            count(suggested * rng.below(100) / 100),
                        ),
                    ],
                ),
            );
            for _ in 0..rng.below(3) {
                let t = at(&mut rng);
                event += 1;
                if t > now || t < first {
                    continue;
                }
                let prompts = 100 * rng.below(8);
                push(
                    &AGENT_RUNS,
                    rec(
                        &AGENT_RUNS,
                        vec![
                            (agent_runs::ID, text(format!("demo-run-{event}"))),
                            (agent_runs::API_KEY, text(&key)),
                            (agent_runs::TIMESTAMP, FieldValue::Time(t)),
                            (agent_runs::IDE_TYPE, text(ide_type)),
                            (agent_runs::MODEL, text(*rng.pick(&MODELS))),
                            (
                                agent_runs::MODE,
                                text(*rng.pick(usage_core::schema::AgentMode::IDENTIFIERS)),
                            ),
                            (agent_runs::MESSAGES_SENT, count(1 + rng.below(20))),
                            (agent_runs::AGENT_ID, text(format!("conv-{}", event / 2))),
                            (agent_runs::PROMPTS_USED, count(prompts)),
                            (
                                agent_runs::FLEX_CREDITS_USED,
                                count(if rng.chance(0.2) {
                                    50 * rng.below(10)
                                } else {
                                    0
                                }),
                            ),
                        ],
                    ),
                );
            }
            let mut tools: Vec<&str> = (0..1 + rng.below(3)).map(|_| *rng.pick(&TOOLS)).collect();
            tools.sort_unstable();
            tools.dedup();
            for tool in tools {
                push(
                    &AGENT_TOOL_USAGE,
                    rec(
                        &AGENT_TOOL_USAGE,
                        vec![
                            (agent_tool_usage::API_KEY, text(&key)),
                            (agent_tool_usage::DAY, FieldValue::Day(date)),
                            (agent_tool_usage::IDE_TYPE, text(ide_type)),
                            (agent_tool_usage::TOOL, text(tool)),
                            (agent_tool_usage::COUNT, count(1 + rng.below(30))),
                        ],
                    ),
                );
            }
        }
    }
    let start = Date(today.0 - 10).start();
    push(
        &BILLING,
        rec(
            &BILLING,
            vec![
                (billing::PLAN, text(Plan::Enterprise.as_str())),
                (billing::BILLING_CYCLE_START, FieldValue::Time(start)),
                (
                    billing::BILLING_CYCLE_END,
                    FieldValue::Time(start.add_months(1).unwrap_or(start)),
                ),
                (billing::ADD_ON_CREDITS_AVAILABLE, count(10_000)),
                (billing::ADD_ON_CREDITS_USED, count(2_500)),
            ],
        ),
    );
    out.into_iter()
        .map(|(kind, records)| Batch { kind, records })
        .collect()
}

/// Fills an empty store with the demo team; returns the id of the team to make the demo
/// key for (the demo team, else the oldest team of a store that is not empty).
///
/// # Errors
/// A store failure.
pub async fn ensure(store: &dyn Store, now: Timestamp) -> StoreResult<String> {
    let teams = store.teams().await?;
    if let Some(t) = teams.iter().find(|t| t.name == TEAM_NAME).or(teams.first()) {
        return Ok(t.id.clone());
    }
    let team = store
        .create_team(
            NewTeam {
                name: TEAM_NAME.to_string(),
                plan: Plan::Enterprise,
                seats: DEMO_USERS as i64,
                credits_per_seat: 500,
                unique_name: false,
            },
            DEMO_ACTOR,
            now,
        )
        .await?;
    for batch in records(now) {
        store.ingest(&team.id, batch, now).await?;
    }
    set_caps(store, &team.id, now).await?;
    Ok(team.id)
}

/// The group whose cap the demo sets.
pub const CAPPED_GROUP: &str = "grp-support";

/// Caps at every scope, chosen from the demo's own spend in its cycle (the demo's runs
/// fall at times of day, so it differs a little with the hour it starts): a team cap
/// twice the largest spend, half of it for [`CAPPED_GROUP`], and user caps that put the
/// largest spender at or past 100 % of their cap and the next one past 80 %. The changes
/// are audited as a write with no key (`-`).
///
/// # Errors
/// A store failure.
pub async fn set_caps(store: &dyn Store, team: &str, now: Timestamp) -> StoreResult<()> {
    use usage_core::plan::{CapAction, CapScope};
    let terms = crate::store::terms(store, team, now).await?;
    let mut spend: Vec<(i64, String)> = store
        .credits(team, &terms)
        .await?
        .into_iter()
        .map(|c| (c.spend.flex, c.email))
        .collect();
    spend.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let most = spend.first().map_or(0, |(f, _)| *f);
    // In whole credits, rounded up: nobody reaches 80 % of the team cap.
    let team_cap = 2 * (most + 99) / 100 + 100;
    let mut caps = vec![
        (CapScope::Team, team_cap),
        (CapScope::Group(CAPPED_GROUP.to_string()), team_cap / 2),
    ];
    if let Some((flex, email)) = spend.first() {
        // At or past 100 %: the cap is what they used, rounded down.
        caps.push((CapScope::User(email.clone()), flex / 100));
    }
    // Past 80 % and below 100 %: used / 80, rounded down, for the next spender whose
    // spend leaves room between the two (any from 400 hundredths does).
    if let Some((flex, email)) = spend.iter().skip(1).find(|(f, _)| (f / 80) * 100 > *f) {
        caps.push((CapScope::User(email.clone()), flex / 80));
    }
    for (scope, cap) in caps {
        store
            .change_cap(team, &scope, CapAction::Set(cap), "-", now)
            .await?;
    }
    Ok(())
}

/// The request body of the demo's curl command: acceptances per language.
pub fn curl_body(service_key: &str) -> String {
    serde_json::json!({
        "service_key": service_key,
        "query_requests": [{
            "data_source": "QUERY_DATA_SOURCE_USER_DATA",
            "selections": [{"field": "num_acceptances", "aggregation_function": "QUERY_AGGREGATION_SUM"}],
            "aggregations": [{"field": "language", "name": "language"}]
        }]
    })
    .to_string()
}

/// A ready-to-paste curl command against the server at `addr`.
pub fn curl(addr: SocketAddr, service_key: &str) -> String {
    format!(
        "curl -s -X POST http://{addr}/api/v1/Analytics -H 'Content-Type: application/json' -d '{}'",
        curl_body(service_key)
    )
}

/// The dashboard's address on the server at `addr` (the page asks for the key; it is not
/// part of the URL).
pub fn dashboard_url(addr: SocketAddr) -> String {
    format!("http://{addr}/dashboard")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Users work 08:00-18:00 in six zones, so activity covers every UTC hour and a
    /// query's `time_zone` moves records between days.
    #[test]
    fn demo_activity_spreads_over_the_utc_day() {
        let now = Timestamp::parse_rfc3339("2025-06-15T23:30:00Z").unwrap();
        let batches = records(now);
        let auto = batches
            .iter()
            .find(|b| b.kind.name == "autocomplete")
            .unwrap();
        let mut per_hour = [0usize; 24];
        for r in &auto.records {
            let t = r.time().unwrap();
            per_hour[(t.0.rem_euclid(24 * MICROS_PER_HOUR) / MICROS_PER_HOUR) as usize] += 1;
        }
        let empty: Vec<usize> = (0..24).filter(|h| per_hour[*h] == 0).collect();
        assert_eq!(empty, Vec::<usize>::new(), "{per_hour:?}");
        // Records before 08:00 UTC fall on the previous day in New York: a good share.
        let early: usize = per_hour[..8].iter().sum();
        assert!(early * 5 > auto.records.len(), "{per_hour:?}");
    }

    #[test]
    fn demo_data_is_deterministic_and_complete() {
        let now = Timestamp::parse_rfc3339("2025-06-15T12:30:00Z").unwrap();
        let a = records(now);
        let b = records(now);
        assert_eq!(a, b);
        for batch in &a {
            assert!(!batch.records.is_empty(), "{}", batch.kind.name);
            for r in &batch.records {
                if let Some(t) = r.time() {
                    assert!(t <= now, "{} in the future", batch.kind.name);
                    assert!(t >= Date(now.date().0 - DAYS + 1).start());
                }
            }
        }
        let users = a.iter().find(|b| b.kind.name == "users").unwrap();
        assert_eq!(users.records.len(), DEMO_USERS);
        let runs = a.iter().find(|b| b.kind.name == "agent_runs").unwrap();
        assert!(
            runs.records
                .iter()
                .any(|r| r.count("flex_credits_used") > 0)
        );
    }

    /// The demo's caps are at every scope, and its cycle has a user at or past 100 % of
    /// their cap and one past 80 % and below 100 %, whatever the hour it starts.
    #[tokio::test]
    async fn the_demo_has_caps_at_every_scope_and_users_near_and_over_them() {
        for hour in [0, 7, 13, 23] {
            let store = crate::store::memory::MemoryStore::new();
            let now = Timestamp(Date(Timestamp::now().date().0).start().0 + hour * MICROS_PER_HOUR);
            let team = ensure(&store, now).await.unwrap();
            let terms = crate::store::terms(&store, &team, now).await.unwrap();
            let all = crate::store::RecordStore::credits(&store, &team, &terms)
                .await
                .unwrap();
            let source =
                |c: &usage_core::credits::UserCredits| c.cap.as_ref().map(|(_, s)| s.to_string());
            let by_user: Vec<_> = all
                .iter()
                .filter(|c| source(c).as_deref() == Some("user"))
                .collect();
            assert_eq!(by_user.len(), 2, "hour {hour}");
            assert!(by_user.iter().any(|c| c.reaches(100)), "hour {hour}");
            assert!(
                by_user.iter().any(|c| c.reaches(80) && !c.reaches(100)),
                "hour {hour}"
            );
            assert!(
                all.iter()
                    .any(|c| source(c).as_deref() == Some("group:grp-support"))
            );
            assert!(all.iter().any(|c| source(c).as_deref() == Some("team")));
            // The caps of the group and the team leave their users below 80 %.
            assert!(
                all.iter()
                    .filter(|c| source(c).as_deref() != Some("user"))
                    .all(|c| !c.reaches(80))
            );
        }
    }
}
