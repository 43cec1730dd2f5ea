//! Fair use of the machine (contract section 11, cost bounds): queries of every team share
//! a bounded number of slots, and each team has a few slots of its own, so that one
//! team's heavy reads wait behind each other instead of in front of another team's.
//!
//! A query first takes one of its team's places for an answer in memory
//! ([`ANSWERS_PER_SLOT`] per slot), then one of its team's slots (a team's queue is its
//! own: it waits only behind the team's other queries), then one of the pool's
//! ([`Slots::pool`], all teams together). It gives both slots back once its answer is
//! computed, and the place once the answer has been sent whole (or the client went away):
//! a slow reader keeps its team's memory bounded without holding up the team's next query,
//! until the team has that many answers in flight.
//!
//! `GET /healthz`, the metrics, keys, caps and billing take no slot: they never wait
//! behind a query.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How many queries run at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slots {
    /// Queries computed at once, all teams together.
    pub pool: usize,
    /// Queries of one team computed or being sent at once.
    pub per_team: usize,
}

impl Default for Slots {
    /// As many pool slots as the machine has cores (at least 2), half of them a team's.
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(2, usize::from);
        Slots::for_cores(cores)
    }
}

impl Slots {
    /// The default for a machine of `cores` cores: a pool slot per core (at least 2), and
    /// half of them (at least 1) for one team, so that one team's heavy reads leave
    /// cores to the others.
    pub fn for_cores(cores: usize) -> Slots {
        let pool = cores.max(2);
        Slots {
            pool,
            per_team: (pool / 2).max(1),
        }
    }
}

/// A team's answers in memory at once (being computed or sent), per slot of the team's.
pub const ANSWERS_PER_SLOT: usize = 4;

/// A team's slots and its places for answers in memory.
struct TeamGate {
    slots: Semaphore,
    answers: Arc<Semaphore>,
}

/// The slots of a running server.
pub(crate) struct Gate {
    pool: Arc<Semaphore>,
    per_team: usize,
    teams: Mutex<HashMap<String, Arc<TeamGate>>>,
    /// Queries in a slot of the pool.
    running: AtomicU64,
    /// Queries waiting for a slot, their team's or the pool's.
    waiting: AtomicU64,
}

/// Counts one while it lives.
struct Counted<'a>(&'a AtomicU64);

