//! Every operation through the client, with values computed by hand from `common::seed`.

use chrono::{DateTime, NaiveDate, TimeZone, Utc};
use usage::client::query::{agent, autocomplete as ac, chat, command as cmd, pcw};
use usage::client::{AnalyticsResults, Scope};
use usage::core::ident::Ident;
use usage::core::schema::{AgentMode, IdeType, TeamStatus};
use usage::core::time::Timestamp;
use usage::core::wire::{AgentAnalyticsResponse, AgentRunEntry};

use crate::common::Env;

/// Query `i`'s items, each as `alias=value` pairs in the answer's order.
fn table(res: &AnalyticsResults, i: usize) -> Vec<String> {
    res.rows(i)
        .map(|r| {
            r.aliases()
                .map(|a| format!("{a}={}", r.get_str(a).unwrap()))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

fn day(y: i32, m: u32, d: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(y, m, d).unwrap()
}

fn utc(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

fn ts(s: &str) -> Timestamp {
    Timestamp::parse_rfc3339(s).unwrap()
}

#[tokio::test]
async fn autocomplete_grouped_by_language() {
    let env = Env::seeded().await;
    let q = ac::query()
        .select(ac::num_acceptances().sum().alias("accepted"))
        .select(ac::num_lines_accepted().avg())
        .select(ac::distinct_users())
        .group_by(ac::language().group_by("lang"))
        .build()
        .unwrap();
    let res = env.client().analytics().query(q).send().await.unwrap();
    assert_eq!(res.len(), 1);
    assert_eq!(
        table(&res, 0),
        [
            "accepted=4 avg_num_lines_accepted=8 distinct_users=1 lang=GO",
            "accepted=8 avg_num_lines_accepted=8 distinct_users=2 lang=PYTHON",
            "accepted=7 avg_num_lines_accepted=14 distinct_users=1 lang=RUST",
        ]
    );
    let python = res.rows(0).nth(1).unwrap();
    assert_eq!(python.get_u64("accepted").unwrap(), 8);
    assert_eq!(python.get_f64("avg_num_lines_accepted").unwrap(), 8.0);
}

#[tokio::test]
async fn autocomplete_totals_filters_and_request_order() {
    let env = Env::seeded().await;
    let totals = ac::query()
        .select(ac::num_acceptances().sum())
        .select(ac::api_key().count())
        .select(ac::num_acceptances().avg())
        .select(ac::num_bytes_accepted().max())
        .select(ac::num_bytes_accepted().min())
        .select(ac::distinct_developer_days().count())
        .select(ac::distinct_developer_hours())
        .build()
        .unwrap();
    let sum = || ac::query().select(ac::num_acceptances().sum().alias("n"));
    let res = env
        .client()
        .analytics()
        .query(totals)
        // Dates compare as dates.
        .query(
            sum()
                .filter(ac::date().ge(day(2025, 5, 2)))
                .build()
                .unwrap(),
        )
        // Versions compare part by part: 1.9.12 < 1.10.0 (bytewise it would not be).
        .query(sum().filter(ac::version().lt("1.10.0")).build().unwrap())
        // Several EQUAL filters on one field are an IN list.
        .query(
            sum()
                .filter(ac::api_key().eq("k-ana"))
                .filter(ac::api_key().eq("k-cy"))
                .build()
                .unwrap(),
        )
        // `hour LE day` keeps the whole day.
        .query(
            sum()
                .filter(ac::hour().ge(utc("2025-05-01T10:30:00Z")))
                .filter(ac::hour().le_day(day(2025, 5, 2)))
                .build()
                .unwrap(),
        )
        // No matching record: SUM is 0, AVG/MIN/MAX are absent.
        .query(
            ac::query()
                .select(ac::num_acceptances().sum().alias("n"))
                .select(ac::num_acceptances().avg().alias("avg"))
                .filter(ac::language().eq("COBOL"))
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(res.len(), 6);
    assert_eq!(
        table(&res, 0),
        [
            "sum_num_acceptances=19 count_api_key=4 avg_num_acceptances=4.75 max_num_bytes_accepted=70 \
          min_num_bytes_accepted=30 count_distinct_developer_days=4 distinct_developer_hours=4"
        ]
    );
    assert_eq!(table(&res, 1), ["n=11"]);
    assert_eq!(table(&res, 2), ["n=4"]);
    assert_eq!(table(&res, 3), ["n=14"]);
    assert_eq!(table(&res, 4), ["n=9"]);
    assert_eq!(table(&res, 5), ["n=0"]);
    let empty = res.rows(5).next().unwrap();
    assert_eq!(empty.get_opt_f64("avg").unwrap(), None);
    assert_eq!(empty.get_f64("avg").unwrap(), 0.0);
}

#[tokio::test]
async fn group_name_restricts_every_query() {
    let env = Env::seeded().await;
    let q = || {
        ac::query()
            .select(ac::num_acceptances().sum().alias("n"))
            .build()
            .unwrap()
    };
    let res = env
        .client()
        .analytics()
        .group_name("ops")
        .query(q())
        .query(
            cmd::query()
                .select(cmd::lines_added().sum().alias("n"))
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
    // ops = bob and cy: 5 + 7 acceptances; commands m2 (4) and m3 (2).
    assert_eq!(table(&res, 0), ["n=12"]);
    assert_eq!(table(&res, 1), ["n=6"]);
}

#[tokio::test]
async fn local_dates_group_and_default_aliases() {
    let env = Env::seeded().await;
    let by_local_day = ac::query()
        .select(ac::num_acceptances().sum().alias("n"))
        .select(ac::date_utc(330).count())
        .group_by(ac::date_utc(-720).group_by("day"))
        .build()
        .unwrap();
    let res = env
        .client()
        .analytics()
        .query(by_local_day)
        .send()
        .await
        .unwrap();
    // UTC-12: ana 05-01 10h -> 04-30, bob 05-01 11h -> 04-30, ana 05-02 -> 05-01, cy 05-03 -> 05-02.
    assert_eq!(
        table(&res, 0),
        [
            "n=8 count_date utc+05:30=2 day=2025-04-30",
            "n=4 count_date utc+05:30=1 day=2025-05-01",
            "n=7 count_date utc+05:30=1 day=2025-05-02",
        ]
    );
    let first = res.rows(0).next().unwrap();
    assert_eq!(first.get_date("day").unwrap(), day(2025, 4, 30));
}

#[tokio::test]
async fn local_dates_in_iana_zones() {
    let env = Env::seeded().await;
    let q = ac::query()
        .select(ac::num_acceptances().sum().alias("n"))
        .select(ac::date_in("America/New_York").count())
        .group_by(ac::date_in("Pacific/Kiritimati").group_by("day"))
        .build()
        .unwrap();
    let res = env.client().analytics().query(q).send().await.unwrap();
    // UTC+14: ana 05-01 10h and bob 11h -> 05-02, ana 05-02 10h and cy 05-03 09h -> 05-03.
    assert_eq!(
        table(&res, 0),
        [
            "n=8 count_date america/new_york=2 day=2025-05-02",
            "n=11 count_date america/new_york=2 day=2025-05-03",
        ]
    );
    // A zone outside the database is refused before sending, naming the field and the forms.
    let err = ac::query()
        .select(ac::date_in("America/Nowhere").select())
        .build()
        .unwrap_err();
    let text = format!("{err:?}");
    assert!(text.contains("UnknownField"), "{text}");
    assert!(
        text.contains("selections\", 1), Index(0), Key(\"field"),
        "{text}"
    );
    assert!(text.contains("`date America/Nowhere`"), "{text}");
    assert!(text.contains("`date <IANA time zone>`"), "{text}");
}

#[tokio::test]
async fn autocomplete_raw_rows() {
    let env = Env::seeded().await;
    let q = ac::query()
        .select(ac::api_key().select())
        .select(ac::hour().select())
        .select(ac::num_acceptances().select())
        .select(ac::date_utc(-480).select())
        .filter(ac::language().eq("PYTHON"))
        .build()
        .unwrap();
    let res = env.client().analytics().query(q).send().await.unwrap();
    assert_eq!(
        table(&res, 0),
        [
            "api_key=k-ana hour=2025-05-01 10:00:00 +0000 UTC num_acceptances=3 date utc-08:00=2025-05-01",
            "api_key=k-bob hour=2025-05-01 11:00:00 +0000 UTC num_acceptances=5 date utc-08:00=2025-05-01",
        ]
    );
    let second = res.rows(0).nth(1).unwrap();
    assert_eq!(
        second.get_time("hour").unwrap(),
        utc("2025-05-01T11:00:00Z")
    );
    assert_eq!(second.get_i64("num_acceptances").unwrap(), 5);
}

#[tokio::test]
async fn chat_booleans_and_enums() {
    let env = Env::seeded().await;
    let per_model = chat::query()
        .select(chat::chat_accepted().sum())
        .select(chat::chat_accepted().count())
        .select(chat::num_chats_received().sum().alias("chats"))
        .select(chat::chat_loc_used().max().alias("loc"))
        .group_by(chat::model_id().group_by("model"))
        .build()
        .unwrap();
    let generic_inserted = chat::query()
        .select(chat::num_chats_received().sum().alias("chats"))
        .filter(chat::latest_intent_type().eq("CHAT_INTENT_GENERIC"))
        .filter(chat::chat_inserted_at_cursor().eq(true))
        .build()
        .unwrap();
    let raw = chat::query()
        .select(chat::model_id().select())
        .select(chat::latest_intent_type().select())
        .select(chat::chat_applied().select())
        .filter(chat::chat_applied().ne(true))
        .build()
        .unwrap();
    let res = env
        .client()
        .analytics()
        .query(per_model)
        .query(generic_inserted)
        .query(raw)
        .send()
        .await
        .unwrap();
    assert_eq!(
        table(&res, 0),
        [
            "sum_chat_accepted=2 count_chat_accepted=2 chats=5 loc=10 model=model-a",
            "sum_chat_accepted=0 count_chat_accepted=1 chats=1 loc=0 model=model-b",
        ]
    );
    assert_eq!(table(&res, 1), ["chats=3"]);
    // Raw rows are ordered by time: c2 (05-01 13:30) before c3 (05-02).
    assert_eq!(
        table(&res, 2),
        [
            "model_id=model-b latest_intent_type=CHAT_INTENT_FUNCTION_EXPLAIN chat_applied=false",
            "model_id=model-a latest_intent_type=CHAT_INTENT_GENERIC chat_applied=false",
        ]
    );
    assert!(
        !res.rows(2)
            .next()
            .unwrap()
            .get_bool("chat_applied")
            .unwrap()
    );
}

#[tokio::test]
async fn commands_by_provider_and_raw_timestamps() {
    let env = Env::seeded().await;
    let accepted_by_provider = cmd::query()
        .select(cmd::lines_added().sum().alias("lines"))
        .select(cmd::accepted().sum().alias("accepted"))
        .filter(cmd::accepted().eq(true))
        .group_by(cmd::provider_source().group_by("provider"))
        .build()
        .unwrap();
    let edits = cmd::query()
        .select(cmd::selection_bytes().avg().alias("avg_sel"))
        .select(cmd::bytes_removed().sum().alias("removed"))
        .filter(cmd::provider_source().eq("PROVIDER_SOURCE_COMMAND_EDIT"))
        .build()
        .unwrap();
    let raw = cmd::query()
        .select(cmd::timestamp().select())
        .select(cmd::command_source().select())
        .select(cmd::accepted().select())
        .filter(cmd::timestamp().gt(utc("2025-05-01T11:00:00Z")))
        .filter(cmd::timestamp().le_day(day(2025, 5, 1)))
        .build()
        .unwrap();
    let res = env
        .client()
        .analytics()
        .query(accepted_by_provider)
        .query(edits)
        .query(raw)
        .send()
        .await
        .unwrap();
    // Enum values order bytewise: EDIT < GENERATE.
    assert_eq!(
        table(&res, 0),
        [
            "lines=2 accepted=1 provider=PROVIDER_SOURCE_COMMAND_EDIT",
            "lines=10 accepted=1 provider=PROVIDER_SOURCE_COMMAND_GENERATE",
        ]
    );
    assert_eq!(table(&res, 1), ["avg_sel=90 removed=140"]);
    assert_eq!(
        table(&res, 2),
        ["timestamp=2025-05-01 11:45:30.25 +0000 UTC \
          command_source=COMMAND_REQUEST_SOURCE_RIGHT_CLICK_REFACTOR accepted=false"]
    );
    let row = res.rows(2).next().unwrap();
    assert_eq!(
        row.get_time("timestamp").unwrap(),
        utc("2025-05-01T11:45:30.25Z")
    );
}

#[tokio::test]
async fn pcw_whole_range_and_filters() {
    let env = Env::seeded().await;
    let all = || {
        pcw::query()
            .select(pcw::percent_code_written())
            .select(pcw::vendor_bytes())
            .select(pcw::user_bytes())
            .select(pcw::total_bytes())
            .select(pcw::vendor_bytes_by_autocomplete())
            .select(pcw::vendor_bytes_by_command())
    };
    let c = env.client();
    let res = c
        .analytics()
        .query(all().build().unwrap())
        .query(all().filter(pcw::language().eq("GO")).build().unwrap())
        .query(all().filter(pcw::version().gt("1.9")).build().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(
        table(&res, 0),
        [
            "percent_code_written=0.25 vendor_bytes=500 user_bytes=1500 total_bytes=2000 \
          vendor_bytes_by_autocomplete=400 vendor_bytes_by_command=100"
        ]
    );
    assert_eq!(
        table(&res, 1),
        [
            "percent_code_written=0.1 vendor_bytes=100 user_bytes=900 total_bytes=1000 \
          vendor_bytes_by_autocomplete=100 vendor_bytes_by_command=0"
        ]
    );
    assert_eq!(table(&res, 2), table(&res, 0));
    // start <= hour < end: only ana's record of 05-01.
    let res = c
        .analytics()
        .query(all().build().unwrap())
        .start(utc("2025-05-01T00:00:00Z"))
        .end(utc("2025-05-02T00:00:00Z"))
        .send()
        .await
        .unwrap();
    let row = res.rows(0).next().unwrap();
    assert_eq!(row.get_f64("percent_code_written").unwrap(), 0.4);
    assert_eq!(row.get_u64("total_bytes").unwrap(), 1000);
}

#[tokio::test]
async fn agent_source_credits_per_model_and_raw_runs() {
    let env = Env::seeded().await;
    let per_model = agent::query()
        .select(agent::prompts_used().sum().alias("prompts"))
        .select(agent::messages_sent().sum().alias("messages"))
        .select(agent::flex_credits_used().max().alias("flex"))
        .select(agent::agent_id().count().alias("runs"))
        .group_by(agent::model().group_by("model"))
        .build()
        .unwrap();
    let totals = agent::query()
        .select(agent::distinct_users())
        .select(agent::distinct_developer_days())
        .build()
        .unwrap();
    let raw = agent::query()
        .select(agent::api_key().select())
        .select(agent::timestamp().select())
        .select(agent::mode().select())
        .select(agent::ide().select())
        .select(agent::metadata())
        .select(agent::prompts_used().select())
        .filter(agent::model().eq("model-b"))
        .build()
        .unwrap();
    let per_day = agent::query()
        .select(agent::prompts_used().sum().alias("prompts"))
        .filter(agent::mode().ne("UNKNOWN"))
        .group_by(agent::date().group_by("day"))
        .group_by(agent::ide().group_by("ide"))
        .build()
        .unwrap();
    let res = env
        .client()
        .analytics()
        .query(per_model)
        .query(totals)
        .query(raw)
        .query(per_day)
        .send()
        .await
        .unwrap();
    assert_eq!(
        table(&res, 0),
        [
            "prompts=200 messages=3 flex=0 runs=1 model=model-a",
            "prompts=150 messages=3 flex=50 runs=2 model=model-b",
        ]
    );
    assert_eq!(
        table(&res, 1),
        ["distinct_users=2 distinct_developer_days=3"]
    );
    assert_eq!(
        table(&res, 2),
        [
            "api_key=k-bob timestamp=2025-05-02 08:00:00 +0000 UTC mode=UNKNOWN ide=plugin \
             metadata={\"email\":\"bob@t.example\"} prompts_used=0",
            "api_key=k-ana timestamp=2025-05-02 09:00:00 +0000 UTC mode=CONVERSATIONAL_PLANNER_MODE_READ_ONLY \
             ide=editor metadata={\"email\":\"ana@t.example\"} prompts_used=150",
        ]
    );
    assert_eq!(
        table(&res, 3),
        [
            "prompts=200 day=2025-05-01 ide=editor",
            "prompts=150 day=2025-05-02 ide=editor",
        ]
    );
}

#[tokio::test]
async fn user_page_analytics() {
    let env = Env::seeded().await;
    let c = env.client();
    let all = c.user_page_analytics().send().await.unwrap();
    assert_eq!(all.error, None);
    let emails: Vec<_> = all
        .user_table_stats
        .iter()
        .map(|u| u.email.as_str())
        .collect();
    assert_eq!(emails, ["ana@t.example", "bob@t.example", "cy@t.example"]);
    let ana = &all.user_table_stats[0];
    assert_eq!(ana.name, "Ana");
    assert_eq!(ana.api_key, "k-ana");
    assert_eq!(ana.active_days, 2);
    assert_eq!(ana.team_status, Ident::Known(TeamStatus::Approved));
    assert_eq!(ana.disable_vendor, None);
    assert_eq!(
        ana.last_autocomplete_usage_time,
        Some(ts("2025-05-02T10:00:00Z"))
    );
    // The latest of chat c3 and agent run r3, both at 09:00.
    assert_eq!(ana.last_chat_usage_time, Some(ts("2025-05-02T09:00:00Z")));
    assert_eq!(
        ana.last_command_usage_time,
        Some(ts("2025-05-01T10:15:00Z"))
    );
    assert_eq!(ana.last_update_time, Some(ts("2025-05-02T10:00:00Z")));
    assert_eq!(ana.signup_time, Some(ts("2025-01-01T00:00:00Z")));
    let bob = &all.user_table_stats[1];
    assert_eq!(
        bob.last_command_usage_time,
        Some(ts("2025-05-01T11:45:30.25Z"))
    );
    let cy = &all.user_table_stats[2];
    assert_eq!(cy.team_status, Ident::Known(TeamStatus::Pending));
    assert_eq!(cy.disable_vendor, Some(true));
    assert_eq!(cy.last_chat_usage_time, None);
    assert_eq!(cy.last_update_time, Some(ts("2025-05-03T09:00:00Z")));

    let from_may_2 = c
        .user_page_analytics()
        .start(utc("2025-05-02T00:00:00Z"))
        .send()
        .await
        .unwrap();
    let days: Vec<_> = from_may_2
        .user_table_stats
        .iter()
        .map(|u| (u.email.as_str(), u.active_days))
        .collect();
    assert_eq!(
        days,
        [
            ("ana@t.example", 1),
            ("bob@t.example", 1),
            ("cy@t.example", 2)
        ]
    );
    let window = c
        .user_page_analytics()
        .start(utc("2025-05-01T00:00:00Z"))
        .end(utc("2025-05-02T00:00:00Z"))
        .group_name("ops")
        .send()
        .await
        .unwrap();
    let days: Vec<_> = window
        .user_table_stats
        .iter()
        .map(|u| (u.email.as_str(), u.active_days))
        .collect();
    assert_eq!(days, [("bob@t.example", 1), ("cy@t.example", 0)]);
}

fn run(
    day: &str,
    model: &str,
    mode: AgentMode,
    msgs: i64,
    id: &str,
    prompts: i64,
) -> AgentRunEntry {
    AgentRunEntry {
        day: ts(day),
        model: model.into(),
        mode: Ident::Known(mode),
        messages_sent: msgs,
        agent_id: id.into(),
        prompts_used: prompts,
    }
}

fn lines(r: &AgentAnalyticsResponse, i: usize) -> Vec<(String, i64, i64)> {
    r.query_results[i]
        .agent_lines
        .as_ref()
        .unwrap()
        .agent_lines
        .iter()
        .map(|e| (e.day.to_rfc3339(), e.lines_suggested, e.lines_accepted))
        .collect()
}

fn tools(r: &AgentAnalyticsResponse, i: usize) -> Vec<(String, i64)> {
    r.query_results[i]
        .agent_tool_usage
        .as_ref()
        .unwrap()
        .agent_tool_usage
        .iter()
        .map(|e| (e.tool.clone(), e.count))
        .collect()
}

fn runs(r: &AgentAnalyticsResponse, i: usize) -> Vec<AgentRunEntry> {
    r.query_results[i]
        .agent_runs
        .as_ref()
        .unwrap()
        .agent_runs
        .clone()
}

#[tokio::test]
async fn agent_analytics() {
    let env = Env::seeded().await;
    let c = env.client();
    let all = c
        .agent_analytics()
        .lines()
        .runs()
        .tool_usage()
        .lines()
        .send()
        .await
        .unwrap();
    assert_eq!(all.query_results.len(), 4);
    let l = |d: &str, s, a| (d.to_string(), s, a);
    assert_eq!(
        lines(&all, 0),
        [
            l("2025-05-01T00:00:00Z", 15, 4),
            l("2025-05-02T00:00:00Z", 7, 7)
        ]
    );
    assert_eq!(lines(&all, 3), lines(&all, 0));
    assert!(all.query_results[0].agent_runs.is_none());
    assert_eq!(
        runs(&all, 1),
        [
            run(
                "2025-05-01T00:00:00Z",
                "model-a",
                AgentMode::Default,
                3,
                "conv-1",
                200
            ),
            run(
                "2025-05-02T00:00:00Z",
                "model-b",
                AgentMode::Unknown,
                1,
                "conv-2",
                0
            ),
            run(
                "2025-05-02T00:00:00Z",
                "model-b",
                AgentMode::ReadOnly,
                2,
                "conv-3",
                150
            ),
        ]
    );
    assert_eq!(
        tools(&all, 2),
        [("GREP_SEARCH".to_string(), 9), ("VIEW_FILE".to_string(), 6)]
    );

    let plugin = c
        .agent_analytics()
        .lines()
        .runs()
        .tool_usage()
        .ide_type(IdeType::Plugin)
        .send()
        .await
        .unwrap();
    assert_eq!(lines(&plugin, 0), [l("2025-05-01T00:00:00Z", 5, 0)]);
    assert_eq!(runs(&plugin, 1), [runs(&all, 1)[1].clone()]);
    assert_eq!(
        tools(&plugin, 2),
        [("GREP_SEARCH".to_string(), 9), ("VIEW_FILE".to_string(), 2)]
    );

    let cy = c
        .agent_analytics()
        .lines()
        .runs()
        .tool_usage()
        .emails(["cy@t.example", "nobody@t.example"])
        .send()
        .await
        .unwrap();
    assert_eq!(lines(&cy, 0), [l("2025-05-02T00:00:00Z", 7, 7)]);
    assert!(runs(&cy, 1).is_empty());
    assert!(tools(&cy, 2).is_empty());

    let eng_from_may_2 = c
        .agent_analytics()
        .lines()
        .runs()
        .group_name("eng")
        .start(utc("2025-05-02T00:00:00Z"))
        .end(utc("2025-05-03T00:00:00Z"))
        .send()
        .await
        .unwrap();
    assert!(lines(&eng_from_may_2, 0).is_empty());
    let ids: Vec<_> = runs(&eng_from_may_2, 1)
        .into_iter()
        .map(|r| r.agent_id)
        .collect();
    assert_eq!(ids, ["conv-2", "conv-3"]);
}

#[tokio::test]
async fn caps_at_every_scope() {
    let env = Env::seeded().await;
    let c = env.client();
    let team = || Scope::Team;
    let eng = || Scope::Group("g-eng".into());
    let ops = || Scope::Group("g-ops".into());
    let ana = || Scope::User("ana@t.example".into());
    for scope in [team(), eng(), ana()] {
        assert_eq!(c.get_usage_config(scope).send().await.unwrap(), None);
    }
    c.set_usage_cap(team(), 500).send().await.unwrap();
    c.set_usage_cap(eng(), 0).send().await.unwrap();
    c.set_usage_cap(ana(), 1_000_000_000).send().await.unwrap();
    assert_eq!(c.get_usage_config(team()).send().await.unwrap(), Some(500));
    // A cap of 0 is a cap, not "no cap".
    assert_eq!(c.get_usage_config(eng()).send().await.unwrap(), Some(0));
    assert_eq!(c.get_usage_config(ops()).send().await.unwrap(), None);
    assert_eq!(
        c.get_usage_config(ana()).send().await.unwrap(),
        Some(1_000_000_000)
    );
    // Reading a scope reads exactly that scope: bob has no cap of his own.
    assert_eq!(
        c.get_usage_config(Scope::User("bob@t.example".into()))
            .send()
            .await
            .unwrap(),
        None
    );
    c.set_usage_cap(team(), 750).send().await.unwrap();
    assert_eq!(c.get_usage_config(team()).send().await.unwrap(), Some(750));
    c.clear_usage_cap(team()).send().await.unwrap();
    c.clear_usage_cap(eng()).send().await.unwrap();
    // Clearing a cap that is not set succeeds.
    c.clear_usage_cap(ops()).send().await.unwrap();
    assert_eq!(c.get_usage_config(team()).send().await.unwrap(), None);
    assert_eq!(c.get_usage_config(eng()).send().await.unwrap(), None);
    assert_eq!(
        c.get_usage_config(ana()).send().await.unwrap(),
        Some(1_000_000_000)
    );
    c.clear_usage_cap(ana()).send().await.unwrap();
    assert_eq!(c.get_usage_config(ana()).send().await.unwrap(), None);
}

#[tokio::test]
async fn team_credit_balance() {
    let env = Env::seeded().await;
    let b = env.client().team_credit_balance().send().await.unwrap();
    assert_eq!(b.prompt_credits_per_seat, 500);
    assert_eq!(b.num_seats, 12);
    assert_eq!(b.add_on_credits_available, 1000);
    assert_eq!(b.add_on_credits_used, 250);
    // The first cycle starts on the team's creation day at 00:00Z, lasts one month and
    // contains now.
    let now = Timestamp::now();
    assert_eq!(b.billing_cycle_start, b.billing_cycle_start.date().start());
    assert!(b.billing_cycle_start <= now && now < b.billing_cycle_end);
    assert_eq!(
        b.billing_cycle_start.add_months(1),
        Some(b.billing_cycle_end)
    );
}

#[tokio::test]
async fn ingest_replaces_by_identity() {
    let env = Env::seeded().await;
    let c = env.client();
    let sum = || {
        c.analytics()
            .query(
                ac::query()
                    .select(ac::num_acceptances().sum().alias("n"))
                    .build()
                    .unwrap(),
            )
            .send()
    };
    assert_eq!(table(&sum().await.unwrap(), 0), ["n=19"]);
    // Same identity (api_key, hour, language, ide, version) twice in one batch: the later
    // one wins; the answer counts the records sent.
    let rec = |n: i64| {
        serde_json::json!({"api_key": "k-ana", "hour": "2025-05-01T10:00:00Z", "language": "PYTHON",
            "ide": "vscode", "version": "1.10.0", "num_acceptances": n, "num_lines_accepted": "0",
            "num_bytes_accepted": 0})
    };
    let accepted = c
        .ingest("autocomplete")
        .records([rec(100), rec(13)])
        .send()
        .await
        .unwrap();
    assert_eq!(accepted, 2);
    // ana's 3 became 13.
    assert_eq!(table(&sum().await.unwrap(), 0), ["n=29"]);
    assert_eq!(c.ingest("autocomplete").send().await.unwrap(), 0);
    let at = Utc.with_ymd_and_hms(2025, 5, 1, 0, 0, 0).unwrap();
    let res = c
        .analytics()
        .query(
            ac::query()
                .select(ac::num_lines_accepted().sum().alias("lines"))
                .filter(ac::hour().ge(at))
                .filter(ac::api_key().eq("k-ana"))
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(table(&res, 0), ["lines=8"]);
}
