//! `GET /api/v2/credits/users` and `GET /api/v2/credits/users/{email}` (`billing-read`,
//! contract section 12): each user's credits in the team's current billing cycle against
//! the cap that applies to them. The store computes them from the team's data it holds
//! ([`crate::store::RecordStore::credits`]); the terms (caps, cycle, credits per seat)
//! come from the metadata cache, so the single-user check answers from memory.

use serde_json::Value;
use usage_core::error::echo;
use usage_core::time::Timestamp;
use usage_core::{Rule, credits::UserCredits};

use super::{Params, bad};
use crate::error::{ApiError, Code};
use crate::http::App;
use crate::store;

/// The largest `min_percent`.
pub const MAX_MIN_PERCENT: i64 = 100_000;

/// The path of the list; a user's path is this, `/` and the e-mail (percent-encoded or
/// not).
pub const PATH: &str = "/api/v2/credits/users";

/// The e-mail a user's path names, percent-decoded; `None` when `path` is no such path.
///
/// # Errors
/// A path under [`PATH`] whose rest is empty, holds a `/` or does not decode to UTF-8.
pub(super) fn email_in(path: &str) -> Option<Result<String, ApiError>> {
    let rest = path.strip_prefix(PATH)?.strip_prefix('/')?;
    let invalid = |why: &str| {
        Some(Err(ApiError::new(
            Code::NotFound,
            format!(
                "no endpoint at `{}`: {why}; use {PATH}/{{email}}",
                echo(path)
            ),
        )))
    };
    if rest.is_empty() || rest.contains('/') {
        return invalid("the e-mail is one path segment");
    }
    match percent_encoding::percent_decode_str(rest).decode_utf8() {
        Ok(email) => Some(Ok(email.into_owned())),
        Err(_) => invalid("the e-mail is not UTF-8 once percent-decoded"),
    }
}

/// `min_percent`: an integer from 0 to [`MAX_MIN_PERCENT`], or absent.
fn min_percent(params: &Params) -> Result<Option<i64>, ApiError> {
    let Some(v) = params.get("min_percent").filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    v.parse::<i64>()
        .ok()
        .filter(|n| (0..=MAX_MIN_PERCENT).contains(n))
        .map(Some)
        .ok_or_else(|| {
            bad(
                "min_percent",
                Rule::InvalidValue,
                format!(
                    "`min_percent` is an integer from 0 to {MAX_MIN_PERCENT}, not `{}`",
                    echo(v)
                ),
            )
        })
}

fn json(c: &UserCredits) -> Value {
    serde_json::to_value(c).unwrap_or(Value::Null)
}

/// Every user's credits, keyed by e-mail; with `min_percent`, only the users with a cap
/// who used at least that percentage of it ([`UserCredits::reaches`]).
pub(super) async fn rows(
    app: &App,
    team: &str,
    params: &Params,
) -> Result<Vec<(Vec<String>, Value)>, ApiError> {
    let min = min_percent(params)?;
    let terms = store::terms(app.store.as_ref(), team, Timestamp::now()).await?;
    Ok(app
        .store
        .credits(team, &terms)
        .await?
        .into_iter()
        .filter(|c| min.is_none_or(|m| c.reaches(m)))
        .map(|c| (vec![c.email.clone()], json(&c)))
        .collect())
}

/// One user's credits; 404 `not_found` when the e-mail is no user of the team.
pub(super) async fn user(app: &App, team: &str, email: &str) -> Result<Value, ApiError> {
    let terms = store::terms(app.store.as_ref(), team, Timestamp::now()).await?;
    match app.store.credits_of(team, email, &terms).await? {
        Some(c) => Ok(json(&c)),
        None => Err(ApiError::new(
            Code::NotFound,
            format!("`{}` is not a user of the team", echo(email)),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_users_path_names_one_decoded_email() {
        assert!(email_in("/api/v2/credits/users").is_none());
        assert!(email_in("/api/v2/credits/usersx/a").is_none());
        assert_eq!(
            email_in("/api/v2/credits/users/a@x.com").unwrap().unwrap(),
            "a@x.com"
        );
        assert_eq!(
            email_in("/api/v2/credits/users/a%40x.com")
                .unwrap()
                .unwrap(),
            "a@x.com"
        );
        assert_eq!(
            email_in("/api/v2/credits/users/%C3%A9%2B1@x")
                .unwrap()
                .unwrap(),
            "é+1@x"
        );
        for bad in [
            "/api/v2/credits/users/",
            "/api/v2/credits/users/a/b",
            "/api/v2/credits/users/%FF",
        ] {
            let e = email_in(bad).unwrap().unwrap_err();
            assert_eq!(e.code, Code::NotFound, "{bad}");
        }
    }

    #[test]
    fn min_percent_is_an_integer_in_range() {
        let p = |v: &str| Params(vec![("min_percent".into(), v.into())]);
        assert_eq!(min_percent(&Params(vec![])).unwrap(), None);
        assert_eq!(min_percent(&p("0")).unwrap(), Some(0));
        assert_eq!(min_percent(&p("100000")).unwrap(), Some(100_000));
        for v in ["-1", "100001", "8.5", "x"] {
            let e = min_percent(&p(v)).unwrap_err();
            assert_eq!(e.code, Code::InvalidArgument, "{v}");
            assert!(e.message.contains("min_percent"), "{}", e.message);
        }
    }
}
