//! Closed enumerations of the data model (spec, Resources).

use crate::ident::wire_enum;

wire_enum! {
    /// A data source of custom `Analytics` queries.
    pub enum Source ("data source") {
        /// Autocomplete data.
        UserData = "QUERY_DATA_SOURCE_USER_DATA",
        /// Chat data (older non-agentic plugins).
        ChatData = "QUERY_DATA_SOURCE_CHAT_DATA",
        /// Command data.
        CommandData = "QUERY_DATA_SOURCE_COMMAND_DATA",
        /// Percent-code-written data.
        PcwData = "QUERY_DATA_SOURCE_PCW_DATA",
        /// Agent runs (contract section 3, extension).
        AgentData = "QUERY_DATA_SOURCE_AGENT_DATA",
    }
}

wire_enum! {
    /// The aggregation function of a selection.
    pub enum Agg ("aggregation function") {
        /// No aggregation (the default).
        Unspecified = "QUERY_AGGREGATION_UNSPECIFIED",
        /// Number of records (distinct values for `distinct_*`).
        Count = "QUERY_AGGREGATION_COUNT",
        /// Sum (number of `true` records for a boolean).
        Sum = "QUERY_AGGREGATION_SUM",
        /// Arithmetic mean.
        Avg = "QUERY_AGGREGATION_AVG",
        /// Maximum.
        Max = "QUERY_AGGREGATION_MAX",
        /// Minimum.
        Min = "QUERY_AGGREGATION_MIN",
    }
}

impl Agg {
    /// The short name used in default aliases and messages (`sum`, `unspecified`).
    pub fn short(self) -> &'static str {
        match self {
            Agg::Unspecified => "unspecified",
            Agg::Count => "count",
            Agg::Sum => "sum",
            Agg::Avg => "avg",
            Agg::Max => "max",
            Agg::Min => "min",
        }
    }
}

wire_enum! {
    /// The comparison of a filter.
    pub enum FilterOp ("filter operator") {
        /// Equal (several on one field match any of their values).
        Equal = "QUERY_FILTER_EQUAL",
        /// Not equal.
        NotEqual = "QUERY_FILTER_NOT_EQUAL",
        /// Greater than.
        GreaterThan = "QUERY_FILTER_GREATER_THAN",
        /// Less than.
        LessThan = "QUERY_FILTER_LESS_THAN",
        /// Greater than or equal.
        Ge = "QUERY_FILTER_GE",
        /// Less than or equal.
        Le = "QUERY_FILTER_LE",
    }
}

impl FilterOp {
    /// Whether the operator orders values (everything but EQUAL and NOT_EQUAL).
    pub fn is_ordered(self) -> bool {
        !matches!(self, FilterOp::Equal | FilterOp::NotEqual)
    }

    /// Whether a value comparing `ord` to the filter value passes.
    pub fn accepts(self, ord: std::cmp::Ordering) -> bool {
        use std::cmp::Ordering::*;
        match self {
            FilterOp::Equal => ord == Equal,
            FilterOp::NotEqual => ord != Equal,
            FilterOp::GreaterThan => ord == Greater,
            FilterOp::LessThan => ord == Less,
            FilterOp::Ge => ord != Less,
            FilterOp::Le => ord != Greater,
        }
    }
}

wire_enum! {
    /// Chat intent types (values of `latest_intent_type`).
    pub enum ChatIntent ("chat intent type") {
        /// Regular chat.
        Generic = "CHAT_INTENT_GENERIC",
        /// Explain a function (code lens).
        FunctionExplain = "CHAT_INTENT_FUNCTION_EXPLAIN",
        /// Write a function's docstring (code lens).
        FunctionDocstring = "CHAT_INTENT_FUNCTION_DOCSTRING",
        /// Refactor a function (code lens).
        FunctionRefactor = "CHAT_INTENT_FUNCTION_REFACTOR",
        /// Explain a code block (code lens).
        CodeBlockExplain = "CHAT_INTENT_CODE_BLOCK_EXPLAIN",
        /// Refactor a code block (code lens).
        CodeBlockRefactor = "CHAT_INTENT_CODE_BLOCK_REFACTOR",
        /// Explain a problem (code lens).
        ProblemExplain = "CHAT_INTENT_PROBLEM_EXPLAIN",
        /// Write unit tests for a function (code lens).
        FunctionUnitTests = "CHAT_INTENT_FUNCTION_UNIT_TESTS",
    }
}

