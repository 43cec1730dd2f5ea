//! One call builder per operation; each ends in `send()`.

use chrono::{DateTime, Utc};
use usage_core::ident::Ident;
use usage_core::schema::IdeType;
use usage_core::wire::{
    AgentAnalyticsRequest, AgentAnalyticsResponse, AgentQueryRequest, AnalyticsRequest,
    AnalyticsResponse, Empty, GetTeamCreditBalanceRequest, GetTeamCreditBalanceResponse,
    GetUsageConfigRequest, GetUsageConfigResponse, IngestRequest, IngestResponse,
    UsageConfigRequest, UsageConfigResponse, UserPageAnalyticsRequest, UserPageAnalyticsResponse,
};

use crate::client::Client;
use crate::error::Error;
use crate::query::Query;
use crate::rows::AnalyticsResults;

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
}

/// `Analytics`: custom queries. Built by [`Client::analytics`].
#[derive(Debug, Clone)]
#[must_use = "nothing is sent until .send()"]
pub struct AnalyticsCall<'c> {
    client: &'c Client,
    req: AnalyticsRequest,
}

impl AnalyticsCall<'_> {
    /// Adds a query (answered in the order added).
    pub fn query(mut self, q: Query) -> Self {
        self.req.query_requests.push(q.request().clone());
        self
    }

    /// Restricts every query to members of a group.
    pub fn group_name(mut self, name: impl Into<String>) -> Self {
        self.req.group_name = Some(name.into());
        self
    }

    /// PCW queries: records with `start <= hour`.
    pub fn start(mut self, t: DateTime<Utc>) -> Self {
        self.req.start_timestamp = Some(rfc3339(t));
        self
    }

    /// PCW queries: records with `hour < end`.
    pub fn end(mut self, t: DateTime<Utc>) -> Self {
        self.req.end_timestamp = Some(rfc3339(t));
        self
    }

    /// Sends the request.
    ///
    /// # Errors
    /// Any [`Error`]; a request without queries is refused before sending
    /// ([`Error::Build`]).
    pub async fn send(self) -> Result<AnalyticsResults, Error> {
        if self.req.query_requests.is_empty() {
            return Err(Error::Build(
                "an Analytics call needs at least one .query(..)".into(),
            ));
        }
        let mut req = self.req;
        req.service_key = Some(self.client.inner.key.clone());
        let resp: AnalyticsResponse = self.client.post("Analytics", &req).await?;
        Ok(AnalyticsResults::new(resp))
    }
}

/// `UserPageAnalytics`: per-user activity. Built by [`Client::user_page_analytics`].
#[derive(Debug, Clone)]
#[must_use = "nothing is sent until .send()"]
pub struct UserPageCall<'c> {
    client: &'c Client,
    req: UserPageAnalyticsRequest,
}

impl UserPageCall<'_> {
    /// Restricts to members of a group.
    pub fn group_name(mut self, name: impl Into<String>) -> Self {
        self.req.group_name = Some(name.into());
        self
    }
    /// `activeDays` counts days from this instant on.
    pub fn start(mut self, t: DateTime<Utc>) -> Self {
        self.req.start_timestamp = Some(rfc3339(t));
        self
    }
    /// `activeDays` counts days before this instant.
    pub fn end(mut self, t: DateTime<Utc>) -> Self {
        self.req.end_timestamp = Some(rfc3339(t));
        self
    }
    /// Sends the request.
    ///
    /// # Errors
    /// Any [`Error`].
    pub async fn send(self) -> Result<UserPageAnalyticsResponse, Error> {
        let mut req = self.req;
        req.service_key = Some(self.client.inner.key.clone());
        self.client.post("UserPageAnalytics", &req).await
    }
}

/// `AgentAnalytics`: agent lines, runs and tool usage. Built by [`Client::agent_analytics`].
#[derive(Debug, Clone)]
#[must_use = "nothing is sent until .send()"]
pub struct AgentCall<'c> {
    client: &'c Client,
    req: AgentAnalyticsRequest,
}

