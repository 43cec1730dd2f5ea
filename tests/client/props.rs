//! Property: any query the typed builder makes either passes usage-core's validator and is
//! answered 200 by the server, or is refused by `build()` with exactly the violations the
//! server gives for the same wire request. And the typed builder can only break the rules
//! that need the whole query (rule 1, aliases, shape 3): a field
//! of another source, an invalid aggregation, a group-by on a metric, a `distinct_*` or a
//! PCW field, or a bad operator do not compile.

use chrono::{NaiveDate, TimeZone, Utc};
use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, TestRunner};
use serde_json::json;
use usage::client::query::{
    Agent, Autocomplete, Chat, Command, DataSource, FilterOn, GroupBy, Pcw, QueryBuilder,
    Selection, agent, autocomplete as ac, chat, command as cmd, pcw,
};
use usage::client::{Client, Error};

use crate::common::{Env, d};

/// A group-by field, given its alias.
type Group<S> = Box<dyn Fn(&str) -> GroupBy<S>>;

/// What the generated field modules offer for one source.
struct Menu<S> {
    selections: Vec<Selection<S>>,
    filters: Vec<FilterOn<S>>,
    groups: Vec<Group<S>>,
}

/// One random query: indices into a menu (taken modulo its length) and alias choices.
#[derive(Debug, Clone)]
struct Pick {
    source: usize,
    selections: Vec<(usize, Option<usize>)>,
    filters: Vec<usize>,
    groups: Vec<(usize, usize)>,
}

const ALIASES: [&str; 4] = ["a", "b", "language", "sum_num_acceptances"];

fn pick() -> impl Strategy<Value = Pick> {
    (
        0..5usize,
        prop::collection::vec(
            (
                any::<usize>(),
                prop::option::weighted(0.2, 0..ALIASES.len()),
            ),
            1..5,
        ),
        prop::collection::vec(any::<usize>(), 0..4),
        prop::collection::vec((any::<usize>(), 0..ALIASES.len() + 3), 0..3),
    )
        .prop_map(|(source, selections, filters, groups)| Pick {
            source,
            selections,
            filters,
            groups,
        })
}

impl<S: DataSource> Menu<S> {
    fn query(&self, p: &Pick) -> QueryBuilder<S> {
        let mut q = QueryBuilder::<S>::new();
        for (i, alias) in &p.selections {
            let s = self.selections[i % self.selections.len()].clone();
            q = q.select(match alias {
                Some(a) => s.alias(ALIASES[*a]),
                None => s,
            });
        }
        for i in &p.filters {
            q = q.filter(self.filters[i % self.filters.len()].clone());
        }
        if !self.groups.is_empty() {
            for (i, a) in &p.groups {
                // Mostly distinct aliases, sometimes one of the selection aliases.
                let alias = ALIASES
                    .get(*a)
                    .map_or_else(|| format!("g{a}_{i}"), |s| s.to_string());
                q = q.group_by(self.groups[i % self.groups.len()](&alias));
            }
        }
        q
    }
}

fn date(y: i32, m: u32, d: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(y, m, d).unwrap()
}

fn autocomplete_menu() -> Menu<Autocomplete> {
    let may2 = date(2025, 5, 2);
    Menu {
        selections: vec![
            ac::api_key().select(),
            ac::api_key().count(),
            ac::date().select(),
            ac::date_utc(-480).select(),
            ac::date_utc(330).count(),
            ac::hour().select(),
            ac::language().select(),
            ac::ide().count(),
            ac::version().select(),
            ac::num_acceptances().sum(),
            ac::num_acceptances().select(),
            ac::num_lines_accepted().avg(),
            ac::num_bytes_accepted().max(),
            ac::num_bytes_accepted().min(),
            ac::distinct_users().into(),
            ac::distinct_developer_days().count(),
            ac::distinct_developer_hours().into(),
        ],
        filters: vec![
            ac::date().ge(date(2025, 5, 1)),
            ac::date_utc(-480).le(may2),
            ac::hour().lt(Utc.with_ymd_and_hms(2025, 5, 2, 10, 0, 0).unwrap()),
            ac::hour().le_day(may2),
            ac::language().eq("PYTHON"),
            ac::language().eq("GO"),
            ac::version().ge("1.10"),
            ac::ide().ne("vscode"),
            ac::num_acceptances().gt(3),
            ac::api_key().eq("k-ana"),
        ],
        groups: vec![
            Box::new(|a| ac::api_key().group_by(a)),
            Box::new(|a| ac::date().group_by(a)),
            Box::new(|a| ac::date_utc(-480).group_by(a)),
            Box::new(|a| ac::hour().group_by(a)),
            Box::new(|a| ac::language().group_by(a)),
            Box::new(|a| ac::ide().group_by(a)),
            Box::new(|a| ac::version().group_by(a)),
        ],
    }
}

