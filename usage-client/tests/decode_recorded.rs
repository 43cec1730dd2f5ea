//! The client decodes recorded answers in both integer encodings (JSON numbers and
//! decimal strings) and with zero fields absent; both encodings decode to the same values.

use usage_client::Row;
use usage_client::wire::{
    AgentAnalyticsResponse, AnalyticsResponse, GetTeamCreditBalanceResponse,
    GetUsageConfigResponse, UserPageAnalyticsResponse,
};

fn read<T: serde::de::DeserializeOwned>(name: &str) -> T {
    let path = format!("{}/tests/recorded/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn both<T: serde::de::DeserializeOwned + PartialEq + std::fmt::Debug>(stem: &str) -> T {
    let s: T = read(&format!("{stem}_strings.json"));
    let n: T = read(&format!("{stem}_numbers.json"));
    assert_eq!(s, n, "{stem}: the two encodings decode differently");
    s
}

#[test]
fn analytics() {
    let r: AnalyticsResponse = both("analytics");
    let res = r.clone();
    insta::assert_debug_snapshot!(res);
    let typed: Vec<(String, u64, Option<f64>, u64)> = AnalyticsResultsView(r)
        .rows()
        .map(|row| {
            (
                row.get_str("lang").unwrap_or_default().to_string(),
                row.get_u64("sum_num_acceptances").unwrap(),
                row.get_opt_f64("avg").unwrap(),
                row.get_u64("distinct_users").unwrap(),
            )
        })
        .collect();
    assert_eq!(
        typed,
        [
            ("PYTHON".to_string(), 1520, Some(2.5), 12),
            ("GO".to_string(), 0, None, 1)
        ]
    );
}

struct AnalyticsResultsView(AnalyticsResponse);

impl AnalyticsResultsView {
    fn rows(&self) -> impl Iterator<Item = Row<'_>> {
        self.0.query_results[0]
            .response_items
            .iter()
            .map(|i| Row::new(&i.item))
    }
}

#[test]
fn user_page() {
    let r: UserPageAnalyticsResponse = both("user_page");
    assert_eq!(r.user_table_stats[1].active_days, 0);
    insta::assert_debug_snapshot!(r);
}

#[test]
fn agent() {
    let r: AgentAnalyticsResponse = both("agent");
    let lines = &r.query_results[0].agent_lines.as_ref().unwrap().agent_lines;
    assert_eq!((lines[1].lines_suggested, lines[1].lines_accepted), (5, 0));
    insta::assert_debug_snapshot!(r);
}

#[test]
fn usage_config_and_balance() {
    let c: GetUsageConfigResponse = both("usage_config");
    assert_eq!(c.add_on_credit_cap, Some(500));
    let none: GetUsageConfigResponse = serde_json::from_str("{}").unwrap();
    assert_eq!(none.add_on_credit_cap, None);
    let b: GetTeamCreditBalanceResponse = both("balance");
    assert_eq!(b.add_on_credits_used, 0);
    insta::assert_debug_snapshot!(b);
}

#[test]
fn reencoded_items_are_strings() {
    let r: AnalyticsResponse = read("analytics_numbers.json");
    let v = serde_json::to_value(&r).unwrap();
    // Re-encoded, every item value is a string, as our server sends them.
    assert_eq!(
        v["queryResults"][0]["responseItems"][0]["item"]["sum_num_acceptances"],
        "1520"
    );
}
