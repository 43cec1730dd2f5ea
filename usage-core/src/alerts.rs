//! Alerts by webhook (contract section 12): what a registration may ask for and which
//! events a write makes, given what each webhook already knows of the team's users.
//!
//! Pure: the store brings the users' credits after a write ([`UserCredits`], in e-mail
//! order) and what each webhook knows from earlier writes ([`Known`]: the thresholds it
//! was told of in each cycle, the access it was last told of); [`watch`] answers the
//! events the write makes and what the webhook knows after it. Because the comparison is
//! with what the webhook was told, not with the state before the write, one threshold of
//! one user is told once per cycle however many writes cross it, and a flip of access is
//! told once, with no flood when writes repeat.
//!
//! ```
//! use usage_core::alerts::{Alert, EventType, Known, Subscription, watch};
//! use usage_core::credits::{CapSource, Cycle, Spend, UserCredits};
//! use usage_core::time::Timestamp;
//!
//! let sub = Subscription::new(&[EventType::Threshold, EventType::AccessChanged], &[80, 100]);
//! let cycle = Cycle { start: Timestamp(0), end: Timestamp(1) };
//! let user = |flex| UserCredits::new("ada@example.com", cycle, 500, Spend { prompts: 0, flex },
//!     Some((100, CapSource::Team)));
//! // The webhook is made while Ada has used 50 of her 100 credits: it knows she has access.
//! let known = watch(&sub, &Known::default(), &[user(5_000)], false).known;
//! // A write takes her to 100: the 80 and 100 thresholds are crossed and she loses access.
//! let out = watch(&sub, &known, &[user(10_000)], true);
//! let kinds: Vec<_> = out.alerts.iter().map(Alert::event_type).collect();
//! assert_eq!(kinds, [EventType::Threshold, EventType::Threshold, EventType::AccessChanged]);
//! // The same state again tells nothing more.
//! assert!(watch(&sub, &out.known, &[user(10_000)], true).alerts.is_empty());
//! ```

use std::collections::{BTreeMap, BTreeSet};

use crate::credits::UserCredits;
use crate::time::Timestamp;

/// The most webhooks a team may have.
pub const MAX_WEBHOOKS: usize = 10;

/// The thresholds of a webhook registered without any, in percent of the cap.
pub const DEFAULT_THRESHOLDS: [i64; 2] = [80, 100];

/// The smallest and largest threshold a webhook may ask for, in percent of the cap.
pub const THRESHOLD_RANGE: std::ops::RangeInclusive<i64> = 1..=1000;

/// The most delivery-log entries `GET /api/v2/webhooks/{id}/deliveries` answers.
pub const DELIVERY_LOG: usize = 100;

/// The type of an event, as its body's `type` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EventType {
    /// A user's `percent_of_cap` reached one of the webhook's thresholds.
    Threshold,
    /// A user's `has_access` flipped.
    AccessChanged,
    /// A cap was set or cleared.
    CapsChanged,
    /// A test delivery (`POST /api/v2/webhooks/{id}/test`); never subscribed to.
    Test,
}

impl EventType {
    /// The events a webhook may subscribe to, in the order a listing shows them.
    pub const SUBSCRIBABLE: [EventType; 3] = [
        EventType::Threshold,
        EventType::AccessChanged,
        EventType::CapsChanged,
    ];

    /// The name of the type in an event's body and in a registration's `events`.
    pub fn name(self) -> &'static str {
        match self {
            EventType::Threshold => "credits.threshold",
            EventType::AccessChanged => "credits.access_changed",
            EventType::CapsChanged => "caps.changed",
            EventType::Test => "webhook.test",
        }
    }

    /// The type with this name, of any type (`webhook.test` too).
    pub fn from_name(name: &str) -> Option<EventType> {
        [
            EventType::Threshold,
            EventType::AccessChanged,
            EventType::CapsChanged,
            EventType::Test,
        ]
        .into_iter()
        .find(|t| t.name() == name)
    }
}

/// What a webhook asks to be told: its events and thresholds, each sorted and once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscription {
    /// The events.
    pub events: Vec<EventType>,
    /// The thresholds of `credits.threshold`, in percent of the cap.
    pub thresholds: Vec<i64>,
}

impl Subscription {
    /// A subscription to these events and thresholds (sorted, each once).
    pub fn new(events: &[EventType], thresholds: &[i64]) -> Subscription {
        let events: BTreeSet<EventType> = events.iter().copied().collect();
        let thresholds: BTreeSet<i64> = thresholds.iter().copied().collect();
        Subscription {
            events: events.into_iter().collect(),
            thresholds: thresholds.into_iter().collect(),
        }
    }

    /// Whether it asks for events of this type.
    pub fn wants(&self, t: EventType) -> bool {
        self.events.contains(&t)
    }
}

/// Why a registration's `events` or `thresholds` cannot be taken: the field and the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {rule}")]
pub struct Refused {
    /// The field (`events`, `thresholds[2]`, …).
    pub field: String,
    /// The rule it breaks.
    pub rule: String,
}