fn chat_menu() -> Menu<Chat> {
    Menu {
        selections: vec![
            chat::api_key().select(),
            chat::model_id().count(),
            chat::date().select(),
            chat::date_utc(60).select(),
            chat::latest_intent_type().select(),
            chat::num_chats_received().sum(),
            chat::num_chats_received().select(),
            chat::chat_accepted().sum(),
            chat::chat_inserted_at_cursor().count(),
            chat::chat_applied().select(),
            chat::chat_loc_used().avg(),
        ],
        filters: vec![
            chat::chat_accepted().eq(true),
            chat::chat_applied().ne(false),
            chat::latest_intent_type().eq("CHAT_INTENT_GENERIC"),
            chat::model_id().ge("model-b"),
            chat::version().lt("1.10.1"),
            chat::chat_loc_used().le(5),
        ],
        groups: vec![
            Box::new(|a| chat::api_key().group_by(a)),
            Box::new(|a| chat::model_id().group_by(a)),
            Box::new(|a| chat::date().group_by(a)),
            Box::new(|a| chat::ide().group_by(a)),
            Box::new(|a| chat::latest_intent_type().group_by(a)),
        ],
    }
}

fn command_menu() -> Menu<Command> {
    Menu {
        selections: vec![
            cmd::api_key().select(),
            cmd::timestamp().select(),
            cmd::timestamp().count(),
            cmd::command_source().select(),
            cmd::provider_source().count(),
            cmd::lines_added().sum(),
            cmd::lines_removed().max(),
            cmd::bytes_added().select(),
            cmd::selection_bytes().avg(),
            cmd::accepted().sum(),
            cmd::accepted().select(),
        ],
        filters: vec![
            cmd::accepted().eq(true),
            cmd::provider_source().eq("PROVIDER_SOURCE_COMMAND_EDIT"),
            cmd::command_source().ne("COMMAND_REQUEST_SOURCE_DEFAULT"),
            cmd::timestamp().ge(Utc.with_ymd_and_hms(2025, 5, 1, 11, 0, 0).unwrap()),
            cmd::timestamp().ge_day(date(2025, 5, 2)),
            cmd::language().eq("PYTHON"),
            cmd::selection_lines().gt(0),
        ],
        groups: vec![
            Box::new(|a| cmd::api_key().group_by(a)),
            Box::new(|a| cmd::date().group_by(a)),
            Box::new(|a| cmd::timestamp().group_by(a)),
            Box::new(|a| cmd::command_source().group_by(a)),
            Box::new(|a| cmd::provider_source().group_by(a)),
            Box::new(|a| cmd::language().group_by(a)),
        ],
    }
}

fn pcw_menu() -> Menu<Pcw> {
    Menu {
        selections: vec![
            pcw::percent_code_written().select(),
            pcw::vendor_bytes().select(),
            pcw::user_bytes().select(),
            pcw::total_bytes().select(),
            pcw::vendor_bytes_by_autocomplete().select(),
            pcw::vendor_bytes_by_command().select(),
        ],
        filters: vec![
            pcw::language().eq("GO"),
            pcw::language().ne("RUST"),
            pcw::ide().eq("vscode"),
            pcw::version().ge("1.9.0"),
        ],
        groups: vec![],
    }
}

