//! A team's billing state and its rules (contract section 6).

use usage_core::load::{FieldValue, Record};
use usage_core::schema::Plan;
use usage_core::schema::records::{BILLING, FieldHandle, RecordType, billing};
use usage_core::time::{MICROS_PER_DAY, Timestamp};
use usage_core::wire::GetTeamCreditBalanceResponse;

/// A team's plan, seats, credits and billing cycle, as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Billing {
    /// The plan (`GetTeamCreditBalance` needs `enterprise`).
    pub plan: Plan,
    /// Seats.
    pub num_seats: i64,
    /// Prompt credits per seat.
    pub prompt_credits_per_seat: i64,
    /// Add-on credits available in the cycle.
    pub add_on_credits_available: i64,
    /// Add-on credits used in the cycle.
    pub add_on_credits_used: i64,
    /// Start of the stored cycle.
    pub cycle_start: Timestamp,
    /// End of the stored cycle.
    pub cycle_end: Timestamp,
}

/// The numbers of a billing state, by the fields of `billing` records that set them.
pub const NUMBERS: [FieldHandle; 6] = [
    billing::NUM_SEATS,
    billing::PROMPT_CREDITS_PER_SEAT,
    billing::ADD_ON_CREDITS_AVAILABLE,
    billing::ADD_ON_CREDITS_USED,
    billing::BILLING_CYCLE_START,
    billing::BILLING_CYCLE_END,
];

impl Billing {
    /// The number a field of `billing` records sets (times in microseconds).
    ///
    /// # Panics
    /// For `plan` or a handle of another kind: not a number of the state.
    pub fn number(&self, f: FieldHandle) -> i64 {
        let mut b = *self;
        *b.slot(f)
    }

    /// Sets the number a field of `billing` records sets ([`Billing::number`]).
    ///
    /// # Panics
    /// As [`Billing::number`].
    pub fn set_number(&mut self, f: FieldHandle, n: i64) {
        *self.slot(f) = n;
    }

    /// Where the state keeps the number of `f` (by the field's position in the kind, so
    /// that no handle is compared as a pattern).
    fn slot(&mut self, f: FieldHandle) -> &mut i64 {
        assert!(
            std::ptr::eq(f.kind, &BILLING),
            "`{}` is no field of billing records",
            f.name()
        );
        let slots: [(usize, &mut i64); 6] = [
            (billing::NUM_SEATS.index, &mut self.num_seats),
            (
                billing::PROMPT_CREDITS_PER_SEAT.index,
                &mut self.prompt_credits_per_seat,
            ),
            (
                billing::ADD_ON_CREDITS_AVAILABLE.index,
                &mut self.add_on_credits_available,
            ),
            (
                billing::ADD_ON_CREDITS_USED.index,
                &mut self.add_on_credits_used,
            ),
            (billing::BILLING_CYCLE_START.index, &mut self.cycle_start.0),
            (billing::BILLING_CYCLE_END.index, &mut self.cycle_end.0),
        ];
        slots
            .into_iter()
            .find(|(i, _)| *i == f.index)
            .map(|(_, slot)| slot)
            .unwrap_or_else(|| panic!("`{}` is no number of a billing state", f.name()))
    }

    /// The state `team create` makes: a first cycle from `now`'s day (00:00Z) to one
    /// month later, no add-on credits.
    pub fn new(plan: Plan, seats: i64, credits_per_seat: i64, now: Timestamp) -> Billing {
        let start = Timestamp(now.0 - now.0.rem_euclid(MICROS_PER_DAY));
        Billing {
            plan,
            num_seats: seats,
            prompt_credits_per_seat: credits_per_seat,
            add_on_credits_available: 0,
            add_on_credits_used: 0,
            cycle_start: start,
            cycle_end: start.add_months(1).unwrap_or(start),
        }
    }

