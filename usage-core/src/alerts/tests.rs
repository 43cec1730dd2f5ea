use proptest::prelude::*;

use super::*;
use crate::credits::{CapSource, Cycle, Spend};

fn user(email: &str, cycle: i64, flex: i64, cap: Option<i64>) -> UserCredits {
    UserCredits::new(
        email,
        Cycle {
            start: Timestamp(cycle),
            end: Timestamp(cycle + 1),
        },
        0,
        Spend { prompts: 0, flex },
        cap.map(|c| (c, CapSource::Team)),
    )
}

#[test]
fn a_registration_names_the_field_and_the_rule() {
    let all = subscription(None, None).unwrap();
    assert_eq!(all.events, EventType::SUBSCRIBABLE.to_vec());
    assert_eq!(all.thresholds, vec![80, 100]);
    let e = subscription(Some(&["caps.changed".into(), "webhook.test".into()]), None).unwrap_err();
    assert_eq!(e.field, "events[1]");
    assert_eq!(
        e.rule,
        "must be one of credits.threshold, credits.access_changed, caps.changed"
    );
    assert_eq!(subscription(Some(&[]), None).unwrap_err().field, "events");
    let e = subscription(None, Some(&[80, 0])).unwrap_err();
    assert_eq!(
        (e.field.as_str(), e.rule.as_str()),
        ("thresholds[1]", "must be an integer from 1 to 1000")
    );
    assert_eq!(
        subscription(None, Some(&[1001])).unwrap_err().field,
        "thresholds[0]"
    );
    assert_eq!(
        subscription(None, Some(&[])).unwrap_err().field,
        "thresholds"
    );
    let s = subscription(None, Some(&[100, 50, 100, 1000, 1])).unwrap();
    assert_eq!(s.thresholds, vec![1, 50, 100, 1000]);
}

#[test]
fn an_event_body_has_type_timestamp_and_data() {
    let a = Alert::Threshold {
        credits: user("a@x", 0, 8_000, Some(100)),
        threshold: 80,
    };
    let body: serde_json::Value =
        serde_json::from_str(&body(a.event_type(), Timestamp(0), a.data())).unwrap();
    assert_eq!(body["type"], "credits.threshold");
    assert_eq!(body["timestamp"], "1970-01-01T00:00:00Z");
    assert_eq!(body["data"]["threshold"], 80);
    assert_eq!(body["data"]["percent_of_cap"], "80.0");
    assert_eq!(body["data"]["email"], "a@x");
}

#[test]
fn a_new_cycle_tells_the_thresholds_again_and_gives_access_back() {
    let sub = Subscription::new(&EventType::SUBSCRIBABLE, &[100]);
    let k = watch(
        &sub,
        &Known::default(),
        &[user("a@x", 0, 10_000, Some(100))],
        false,
    )
    .known;
    assert!(!k.access["a@x"]);
    let out = watch(&sub, &k, &[user("a@x", 10, 0, Some(100))], true);
    assert_eq!(
        out.alerts,
        vec![Alert::AccessChanged {
            credits: user("a@x", 10, 0, Some(100))
        }]
    );
    let out = watch(
        &sub,
        &out.known,
        &[user("a@x", 10, 10_000, Some(100))],
        true,
    );
    assert_eq!(
        out.alerts.iter().map(Alert::event_type).collect::<Vec<_>>(),
        vec![EventType::Threshold, EventType::AccessChanged]
    );
}

#[test]
fn a_webhook_gets_only_what_it_asked_for() {
    let sub = Subscription::new(&[EventType::CapsChanged], &[80]);
    let out = watch(
        &sub,
        &Known::default(),
        &[user("a@x", 0, 10_000, Some(1))],
        true,
    );
    assert!(out.alerts.is_empty() && out.fired.is_empty() && out.access.is_empty());
}

proptest! {
    /// Over any sequence of writes, a threshold is told exactly when a state first reaches
    /// it in its cycle, and access whenever it differs from the previous state's: the
    /// oracle below reads the sequence as a whole.
    #[test]
    fn watching_writes_tells_each_crossing_once(
        writes in prop::collection::vec(
            prop::collection::vec((0i64..2, 0i64..30_000, prop::option::of(0i64..300)), 2),
            1..20,
        ),
        thresholds in prop::collection::btree_set(1i64..=300, 1..4),
    ) {
        let thresholds: Vec<i64> = thresholds.into_iter().collect();
        let sub = Subscription::new(&EventType::SUBSCRIBABLE, &thresholds);
        let emails = ["a@x", "b@x"];
        let states: Vec<Vec<UserCredits>> = writes
            .iter()
            .map(|w| w.iter().zip(emails).map(|(&(c, f, cap), e)| user(e, c, f, cap)).collect())
            .collect();
        // The webhook is made at the first state; every later state is a write.
        let mut known = watch(&sub, &Known::default(), &states[0], false).known;
        let mut told = Vec::new();
        for s in &states[1..] {
            let out = watch(&sub, &known, s, true);
            told.extend(out.alerts);
            known = out.known;
        }
        let mut expected = Vec::new();
        for (i, s) in states.iter().enumerate().skip(1) {
            for (u, c) in s.iter().enumerate() {
                for &t in &thresholds {
                    let before = states[..i].iter().any(|p| {
                        p[u].cycle.start == c.cycle.start && p[u].reaches(t)
                    });
                    if c.reaches(t) && !before {
                        expected.push(Alert::Threshold { credits: c.clone(), threshold: t });
                    }
                }
                if states[i - 1][u].has_access() != c.has_access() {
                    expected.push(Alert::AccessChanged { credits: c.clone() });
                }
            }
        }
        prop_assert_eq!(told, expected);
    }
}