fn agent_menu() -> Menu<Agent> {
    Menu {
        selections: vec![
            agent::api_key().select(),
            agent::date().count(),
            agent::timestamp().select(),
            agent::model().select(),
            agent::agent_id().count(),
            agent::ide().select(),
            agent::mode().select(),
            agent::messages_sent().sum(),
            agent::prompts_used().select(),
            agent::prompts_used().avg(),
            agent::flex_credits_used().max(),
            agent::metadata().select(),
            agent::distinct_users().count(),
            agent::distinct_developer_days().into(),
        ],
        filters: vec![
            agent::model().eq("model-b"),
            agent::mode().ne("UNKNOWN"),
            agent::ide().eq("editor"),
            agent::prompts_used().ge(100),
            agent::date().le(date(2025, 5, 1)),
            agent::agent_id().gt("conv-1"),
        ],
        groups: vec![
            Box::new(|a| agent::api_key().group_by(a)),
            Box::new(|a| agent::date().group_by(a)),
            Box::new(|a| agent::model().group_by(a)),
            Box::new(|a| agent::mode().group_by(a)),
            Box::new(|a| agent::ide().group_by(a)),
            Box::new(|a| agent::agent_id().group_by(a)),
        ],
    }
}

/// What happened to one query.
#[derive(Debug, PartialEq)]
enum Outcome {
    Answered,
    Refused(Vec<(String, String)>),
}

/// Rules the typed builder can break with at least one selection: those only the whole
/// query can tell.
const WHOLE_QUERY_RULES: [&str; 3] = ["mixed_aggregation", "duplicate_alias", "ungrouped_field"];

async fn check<S: DataSource>(
    env: &Env,
    client: &Client,
    q: QueryBuilder<S>,
) -> Result<Outcome, TestCaseError> {
    let wire = q.to_request();
    match q.build() {
        Ok(query) => {
            let plan_aliases: Vec<String> = query
                .plan()
                .selections
                .iter()
                .map(|s| s.alias.clone())
                .chain(query.plan().group_by.iter().map(|g| g.alias.clone()))
                .collect();
            let res = client.analytics().query(query).send().await;
            let res = res.map_err(|e| TestCaseError::fail(format!("{e} for {wire:?}")))?;
            prop_assert_eq!(res.len(), 1);
            for row in res.rows(0) {
                // Every key of an item is one of the query's aliases, in order.
                let keys: Vec<&str> = row.aliases().collect();
                let mut expected = plan_aliases.iter().map(String::as_str);
                for k in &keys {
                    prop_assert!(
                        expected.any(|a| a == *k),
                        "{:?} vs {:?}",
                        keys,
                        plan_aliases
                    );
                }
            }
            Ok(Outcome::Answered)
        }
        Err(invalid) => {
            let err: Error = invalid.into();
            let client_side = err.violations();
            for (_, rule) in &client_side {
                prop_assert!(
                    WHOLE_QUERY_RULES.contains(&rule.as_str()),
                    "{client_side:?}"
                );
            }
            let (status, body) = env
                .raw("Analytics", json!({"query_requests": [wire]}))
                .await;
            prop_assert_eq!(status, 400, "{}", body);
            let server: Vec<_> = body["details"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| d(v["path"].as_str().unwrap(), v["rule"].as_str().unwrap()))
                .collect();
            prop_assert_eq!(&client_side, &server);
            Ok(Outcome::Refused(client_side))
        }
    }
}

#[test]
fn typed_queries_are_valid_or_refused_like_the_server_does() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let env = rt.block_on(Env::seeded());
    let client = env.client();
    let menus = (
        autocomplete_menu(),
        chat_menu(),
        command_menu(),
        pcw_menu(),
        agent_menu(),
    );
    let mut runner = TestRunner::new(ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    let answered = std::cell::Cell::new(0usize);
    let refused = std::cell::Cell::new(0usize);
    runner
        .run(&pick(), |p| {
            let outcome = rt.block_on(async {
                match p.source {
                    0 => check(&env, &client, menus.0.query(&p)).await,
                    1 => check(&env, &client, menus.1.query(&p)).await,
                    2 => check(&env, &client, menus.2.query(&p)).await,
                    3 => check(&env, &client, menus.3.query(&p)).await,
                    _ => check(&env, &client, menus.4.query(&p)).await,
                }
            })?;
            match outcome {
                Outcome::Answered => answered.set(answered.get() + 1),
                Outcome::Refused(_) => refused.set(refused.get() + 1),
            }
            Ok(())
        })
        .unwrap();
    // Both branches were exercised.
    let (answered, refused) = (answered.get(), refused.get());
    assert!(
        answered > 20 && refused > 20,
        "{answered} answered, {refused} refused"
    );
}
