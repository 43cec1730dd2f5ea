//! The conformance checks of the webhook outbox (`WebhookStore`): what a store keeps of
//! a webhook's events. Each store's tests call them and check their own tables.

use usage_core::alerts::DELIVERY_LOG;
use usage_core::plan::{CapAction, CapScope};
use usage_core::schema::Plan;
use usage_core::time::Timestamp;

use super::{now, team};
use crate::store::Store;

/// Events beyond a webhook's last [`DELIVERY_LOG`] are deleted once finished (delivered or
/// given up); one still due is kept, however old. `DELIVERY_LOG + 5` events are made, the
/// oldest fails with a retry due and the rest are delivered. Returns the team and the
/// webhook: the caller checks that its store holds `DELIVERY_LOG + 1` events of it (its own
/// tables say; the trait shows only the last [`DELIVERY_LOG`]).
pub async fn finished_deliveries_are_pruned(s: &dyn Store) -> (String, String) {
    use crate::store::webhooks::Attempt;
    let t = team(s, "t", Plan::Enterprise).await;
    let hook = crate::webhooks::register(
        "https://hooks.example.com/in",
        Some(&["caps.changed".to_string()]),
        None,
        false,
        now(),
    )
    .expect("a webhook");
    assert!(
        s.add_webhook(&t, hook.clone(), "-", now())
            .await
            .expect("added")
    );
    let made = DELIVERY_LOG + 5;
    for cap in 0..made {
        s.change_cap(&t, &CapScope::Team, CapAction::Set(cap as i64), "k", now())
            .await
            .expect("set");
    }
    let lease = Timestamp(now().0 + 15_000_000);
    let due = s.claim(&t, now(), lease, made + 1).await.expect("claimed");
    assert_eq!(due.len(), made);
    let retry = Timestamp(now().0 + 60_000_000);
    for (i, o) in due.iter().enumerate() {
        let attempt = Attempt {
            claimed: o.lease,
            status: Some(if i == 0 { 500 } else { 200 }),
            error: (i == 0).then(|| "status 500".to_string()),
            next: (i == 0).then_some(retry),
        };
        s.attempted(&t, &hook.id, &o.event_id, &attempt, now())
            .await
            .expect("recorded");
    }
    // The log still shows the last DELIVERY_LOG, newest first, every one delivered.
    let log = s.deliveries(&t, &hook.id).await.expect("read");
    let ids: Vec<&str> = log.iter().map(|d| d.event_id.as_str()).collect();
    let newest: Vec<&str> = due
        .iter()
        .rev()
        .take(DELIVERY_LOG)
        .map(|o| o.event_id.as_str())
        .collect();
    assert_eq!(ids, newest);
    assert!(log.iter().all(|d| d.delivered == Some(now())));
    // The failed event is still due at its retry.
    let again = s
        .claim(&t, retry, Timestamp(retry.0 + 15_000_000), 10)
        .await
        .expect("claimed");
    assert_eq!(
        again
            .iter()
            .map(|o| o.event_id.as_str())
            .collect::<Vec<_>>(),
        [due[0].event_id.as_str()]
    );
    (t, hook.id)
}