wire_enum! {
    /// Trigger sources of commands (values of `command_source`).
    pub enum CommandSource ("command source") {
        /// Line hint code lens.
        LineHintCodeLens = "COMMAND_REQUEST_SOURCE_LINE_HINT_CODE_LENS",
        /// Typical usage.
        Default = "COMMAND_REQUEST_SOURCE_DEFAULT",
        /// Right-click refactor.
        RightClickRefactor = "COMMAND_REQUEST_SOURCE_RIGHT_CLICK_REFACTOR",
        /// Function code lens.
        FunctionCodeLens = "COMMAND_REQUEST_SOURCE_FUNCTION_CODE_LENS",
        /// Follow-up.
        Followup = "COMMAND_REQUEST_SOURCE_FOLLOWUP",
        /// Class code lens.
        ClassCodeLens = "COMMAND_REQUEST_SOURCE_CLASS_CODE_LENS",
        /// Plan.
        Plan = "COMMAND_REQUEST_SOURCE_PLAN",
        /// Selection hint code lens.
        SelectionHintCodeLens = "COMMAND_REQUEST_SOURCE_SELECTION_HINT_CODE_LENS",
    }
}

wire_enum! {
    /// Generation or edit mode of a command (values of `provider_source`).
    pub enum ProviderSource ("provider source") {
        /// Generation mode.
        CommandGenerate = "PROVIDER_SOURCE_COMMAND_GENERATE",
        /// Edit mode.
        CommandEdit = "PROVIDER_SOURCE_COMMAND_EDIT",
    }
}

wire_enum! {
    /// Agent modes (values of `mode`).
    pub enum AgentMode ("agent mode") {
        /// Write mode.
        Default = "CONVERSATIONAL_PLANNER_MODE_DEFAULT",
        /// Read mode.
        ReadOnly = "CONVERSATIONAL_PLANNER_MODE_READ_ONLY",
        /// Legacy mode.
        NoTool = "CONVERSATIONAL_PLANNER_MODE_NO_TOOL",
        /// Unknown mode.
        Unknown = "UNKNOWN",
    }
}

wire_enum! {
    /// Where agent data came from.
    pub enum IdeType ("IDE type") {
        /// The editor application.
        Editor = "editor",
        /// The IDE plugin.
        Plugin = "plugin",
    }
}

wire_enum! {
    /// A user's status on the team.
    pub enum TeamStatus ("team status") {
        /// Unspecified.
        Unspecified = "USER_TEAM_STATUS_UNSPECIFIED",
        /// Pending.
        Pending = "USER_TEAM_STATUS_PENDING",
        /// Approved (the default of `users` records).
        Approved = "USER_TEAM_STATUS_APPROVED",
        /// Rejected.
        Rejected = "USER_TEAM_STATUS_REJECTED",
    }
}

wire_enum! {
    /// Tool identifiers of agent tool usage. Records may carry other identifiers too.
    pub enum Tool ("tool") {
        /// Code edit.
        CodeAction = "CODE_ACTION",
        /// View a file.
        ViewFile = "VIEW_FILE",
        /// Run a command.
        RunCommand = "RUN_COMMAND",
        /// Find.
        Find = "FIND",
        /// Grep search.
        GrepSearch = "GREP_SEARCH",
        /// View a file's outline.
        ViewFileOutline = "VIEW_FILE_OUTLINE",
        /// Codebase query.
        Mquery = "MQUERY",
        /// Workflows used.
        WorkflowsUsed = "WORKFLOWS_USED",
        /// List a directory.
        ListDirectory = "LIST_DIRECTORY",
        /// An MCP tool.
        McpTool = "MCP_TOOL",
        /// Propose code.
        ProposeCode = "PROPOSE_CODE",
        /// Web search.
        SearchWeb = "SEARCH_WEB",
        /// Memory.
        Memory = "MEMORY",
        /// Browser preview.
        ProxyWebServer = "PROXY_WEB_SERVER",
        /// Deploy a web app.
        DeployWebApp = "DEPLOY_WEB_APP",
    }
}

wire_enum! {
    /// A team's plan.
    pub enum Plan ("plan") {
        /// Enterprise tier (has `GetTeamCreditBalance`).
        Enterprise = "enterprise",
        /// Teams tier.
        Teams = "teams",
        /// Pro tier.
        Pro = "pro",
    }
}

wire_enum! {
    /// A permission a service key can hold (contract section 7).
    pub enum Permission ("permission") {
        /// Analytics Read: `Analytics`.
        AnalyticsRead = "analytics-read",
        /// Teams Read-only: `UserPageAnalytics`, `AgentAnalytics`.
        TeamsRead = "teams-read",
        /// Billing Read: `GetUsageConfig`, `GetTeamCreditBalance`.
        BillingRead = "billing-read",
        /// Billing Write: `UsageConfig`.
        BillingWrite = "billing-write",
        /// Usage Write: `Ingest` (extension).
        UsageWrite = "usage-write",
    }
}

impl Permission {
    /// The permission's title as the spec writes it.
    pub fn title(self) -> &'static str {
        match self {
            Permission::AnalyticsRead => "Analytics Read",
            Permission::TeamsRead => "Teams Read-only",
            Permission::BillingRead => "Billing Read",
            Permission::BillingWrite => "Billing Write",
            Permission::UsageWrite => "Usage Write",
        }
    }
}