impl AgentCall<'_> {
    /// Adds an `agent_lines` query.
    pub fn lines(mut self) -> Self {
        self.req.query_requests.push(AgentQueryRequest {
            agent_lines: Some(Empty {}),
            ..Default::default()
        });
        self
    }
    /// Adds an `agent_runs` query.
    pub fn runs(mut self) -> Self {
        self.req.query_requests.push(AgentQueryRequest {
            agent_runs: Some(Empty {}),
            ..Default::default()
        });
        self
    }
    /// Adds an `agent_tool_usage` query.
    pub fn tool_usage(mut self) -> Self {
        self.req.query_requests.push(AgentQueryRequest {
            agent_tool_usage: Some(Empty {}),
            ..Default::default()
        });
        self
    }
    /// Restricts to members of a group (not with `emails`).
    pub fn group_name(mut self, name: impl Into<String>) -> Self {
        self.req.group_name = Some(name.into());
        self
    }
    /// Restricts to these users (not with `group_name`).
    pub fn emails<I: IntoIterator<Item = S>, S: Into<String>>(mut self, emails: I) -> Self {
        self.req.emails.extend(emails.into_iter().map(Into::into));
        self
    }
    /// Restricts to one IDE type (call twice for both; default both).
    ///
    /// ```no_run
    /// # async fn f(client: &usage_client::Client) -> Result<(), usage_client::Error> {
    /// use usage_client::IdeType;
    /// let answer = client.agent_analytics().runs().ide_type(IdeType::Plugin).send().await?;
    /// # let _ = answer;
    /// # Ok(())
    /// # }
    /// ```
    pub fn ide_type(mut self, t: IdeType) -> Self {
        self.req.ide_types.push(Ident::Known(t));
        self
    }
    /// Records from this instant on.
    pub fn start(mut self, t: DateTime<Utc>) -> Self {
        self.req.start_timestamp = Some(rfc3339(t));
        self
    }
    /// Records before this instant.
    pub fn end(mut self, t: DateTime<Utc>) -> Self {
        self.req.end_timestamp = Some(rfc3339(t));
        self
    }
    /// Sends the request.
    ///
    /// # Errors
    /// Any [`Error`].
    pub async fn send(self) -> Result<AgentAnalyticsResponse, Error> {
        let mut req = self.req;
        req.service_key = Some(self.client.inner.key.clone());
        self.client.post("AgentAnalytics", &req).await
    }
}

/// The scope of a cap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Every user of the team.
    Team,
    /// Every user of a group (by group id).
    Group(String),
    /// One user (by e-mail).
    User(String),
}

impl Scope {
    fn apply(
        &self,
        team: &mut Option<bool>,
        group: &mut Option<String>,
        user: &mut Option<String>,
    ) {
        match self {
            Scope::Team => *team = Some(true),
            Scope::Group(g) => *group = Some(g.clone()),
            Scope::User(u) => *user = Some(u.clone()),
        }
    }
}

/// `GetUsageConfig`: the cap at exactly one scope. Built by [`Client::get_usage_config`].
#[derive(Debug, Clone)]
#[must_use = "nothing is sent until .send()"]
pub struct GetUsageConfigCall<'c> {
    client: &'c Client,
    scope: Scope,
}

impl GetUsageConfigCall<'_> {
    /// Sends the request; `Ok(None)` means no cap is set at the scope.
    ///
    /// # Errors
    /// Any [`Error`] (an unknown group or user is a 404 [`Error::Api`]).
    pub async fn send(self) -> Result<Option<i64>, Error> {
        let mut req = GetUsageConfigRequest {
            service_key: Some(self.client.inner.key.clone()),
            ..Default::default()
        };
        self.scope
            .apply(&mut req.team_level, &mut req.group_id, &mut req.user_email);
        let resp: GetUsageConfigResponse = self.client.post("GetUsageConfig", &req).await?;
        Ok(resp.add_on_credit_cap)
    }
}

/// `UsageConfig`: sets or clears a cap. Built by [`Client::set_usage_cap`] and
/// [`Client::clear_usage_cap`].
#[derive(Debug, Clone)]
#[must_use = "nothing is sent until .send()"]
pub struct UsageConfigCall<'c> {
    client: &'c Client,
    req: UsageConfigRequest,
}