    /// The cycle containing `now`: when the stored end has passed, the cycle is
    /// `[start + k months, start + (k+1) months)` for the `k` that contains now (`k` = 0
    /// too: a stored cycle shorter than a month ends a month after its start), with
    /// `add_on_credits_used` 0 once a new cycle began (`k` >= 1) and
    /// `add_on_credits_available` kept.
    pub fn current(&self, now: Timestamp) -> Billing {
        if now < self.cycle_end {
            return *self;
        }
        let mut k = 0;
        loop {
            let (Some(s), Some(e)) = (
                self.cycle_start.add_months(k),
                self.cycle_start.add_months(k + 1),
            ) else {
                return *self;
            };
            if now < e {
                return Billing {
                    cycle_start: s,
                    cycle_end: e,
                    add_on_credits_used: if k == 0 { self.add_on_credits_used } else { 0 },
                    ..*self
                };
            }
            // Months are at least 28 days: jump close to now when far behind.
            let behind = ((now.0 - e.0) / (31 * MICROS_PER_DAY)) as i32;
            k += behind.max(1);
        }
    }

    /// Applies a `billing` record: the fields it has replace the stored ones; a record
    /// without cycle fields applies to the current cycle (rolled forward first).
    pub fn apply(&mut self, r: &Record, now: Timestamp) {
        let given = |f: FieldHandle| r.get(f.name()) != &FieldValue::Absent;
        if !given(billing::BILLING_CYCLE_START) && !given(billing::BILLING_CYCLE_END) {
            *self = self.current(now);
        }
        if let Some(p) = r
            .get(billing::PLAN.name())
            .as_text()
            .and_then(|p| p.parse::<Plan>().ok())
        {
            self.plan = p;
        }
        for f in NUMBERS {
            let v = r.get(f.name());
            if let Some(n) = v.as_count().or_else(|| v.as_time().map(|t| t.0)) {
                self.set_number(f, n);
            }
        }
    }

    /// The state as an audit entry shows it: the fields of a `billing` record, in the
    /// kind's order.
    pub fn to_json(&self) -> serde_json::Value {
        let fields = (0..BILLING.fields.len()).map(|index| FieldHandle {
            kind: &BILLING,
            index,
        });
        let m = fields
            .map(|f| {
                let v = if f == billing::PLAN {
                    self.plan.as_str().into()
                } else if f.field().ty == RecordType::Timestamp {
                    Timestamp(self.number(f)).to_rfc3339().into()
                } else {
                    self.number(f).into()
                };
                (f.name().to_string(), v)
            })
            .collect();
        serde_json::Value::Object(m)
    }

    /// The state [`Billing::to_json`] wrote, `None` when `v` is not one.
    pub fn from_json(v: &serde_json::Value) -> Option<Billing> {
        let mut b = Billing::new(
            v.get(billing::PLAN.name())?.as_str()?.parse().ok()?,
            0,
            0,
            Timestamp(0),
        );
        for f in NUMBERS {
            let x = v.get(f.name())?;
            let n = match f.field().ty {
                RecordType::Timestamp => Timestamp::parse_rfc3339(x.as_str()?)?.0,
                _ => x.as_i64()?,
            };
            b.set_number(f, n);
        }
        Some(b)
    }