impl<'a> Counted<'a> {
    fn new(n: &'a AtomicU64) -> Counted<'a> {
        n.fetch_add(1, Ordering::Relaxed);
        Counted(n)
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A team's place for an answer in memory, held until the answer has been sent.
pub(crate) struct AnswerPlace(#[allow(dead_code)] OwnedSemaphorePermit);

impl Gate {
    pub(crate) fn new(slots: Slots) -> Gate {
        Gate {
            pool: Arc::new(Semaphore::new(slots.pool.max(1))),
            per_team: slots.per_team.max(1),
            teams: Mutex::new(HashMap::new()),
            running: AtomicU64::new(0),
            waiting: AtomicU64::new(0),
        }
    }

    /// The queries running in a slot of the pool, and those waiting for a slot.
    pub(crate) fn queries(&self) -> (u64, u64) {
        (
            self.running.load(Ordering::Relaxed),
            self.waiting.load(Ordering::Relaxed),
        )
    }

    fn team(&self, team: &str) -> Arc<TeamGate> {
        let mut teams = self
            .teams
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        teams
            .entry(team.to_string())
            .or_insert_with(|| {
                Arc::new(TeamGate {
                    slots: Semaphore::new(self.per_team),
                    answers: Arc::new(Semaphore::new(self.per_team * ANSWERS_PER_SLOT)),
                })
            })
            .clone()
    }

    /// Runs `query` for `team` in a slot of the team's and one of the pool's; the team's
    /// place for the answer comes back with it, for the response to hold until it is
    /// sent.
    pub(crate) async fn run<T>(
        &self,
        team: &str,
        query: impl Future<Output = T>,
    ) -> (T, AnswerPlace) {
        // No semaphore is ever closed.
        let waiting = Counted::new(&self.waiting);
        let gate = self.team(team);
        let place = gate
            .answers
            .clone()
            .acquire_owned()
            .await
            .expect("a team's places are never closed");
        let own = gate
            .slots
            .acquire()
            .await
            .expect("a team's slots are never closed");
        let pool = self
            .pool
            .acquire()
            .await
            .expect("the pool's slots are never closed");
        drop(waiting);
        let running = Counted::new(&self.running);
        let out = query.await;
        drop((pool, own, running));
        (out, AnswerPlace(place))
    }

    /// The pool's free slots.
    #[cfg(test)]
    fn free(&self) -> usize {
        self.pool.available_permits()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    #[test]
    fn defaults_leave_cores_to_other_teams() {
        assert_eq!(
            Slots::for_cores(1),
            Slots {
                pool: 2,
                per_team: 1
            }
        );
        assert_eq!(
            Slots::for_cores(2),
            Slots {
                pool: 2,
                per_team: 1
            }
        );
        assert_eq!(
            Slots::for_cores(8),
            Slots {
                pool: 8,
                per_team: 4
            }
        );
    }

    /// The most queries of `team` that ran at once, out of `n` started together.
    async fn most_at_once(gate: &Arc<Gate>, team: &str, n: usize) -> usize {
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..n)
            .map(|_| {
                let (gate, running, most, team) = (
                    gate.clone(),
                    running.clone(),
                    most.clone(),
                    team.to_string(),
                );
                tokio::spawn(async move {
                    let ((), slot) = gate
                        .run(&team, async {
                            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                            most.fetch_max(now, Ordering::SeqCst);
                            tokio::time::sleep(Duration::from_millis(5)).await;
                            running.fetch_sub(1, Ordering::SeqCst);
                        })
                        .await;
                    drop(slot);
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        most.load(Ordering::SeqCst)
    }

    #[tokio::test]
    async fn a_team_runs_at_most_its_slots_and_the_pool_at_most_its() {
        let gate = Arc::new(Gate::new(Slots {
            pool: 3,
            per_team: 2,
        }));
        assert_eq!(most_at_once(&gate, "a", 10).await, 2);
        assert_eq!(gate.free(), 3);
    }

    #[tokio::test]
    async fn a_team_waiting_on_its_own_slots_leaves_the_pool_to_others() {
        let gate = Arc::new(Gate::new(Slots {
            pool: 2,
            per_team: 1,
        }));
        // Team a's query runs until told to finish; a second one queues behind it.
        let (finish, finished) = tokio::sync::oneshot::channel::<()>();
        let running = {
            let gate = gate.clone();
            tokio::spawn(async move {
                gate.run("a", async {
                    finished.await.unwrap();
                    1
                })
                .await
                .0
            })
        };
        while gate.queries().0 == 0 {
            tokio::task::yield_now().await;
        }
        let queued = {
            let gate = gate.clone();
            tokio::spawn(async move { gate.run("a", async { 2 }).await.0 })
        };
        while gate.queries().1 == 0 {
            tokio::task::yield_now().await;
        }
        assert_eq!(gate.queries(), (1, 1));
        // Team b is not behind them: the pool has a slot free.
        assert_eq!(gate.free(), 1);
        let (answer, _place) = gate.run("b", async { 7 }).await;
        assert_eq!(answer, 7);
        assert!(!queued.is_finished());
        finish.send(()).unwrap();
        assert_eq!(running.await.unwrap(), 1);
        assert_eq!(queued.await.unwrap(), 2);
        assert_eq!(gate.queries(), (0, 0));
    }

    /// An answer being sent holds a place, not a slot: the team's next query runs at
    /// once, until the team has ANSWERS_PER_SLOT answers per slot in flight.
    #[tokio::test]
    async fn answers_being_sent_bound_the_team_without_holding_its_slots() {
        let gate = Arc::new(Gate::new(Slots {
            pool: 2,
            per_team: 1,
        }));
        let mut held = Vec::new();
        for i in 0..ANSWERS_PER_SLOT {
            let (n, place) = gate.run("a", async { i }).await;
            assert_eq!(n, i);
            held.push(place);
        }
        assert_eq!(gate.free(), 2);
        let next = {
            let gate = gate.clone();
            tokio::spawn(async move { gate.run("a", async { 99 }).await.0 })
        };
        while gate.queries().1 == 0 {
            tokio::task::yield_now().await;
        }
        assert!(!next.is_finished(), "a fifth answer waits for a place");
        // Another team is not held up.
        assert_eq!(gate.run("b", async { 5 }).await.0, 5);
        held.pop();
        assert_eq!(next.await.unwrap(), 99);
    }
}