impl UsageConfigCall<'_> {
    /// Sends the request; it returns once the change is durable.
    ///
    /// # Errors
    /// Any [`Error`].
    pub async fn send(self) -> Result<(), Error> {
        let mut req = self.req;
        req.service_key = Some(self.client.inner.key.clone());
        let _: UsageConfigResponse = self.client.post("UsageConfig", &req).await?;
        Ok(())
    }
}

/// `GetTeamCreditBalance`. Built by [`Client::team_credit_balance`].
#[derive(Debug, Clone)]
#[must_use = "nothing is sent until .send()"]
pub struct BalanceCall<'c> {
    client: &'c Client,
}

impl BalanceCall<'_> {
    /// Sends the request.
    ///
    /// # Errors
    /// Any [`Error`] (a plan without the feature is a 403 [`Error::Api`]).
    pub async fn send(self) -> Result<GetTeamCreditBalanceResponse, Error> {
        let req = GetTeamCreditBalanceRequest {
            service_key: Some(self.client.inner.key.clone()),
        };
        self.client.post("GetTeamCreditBalance", &req).await
    }
}

/// `Ingest` (extension): loads records of one kind. Built by [`Client::ingest`].
#[derive(Debug, Clone)]
#[must_use = "nothing is sent until .send()"]
pub struct IngestCall<'c> {
    client: &'c Client,
    req: IngestRequest,
}

impl IngestCall<'_> {
    /// Adds records (JSON objects of the kind's fields, contract section 8).
    pub fn records<I: IntoIterator<Item = serde_json::Value>>(mut self, records: I) -> Self {
        self.req.records.extend(records);
        self
    }
    /// Sends the batch; it returns once the records are durable.
    ///
    /// # Errors
    /// Any [`Error`] (a bad record is a 400 [`Error::Api`] listing every violation).
    pub async fn send(self) -> Result<i64, Error> {
        let mut req = self.req;
        req.service_key = Some(self.client.inner.key.clone());
        let resp: IngestResponse = self.client.post("Ingest", &req).await?;
        Ok(resp.accepted)
    }
}

impl Client {
    /// Starts an `Analytics` call.
    pub fn analytics(&self) -> AnalyticsCall<'_> {
        AnalyticsCall {
            client: self,
            req: AnalyticsRequest::default(),
        }
    }
    /// Starts a `UserPageAnalytics` call.
    pub fn user_page_analytics(&self) -> UserPageCall<'_> {
        UserPageCall {
            client: self,
            req: UserPageAnalyticsRequest::default(),
        }
    }
    /// Starts an `AgentAnalytics` call.
    pub fn agent_analytics(&self) -> AgentCall<'_> {
        AgentCall {
            client: self,
            req: AgentAnalyticsRequest::default(),
        }
    }
    /// Starts a `GetUsageConfig` call for one scope.
    pub fn get_usage_config(&self, scope: Scope) -> GetUsageConfigCall<'_> {
        GetUsageConfigCall {
            client: self,
            scope,
        }
    }
    /// Starts a `UsageConfig` call that sets the cap at a scope (0 is a cap of 0).
    pub fn set_usage_cap(&self, scope: Scope, cap: i64) -> UsageConfigCall<'_> {
        let mut req = UsageConfigRequest {
            set_add_on_credit_cap: Some(cap),
            ..Default::default()
        };
        scope.apply(&mut req.team_level, &mut req.group_id, &mut req.user_email);
        UsageConfigCall { client: self, req }
    }
    /// Starts a `UsageConfig` call that clears the cap at a scope.
    pub fn clear_usage_cap(&self, scope: Scope) -> UsageConfigCall<'_> {
        let mut req = UsageConfigRequest {
            clear_add_on_credit_cap: Some(true),
            ..Default::default()
        };
        scope.apply(&mut req.team_level, &mut req.group_id, &mut req.user_email);
        UsageConfigCall { client: self, req }
    }
    /// Starts a `GetTeamCreditBalance` call.
    pub fn team_credit_balance(&self) -> BalanceCall<'_> {
        BalanceCall { client: self }
    }
    /// Starts an `Ingest` call for records of `kind` (`autocomplete`, `users`, …).
    pub fn ingest(&self, kind: impl Into<String>) -> IngestCall<'_> {
        IngestCall {
            client: self,
            req: IngestRequest {
                kind: Some(kind.into()),
                ..Default::default()
            },
        }
    }
}