    /// The `GetTeamCreditBalance` answer at `now`.
    pub fn response(&self, now: Timestamp) -> GetTeamCreditBalanceResponse {
        let c = self.current(now);
        GetTeamCreditBalanceResponse {
            prompt_credits_per_seat: c.prompt_credits_per_seat,
            num_seats: c.num_seats,
            add_on_credits_available: c.add_on_credits_available,
            add_on_credits_used: c.add_on_credits_used,
            billing_cycle_start: c.cycle_start,
            billing_cycle_end: c.cycle_end,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use usage_core::error::JsonPath;
    use usage_core::load::parse_record;
    use usage_core::schema::records::BILLING;

    fn t(s: &str) -> Timestamp {
        Timestamp::parse_rfc3339(s).unwrap()
    }

    #[test]
    fn the_audit_form_reads_back() {
        let b = Billing {
            add_on_credits_used: 3,
            ..Billing::new(Plan::Teams, 7, 11, t("2025-01-31T15:00:00.5Z"))
        };
        assert_eq!(Billing::from_json(&b.to_json()), Some(b));
        assert_eq!(b.to_json()["plan"], "teams");
        assert_eq!(
            Billing::from_json(&serde_json::json!({"plan": "teams"})),
            None
        );
    }

    #[test]
    fn first_cycle_starts_at_midnight() {
        let b = Billing::new(Plan::Enterprise, 3, 10, t("2025-01-31T15:00:00Z"));
        assert_eq!(b.cycle_start.to_rfc3339(), "2025-01-31T00:00:00Z");
        assert_eq!(b.cycle_end.to_rfc3339(), "2025-02-28T00:00:00Z");
    }

    #[test]
    fn rolls_forward_by_months_from_the_stored_start() {
        let mut b = Billing::new(Plan::Enterprise, 3, 10, t("2025-01-31T00:00:00Z"));
        b.add_on_credits_used = 7;
        b.add_on_credits_available = 9;
        let c = b.current(t("2025-03-30T12:00:00Z"));
        assert_eq!(c.cycle_start.to_rfc3339(), "2025-02-28T00:00:00Z");
        assert_eq!(c.cycle_end.to_rfc3339(), "2025-03-31T00:00:00Z");
        assert_eq!((c.add_on_credits_used, c.add_on_credits_available), (0, 9));
        let c = b.current(t("2027-06-01T00:00:00Z"));
        assert_eq!(c.cycle_start.to_rfc3339(), "2027-05-31T00:00:00Z");
        assert_eq!(c.cycle_end.to_rfc3339(), "2027-06-30T00:00:00Z");
        // Inside the stored cycle nothing changes.
        assert_eq!(b.current(t("2025-02-01T00:00:00Z")), b);
    }

    #[test]
    fn a_short_stored_cycle_that_ended_runs_a_month_from_its_start() {
        let b = Billing {
            cycle_start: t("2026-11-01T00:00:00Z"),
            cycle_end: t("2026-11-15T00:00:00Z"),
            add_on_credits_used: 9,
            ..Billing::new(Plan::Enterprise, 1, 1, t("2026-11-01T00:00:00Z"))
        };
        let c = b.current(t("2026-11-23T12:00:00Z"));
        assert_eq!(c.cycle_start.to_rfc3339(), "2026-11-01T00:00:00Z");
        assert_eq!(c.cycle_end.to_rfc3339(), "2026-12-01T00:00:00Z");
        assert_eq!(c.add_on_credits_used, 9);
        let c = b.current(t("2026-12-02T00:00:00Z"));
        assert_eq!(c.cycle_start.to_rfc3339(), "2026-12-01T00:00:00Z");
        assert_eq!(c.add_on_credits_used, 0);
    }

    #[test]
    fn records_change_only_their_fields() {
        let mut b = Billing::new(Plan::Pro, 3, 10, t("2025-01-01T00:00:00Z"));
        let r = parse_record(
            &BILLING,
            &serde_json::json!({"plan": "enterprise", "add_on_credits_used": "5"}),
            &JsonPath::root(),
        )
        .unwrap();
        b.apply(&r, t("2025-01-10T00:00:00Z"));
        assert_eq!(b.plan, Plan::Enterprise);
        assert_eq!(
            (
                b.num_seats,
                b.prompt_credits_per_seat,
                b.add_on_credits_used
            ),
            (3, 10, 5)
        );
        // After the cycle ended, a record without cycle fields applies to the rolled cycle.
        let r = parse_record(
            &BILLING,
            &serde_json::json!({"num_seats": 4}),
            &JsonPath::root(),
        )
        .unwrap();
        b.apply(&r, t("2025-02-10T00:00:00Z"));
        assert_eq!(b.cycle_start.to_rfc3339(), "2025-02-01T00:00:00Z");
        assert_eq!((b.num_seats, b.add_on_credits_used), (4, 0));
    }
}
