//! Typed access to `Analytics` results.

use chrono::{DateTime, NaiveDate, Utc};
use usage_core::time::Timestamp;
use usage_core::wire::{AnalyticsResponse, Item};

use crate::error::Error;

/// The answer of an `Analytics` call: one result per query, in the order added.
#[derive(Debug, Clone, PartialEq)]
pub struct AnalyticsResults {
    resp: AnalyticsResponse,
}

impl AnalyticsResults {
    pub(crate) fn new(resp: AnalyticsResponse) -> Self {
        AnalyticsResults { resp }
    }

    /// How many query results there are.
    pub fn len(&self) -> usize {
        self.resp.query_results.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.resp.query_results.is_empty()
    }

    /// The rows of query `i` (empty when there is no such query).
    pub fn rows(&self, i: usize) -> impl Iterator<Item = Row<'_>> {
        self.resp
            .query_results
            .get(i)
            .into_iter()
            .flat_map(|r| r.response_items.iter())
            .map(|it| Row { item: &it.item })
    }

    /// The wire answer.
    pub fn into_inner(self) -> AnalyticsResponse {
        self.resp
    }
}

impl AsRef<AnalyticsResponse> for AnalyticsResults {
    fn as_ref(&self) -> &AnalyticsResponse {
        &self.resp
    }
}

/// One result item, read by alias.
///
/// Numbers are read from strings or JSON numbers; an absent numeric alias reads as zero
/// (contract section 1) — use [`Row::get_opt_f64`] to tell "no value" (AVG, MIN, MAX over
/// no records) from zero.
#[derive(Debug, Clone, Copy)]
pub struct Row<'a> {
    item: &'a Item,
}

fn bad(alias: &str, value: &str, what: &str) -> Error {
    Error::Decode {
        status: 200,
        path: alias.to_string(),
        message: format!("`{value}` is not {what}"),
    }
}

impl<'a> Row<'a> {
    /// A row over an item.
    pub fn new(item: &'a Item) -> Self {
        Row { item }
    }

    /// The raw value of an alias.
    pub fn get_str(&self, alias: &str) -> Option<&'a str> {
        self.item.get(alias)
    }

    /// The aliases of this row, in order.
    pub fn aliases(&self) -> impl Iterator<Item = &'a str> {
        self.item.keys()
    }

    /// An unsigned integer (absent = 0).
    ///
    /// # Errors
    /// [`Error::Decode`] when the value is not a non-negative integer.
    pub fn get_u64(&self, alias: &str) -> Result<u64, Error> {
        match self.item.get(alias) {
            None => Ok(0),
            Some(v) => v
                .trim()
                .parse::<u64>()
                .map_err(|_| bad(alias, v, "an unsigned integer")),
        }
    }

    /// A signed integer (absent = 0).
    ///
    /// # Errors
    /// [`Error::Decode`] when the value is not an integer.
    pub fn get_i64(&self, alias: &str) -> Result<i64, Error> {
        match self.item.get(alias) {
            None => Ok(0),
            Some(v) => v
                .trim()
                .parse::<i64>()
                .map_err(|_| bad(alias, v, "an integer")),
        }
    }

    /// A number (absent = 0.0).
    ///
    /// # Errors
    /// [`Error::Decode`] when the value is not a number.
    pub fn get_f64(&self, alias: &str) -> Result<f64, Error> {
        Ok(self.get_opt_f64(alias)?.unwrap_or(0.0))
    }

    /// A number, `None` when absent (AVG, MIN, MAX over no records).
    ///
    /// # Errors
    /// [`Error::Decode`] when the value is not a number.
    pub fn get_opt_f64(&self, alias: &str) -> Result<Option<f64>, Error> {
        self.item
            .get(alias)
            .map(|v| {
                v.trim()
                    .parse::<f64>()
                    .map_err(|_| bad(alias, v, "a number"))
            })
            .transpose()
    }

    /// A boolean (`true`/`false`).
    ///
    /// # Errors
    /// [`Error::Decode`] when absent or not a boolean.
    pub fn get_bool(&self, alias: &str) -> Result<bool, Error> {
        match self.item.get(alias) {
            Some("true") => Ok(true),
            Some("false") => Ok(false),
            Some(v) => Err(bad(alias, v, "a boolean")),
            None => Err(bad(alias, "", "present")),
        }
    }

    /// A date `YYYY-MM-DD`.
    ///
    /// # Errors
    /// [`Error::Decode`] when absent or not a date.
    pub fn get_date(&self, alias: &str) -> Result<NaiveDate, Error> {
        let v = self.item.get(alias).unwrap_or_default();
        NaiveDate::parse_from_str(v, "%Y-%m-%d").map_err(|_| bad(alias, v, "a date YYYY-MM-DD"))
    }

    /// An instant: the hosted service's `2025-05-01 13:00:00 +0000 UTC` form of `hour` and
    /// `timestamp`, or RFC 3339.
    ///
    /// # Errors
    /// [`Error::Decode`] when absent or not a time.
    pub fn get_time(&self, alias: &str) -> Result<DateTime<Utc>, Error> {
        let v = self.item.get(alias).unwrap_or_default();
        let t = Timestamp::parse_go(v)
            .or_else(|| Timestamp::parse_rfc3339(v))
            .ok_or_else(|| bad(alias, v, "a time"))?;
        DateTime::from_timestamp_micros(t.0).ok_or_else(|| bad(alias, v, "a representable time"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(pairs: &[(&str, &str)]) -> Item {
        Item(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn getters_are_lenient_and_exact() {
        let it = item(&[
            ("n", "42"),
            ("avg", "2.5"),
            ("d", "2025-05-01"),
            ("h", "2025-05-01 13:00:00 +0000 UTC"),
            ("b", "true"),
        ]);
        let r = Row::new(&it);
        assert_eq!(r.get_u64("n").unwrap(), 42);
        assert_eq!(r.get_u64("absent").unwrap(), 0);
        assert_eq!(r.get_opt_f64("absent").unwrap(), None);
        assert_eq!(r.get_f64("avg").unwrap(), 2.5);
        assert_eq!(
            r.get_date("d").unwrap(),
            NaiveDate::from_ymd_opt(2025, 5, 1).unwrap()
        );
        assert_eq!(
            r.get_time("h").unwrap().to_rfc3339(),
            "2025-05-01T13:00:00+00:00"
        );
        assert!(r.get_bool("b").unwrap());
        let e = r.get_u64("avg").unwrap_err();
        assert_eq!(
            e.to_string(),
            "could not decode the answer (status 200) at `avg`: `2.5` is not an unsigned integer"
        );
    }

    #[test]
    fn items_decode_numbers_as_strings() {
        let resp: AnalyticsResponse = serde_json::from_str(
            r#"{"queryResults":[{"responseItems":[{"item":{"n":42,"s":"7","f":2.5}}]}]}"#,
        )
        .unwrap();
        let res = AnalyticsResults::new(resp);
        let row = res.rows(0).next().unwrap();
        assert_eq!(row.get_u64("n").unwrap(), 42);
        assert_eq!(row.get_u64("s").unwrap(), 7);
        assert_eq!(row.get_f64("f").unwrap(), 2.5);
        assert_eq!(res.rows(5).count(), 0);
    }
}