/// The subscription of a registration: `events` (names from
/// [`EventType::SUBSCRIBABLE`]; absent: all of them) and `thresholds` (integers in
/// [`THRESHOLD_RANGE`]; absent: [`DEFAULT_THRESHOLDS`]). Neither may be empty.
pub fn subscription(
    events: Option<&[String]>,
    thresholds: Option<&[i64]>,
) -> Result<Subscription, Refused> {
    let refuse = |field: String, rule: String| Err(Refused { field, rule });
    let events = match events {
        None => EventType::SUBSCRIBABLE.to_vec(),
        Some([]) => return refuse("events".into(), "must name at least one event".into()),
        Some(names) => {
            let mut out = Vec::new();
            for (i, n) in names.iter().enumerate() {
                match EventType::from_name(n).filter(|t| EventType::SUBSCRIBABLE.contains(t)) {
                    Some(t) => out.push(t),
                    None => {
                        let allowed: Vec<&str> =
                            EventType::SUBSCRIBABLE.iter().map(|t| t.name()).collect();
                        return refuse(
                            format!("events[{i}]"),
                            format!("must be one of {}", allowed.join(", ")),
                        );
                    }
                }
            }
            out
        }
    };
    let thresholds = match thresholds {
        None => DEFAULT_THRESHOLDS.to_vec(),
        Some([]) => {
            return refuse(
                "thresholds".into(),
                "must hold at least one threshold".into(),
            );
        }
        Some(ts) => {
            if let Some(i) = ts.iter().position(|t| !THRESHOLD_RANGE.contains(t)) {
                return refuse(
                    format!("thresholds[{i}]"),
                    format!(
                        "must be an integer from {} to {}",
                        THRESHOLD_RANGE.start(),
                        THRESHOLD_RANGE.end()
                    ),
                );
            }
            ts.to_vec()
        }
    };
    Ok(Subscription::new(&events, &thresholds))
}

/// What one webhook knows of the team's users from earlier writes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Known {
    /// The thresholds it was told of (or that were already reached when it was made), by
    /// user, cycle start and threshold.
    pub fired: BTreeSet<(String, Timestamp, i64)>,
    /// The access of each user it last knew.
    pub access: BTreeMap<String, bool>,
}

/// One event a write makes for one webhook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Alert {
    /// The user reached `threshold` percent of their cap in the cycle.
    Threshold {
        /// The user's credits after the write.
        credits: UserCredits,
        /// The threshold reached.
        threshold: i64,
    },
    /// The user's access flipped.
    AccessChanged {
        /// The user's credits after the write.
        credits: UserCredits,
    },
}

impl Alert {
    /// Its event type.
    pub fn event_type(&self) -> EventType {
        match self {
            Alert::Threshold { .. } => EventType::Threshold,
            Alert::AccessChanged { .. } => EventType::AccessChanged,
        }
    }

    /// Its `data`: the credits object, with `threshold` for a threshold event.
    pub fn data(&self) -> serde_json::Value {
        match self {
            Alert::Threshold { credits, threshold } => {
                let mut v = serde_json::to_value(credits).expect("credits serialize");
                if let Some(o) = v.as_object_mut() {
                    o.insert("threshold".into(), (*threshold).into());
                }
                v
            }
            Alert::AccessChanged { credits } => {
                serde_json::to_value(credits).expect("credits serialize")
            }
        }
    }
}

/// What [`watch`] answers: the events, and what the webhook knows after them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watched {
    /// The events, user by user in e-mail order, a user's thresholds ascending before
    /// their access.
    pub alerts: Vec<Alert>,
    /// What the webhook knows now.
    pub known: Known,
    /// The entries of `known.fired` that are new.
    pub fired: Vec<(String, Timestamp, i64)>,
    /// The entries of `known.access` that are new or changed.
    pub access: Vec<(String, bool)>,
}

/// The events a write makes for one webhook: `after` is every user's credits after the
/// write (in the current cycle), `known` what the webhook knew before. A threshold the
/// user reaches that the webhook was not told of in this cycle makes a
/// `credits.threshold`; an access that differs from the one it last knew makes a
/// `credits.access_changed` (a user it knew nothing of is learnt, not told). With
/// `tell` false nothing is told, only learnt: the baseline of a new webhook, which is
/// not told of what was reached before it existed.
pub fn watch(sub: &Subscription, known: &Known, after: &[UserCredits], tell: bool) -> Watched {
    let mut out = Watched {
        alerts: Vec::new(),
        known: known.clone(),
        fired: Vec::new(),
        access: Vec::new(),
    };
    let thresholds = sub.wants(EventType::Threshold);
    let access = sub.wants(EventType::AccessChanged);
    for c in after {
        if thresholds {
            for &t in &sub.thresholds {
                let key = (c.email.clone(), c.cycle.start, t);
                if c.reaches(t) && !known.fired.contains(&key) {
                    if tell {
                        out.alerts.push(Alert::Threshold {
                            credits: c.clone(),
                            threshold: t,
                        });
                    }
                    out.known.fired.insert(key.clone());
                    out.fired.push(key);
                }
            }
        }
        if access {
            let now = c.has_access();
            match known.access.get(&c.email) {
                Some(&was) if was == now => {}
                was => {
                    if tell && was.is_some() {
                        out.alerts.push(Alert::AccessChanged { credits: c.clone() });
                    }
                    out.known.access.insert(c.email.clone(), now);
                    out.access.push((c.email.clone(), now));
                }
            }
        }
    }
    out
}

/// An event's body: `{"type", "timestamp", "data"}` (contract section 12), `timestamp`
/// in RFC 3339 UTC.
pub fn body(t: EventType, time: Timestamp, data: serde_json::Value) -> String {
    serde_json::json!({
        "type": t.name(),
        "timestamp": time.to_rfc3339(),
        "data": data,
    })
    .to_string()
}

#[cfg(test)]
mod tests;
