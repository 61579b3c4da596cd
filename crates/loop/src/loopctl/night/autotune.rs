//! Lane autotune (`--lane-autotune`, `LOOP.md` "Lane autotune"): a lane
//! much slower than its agent's other lanes gets one effort step more (when
//! it also fails) or one step less (when it does not). A pure decision over
//! the finished turns of the previous iterations; the runner records every
//! recommendation in `DECISIONS.md` and puts the effort into the launch of
//! the next lane of that (role, agent). Off, nothing about the run changes.

use crate::loopctl::ops::Role;
use crate::registry::Agent;
use std::collections::BTreeMap;
use std::time::Duration;

/// A lane is slower than its agent's lanes past `k ×` their median.
pub const DEFAULT_K: f64 = 2.0;
/// Iterations looked at: the fail rate's window and the median's.
pub const WINDOW: u32 = 3;
/// Fewest turns of a (role, agent) in the window before its fail rate counts.
pub const MIN_OBSERVATIONS: usize = 2;
/// A fail rate above this makes a slow lane stronger, not faster.
pub const FAIL_THRESHOLD: f64 = 0.5;
/// Iterations after a change in which that (role, agent) is not changed again.
pub const COOLDOWN: u32 = 2;
/// Fewest timed lanes of an agent for a median to mean anything.
pub const MIN_TIMED: usize = 2;

/// Claude Code's effort levels (`--effort <level>`), weakest first.
pub const CLAUDE_LADDER: [&str; 5] = ["low", "medium", "high", "xhigh", "max"];
/// Codex's reasoning efforts (`-c model_reasoning_effort=<level>`), weakest first.
pub const CODEX_LADDER: [&str; 5] = ["minimal", "low", "medium", "high", "xhigh"];

/// An agent's ladder.
pub fn ladder(agent: Agent) -> &'static [&'static str; 5] {
    match agent {
        Agent::Claude => &CLAUDE_LADDER,
        Agent::Codex => &CODEX_LADDER,
    }
}

/// The rung a lane runs at before any change: the agent's own default
/// (Claude Code `high`, Codex `medium`).
pub fn default_rung(agent: Agent) -> usize {
    match agent {
        Agent::Claude => 2,
        Agent::Codex => 2,
    }
}

/// A lane's key: what an effort is set for.
pub type Key = (Role, Agent);

/// One finished agent turn (a lane's elapsed time and whether it failed).
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The run's iteration of the task whose turn it was (1-based).
    pub iteration: u32,
    pub role: Role,
    pub agent: Agent,
    /// Dispatch to outcome, on the loop's clock.
    pub elapsed: Duration,
    pub failed: bool,
    /// Finished since the tuner last looked (only fresh turns are decided on).
    pub fresh: bool,
}

/// The tuner's memory: efforts set, and cooldowns left (in iterations).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct State {
    /// Rungs set by the tuner; a key without one runs at its default.
    pub rungs: BTreeMap<Key, usize>,
    pub cooldown: BTreeMap<Key, u32>,
}

pub use crate::runstate::records::Saved;

impl State {
    /// The state as `run.json` keeps it (a resume goes on from it).
    pub fn save(&self) -> Vec<Saved> {
        self.rungs
            .iter()
            .map(|(key, rung)| Saved {
                role: key.0,
                agent: key.1,
                effort: ladder(key.1)[*rung].to_string(),
                cooldown: self.cooldown.get(key).copied().unwrap_or(0),
            })
            .collect()
    }

    /// The state `save` kept; a level not on the agent's ladder is dropped
    /// (that lane starts at its default).
    pub fn restore(saved: &[Saved]) -> State {
        let mut st = State::default();
        for s in saved {
            let key = (s.role, s.agent);
            if let Some(rung) = ladder(s.agent).iter().position(|l| *l == s.effort) {
                st.rungs.insert(key, rung);
                if s.cooldown > 0 {
                    st.cooldown.insert(key, s.cooldown);
                }
            }
        }
        st
    }

    /// The effort level the next lane of `key` starts with (`None`: the
    /// tuner never changed it, so the launch gets no effort flag).
    pub fn effort(&self, key: Key) -> Option<&'static str> {
        self.rungs.get(&key).map(|r| ladder(key.1)[*r])
    }
}

/// Stronger (more thinking) or faster (less).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Strengthen,
    Accelerate,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Strengthen => "strengthen",
            Direction::Accelerate => "accelerate",
        }
    }
}

/// One recommendation, actuated or not.
#[derive(Debug, Clone, PartialEq)]
pub struct Recommendation {
    pub role: Role,
    pub agent: Agent,
    /// `None`: no decision could be made (too few timed lanes).
    pub direction: Option<Direction>,
    pub elapsed: Duration,
    /// The median of the agent's timed lanes in the window, and how many.
    pub median: Option<Duration>,
    pub timed: usize,
    /// Failed turns and turns of this (role, agent) in the window.
    pub failed: usize,
    pub observed: usize,
    pub from: &'static str,
    pub to: &'static str,
    /// Set when the next lane of this (role, agent) gets `to`.
    pub actuated: bool,
    /// Why it was not actuated (empty when it was).
    pub held: String,
}

impl Recommendation {
    /// One line for `DECISIONS.md`.
    pub fn describe(&self, k: f64) -> String {
        let key = format!("{}/{}", self.role.as_str(), self.agent.as_str());
        let secs = |d: Duration| format!("{:.1} s", d.as_secs_f64());
        let Some(dir) = self.direction else {
            return format!(
                "{key}: {} (not actuated: {})",
                secs(self.elapsed),
                self.held
            );
        };
        let median = self.median.map_or("-".into(), secs);
        let head = format!(
            "{key}: {} > {k} × median {median} of {}'s {} lanes; failed {}/{} → {} {} → {}",
            secs(self.elapsed),
            self.agent.as_str(),
            self.timed,
            self.failed,
            self.observed,
            dir.as_str(),
            self.from,
            self.to
        );
        if self.actuated {
            format!(
                "{head} (actuated: the next {key} lane starts at {})",
                self.to
            )
        } else {
            format!("{head} (not actuated: {})", self.held)
        }
    }
}

fn median(mut v: Vec<Duration>) -> Option<Duration> {
    v.sort();
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2),
    }
}

/// Decide before iteration `next` starts, over the turns of the previous
/// [`WINDOW`] iterations (pure): the new state and every recommendation.
pub fn tune(state: &State, samples: &[Sample], next: u32, k: f64) -> (State, Vec<Recommendation>) {
    let mut st = state.clone();
    let mut changed = Vec::new();
    let window: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.iteration < next && s.iteration + WINDOW >= next)
        .collect();
    // The newest fresh turn of each (role, agent) is the lane decided on.
    let mut newest: BTreeMap<Key, &Sample> = BTreeMap::new();
    for s in window.iter().filter(|s| s.fresh) {
        newest.insert((s.role, s.agent), s);
    }
    let mut recs = Vec::new();
    for (key, lane) in newest {
        let (role, agent) = key;
        // Claude and Codex are never compared: their times mean different things.
        let timed: Vec<Duration> = window
            .iter()
            .filter(|s| s.agent == agent)
            .map(|s| s.elapsed)
            .collect();
        let obs: Vec<bool> = window
            .iter()
            .filter(|s| (s.role, s.agent) == key)
            .map(|s| s.failed)
            .collect();
        let failed = obs.iter().filter(|f| **f).count();
        let rung = st
            .rungs
            .get(&key)
            .copied()
            .unwrap_or_else(|| default_rung(agent));
        let lad = ladder(agent);
        let mut rec = Recommendation {
            role,
            agent,
            direction: None,
            elapsed: lane.elapsed,
            median: None,
            timed: timed.len(),
            failed,
            observed: obs.len(),
            from: lad[rung],
            to: lad[rung],
            actuated: false,
            held: String::new(),
        };
        if timed.len() < MIN_TIMED {
            rec.held = format!(
                "{} timed {} lane(s) in the last {WINDOW} iterations, fewer than {MIN_TIMED}",
                timed.len(),
                agent.as_str()
            );
            recs.push(rec);
            continue;
        }
        let Some(m) = median(timed) else { continue };
        rec.median = Some(m);
        if lane.elapsed.as_secs_f64() <= k * m.as_secs_f64() {
            // Not a slow lane: nothing to recommend.
            continue;
        }
        let failing =
            obs.len() >= MIN_OBSERVATIONS && failed as f64 / obs.len() as f64 > FAIL_THRESHOLD;
        let dir = if failing {
            Direction::Strengthen
        } else {
            Direction::Accelerate
        };
        rec.direction = Some(dir);
        let to = match dir {
            Direction::Strengthen => (rung + 1).min(lad.len() - 1),
            Direction::Accelerate => rung.saturating_sub(1),
        };
        rec.to = lad[to];
        let cooling = st.cooldown.get(&key).copied().unwrap_or(0);
        if cooling > 0 {
            rec.held = format!("cooling down, {cooling} iteration(s) left");
        } else if to == rung {
            rec.held = format!("already at {} ({} end of the ladder)", lad[rung], {
                if dir == Direction::Strengthen {
                    "the top"
                } else {
                    "the bottom"
                }
            });
        } else {
            rec.actuated = true;
            st.rungs.insert(key, to);
            st.cooldown.insert(key, COOLDOWN);
            changed.push(key);
        }
        recs.push(rec);
    }
    // A cooldown counts iterations: one passes with each call after the change.
    for (key, left) in st.cooldown.iter_mut() {
        if !changed.contains(key) {
            *left = left.saturating_sub(1);
        }
    }
    st.cooldown.retain(|_, left| *left > 0);
    (st, recs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use Agent::{Claude, Codex};
    use Role::{Implementer as I, Reviewer as R};

    fn s(iteration: u32, role: Role, agent: Agent, secs: u64, failed: bool) -> Sample {
        Sample {
            iteration,
            role,
            agent,
            elapsed: Duration::from_secs(secs),
            failed,
            fresh: iteration == 3,
        }
    }

    /// Three iterations: Claude implements 10 s each time, Codex reviews
    /// 10 s, except iteration 3's implementer (`slow` s, failing or not).
    fn night(slow: u64, fails: [bool; 3]) -> Vec<Sample> {
        (1..=3)
            .flat_map(|i| {
                let t = if i == 3 { slow } else { 10 };
                [
                    s(i, I, Claude, t, fails[i as usize - 1]),
                    s(i, R, Claude, 10, false),
                    s(i, R, Codex, 10, false),
                ]
            })
            .collect()
    }

    fn one(state: &State, samples: &[Sample]) -> (State, Vec<Recommendation>) {
        tune(state, samples, 4, DEFAULT_K)
    }

    fn at(key: Key, rung: usize) -> State {
        State {
            rungs: [(key, rung)].into(),
            cooldown: Default::default(),
        }
    }

    #[test]
    fn slower_and_passing_accelerates_one_step() {
        let (st, recs) = one(&State::default(), &night(40, [false; 3]));
        let r = recs.iter().find(|r| r.role == I).unwrap();
        assert_eq!(r.direction, Some(Direction::Accelerate));
        assert_eq!((r.from, r.to, r.actuated), ("high", "medium", true));
        assert_eq!(st.effort((I, Claude)), Some("medium"));
        assert_eq!(st.cooldown.get(&(I, Claude)), Some(&COOLDOWN));
        assert_eq!(st.effort((R, Codex)), None, "an unchanged lane has no flag");
        assert!(
            r.describe(DEFAULT_K)
                .contains("actuated: the next implementer/claude lane starts at medium")
        );
    }

    #[test]
    fn slower_and_failing_strengthens_one_step() {
        let (st, recs) = one(&State::default(), &night(40, [false, true, true]));
        let r = recs.iter().find(|r| r.role == I).unwrap();
        assert_eq!(r.direction, Some(Direction::Strengthen));
        assert_eq!((r.failed, r.observed), (2, 3));
        assert_eq!(st.effort((I, Claude)), Some("xhigh"));
    }

    #[test]
    fn half_failing_is_not_above_the_threshold() {
        let mut v = night(40, [false, false, true]);
        v.retain(|s| !(s.iteration == 1 && s.role == I));
        let (_, recs) = one(&State::default(), &v);
        let r = recs.iter().find(|r| r.role == I).unwrap();
        assert_eq!((r.failed, r.observed), (1, 2));
        assert_eq!(r.direction, Some(Direction::Accelerate));
    }

    #[test]
    fn one_observation_of_failure_does_not_count() {
        // Only iteration 3's implementer turn is in the window: it failed,
        // but one observation is no fail rate, so the slow lane accelerates.
        let v = vec![
            s(3, I, Claude, 40, true),
            s(3, R, Claude, 10, false),
            s(2, R, Claude, 10, false),
        ];
        let (_, recs) = one(&State::default(), &v);
        assert_eq!(recs[0].observed, 1);
        assert_eq!(recs[0].direction, Some(Direction::Accelerate));
    }

    #[test]
    fn too_few_timed_lanes_decide_nothing_but_say_so() {
        let v = vec![s(3, I, Codex, 400, true), s(3, R, Claude, 10, false)];
        let (st, recs) = one(&State::default(), &v);
        assert_eq!(st, State::default());
        assert_eq!(recs.len(), 2);
        assert!(recs.iter().all(|r| r.direction.is_none() && !r.actuated));
        assert!(
            recs[0]
                .describe(DEFAULT_K)
                .contains("not actuated: 1 timed")
        );
    }

    #[test]
    fn exactly_k_times_the_median_is_not_slower() {
        let (st, recs) = one(&State::default(), &night(20, [false; 3]));
        assert!(recs.is_empty(), "{recs:?}");
        assert_eq!(st, State::default());
        let (_, recs) = one(&State::default(), &night(21, [false; 3]));
        assert_eq!(recs.len(), 1);
    }

    #[test]
    fn clamped_at_both_ends_recorded_not_actuated() {
        let (st, recs) = one(&at((I, Claude), 0), &night(40, [false; 3]));
        assert_eq!(st.effort((I, Claude)), Some("low"));
        assert!(!recs[0].actuated);
        assert!(recs[0].held.contains("already at low"), "{}", recs[0].held);
        let (st, recs) = one(&at((I, Claude), 4), &night(40, [true; 3]));
        assert_eq!(st.effort((I, Claude)), Some("max"));
        assert!(!recs[0].actuated);
        assert!(recs[0].held.contains("the top"));
    }

    #[test]
    fn a_change_cools_down_for_two_iterations() {
        let v = night(40, [false; 3]);
        let (st, _) = one(&State::default(), &v);
        // The same evidence, fresh again, for two more iterations.
        let shift = |d: u32| -> Vec<Sample> {
            v.iter()
                .map(|s| Sample {
                    iteration: s.iteration + d,
                    fresh: s.iteration == 3,
                    ..s.clone()
                })
                .collect()
        };
        let (st, recs) = tune(&st, &shift(1), 5, DEFAULT_K);
        assert!(!recs[0].actuated && recs[0].held.contains("2 iteration(s) left"));
        let (st, recs) = tune(&st, &shift(2), 6, DEFAULT_K);
        assert!(!recs[0].actuated && recs[0].held.contains("1 iteration(s) left"));
        assert_eq!(st.effort((I, Claude)), Some("medium"));
        let (st, recs) = tune(&st, &shift(3), 7, DEFAULT_K);
        assert!(recs[0].actuated, "{recs:?}");
        assert_eq!(st.effort((I, Claude)), Some("low"));
    }

    #[test]
    fn the_state_kept_in_run_json_comes_back_the_same() {
        let (st, _) = one(&State::default(), &night(40, [false; 3]));
        let saved = st.save();
        let json = serde_json::to_string(&saved).unwrap();
        assert!(json.contains(r#""effort":"medium""#), "{json}");
        let back: Vec<Saved> = serde_json::from_str(&json).unwrap();
        assert_eq!(State::restore(&back), st);
        let odd = vec![Saved {
            effort: "turbo".into(),
            ..saved[0].clone()
        }];
        assert_eq!(
            State::restore(&odd),
            State::default(),
            "an unknown level is dropped"
        );
    }

    #[test]
    fn claude_and_codex_medians_are_separate() {
        // Codex lanes take 100 s, Claude's 10 s: a 40 s Codex lane is fast
        // for Codex, and the Claude lanes are not compared with Codex's.
        let v: Vec<Sample> = (1..=3)
            .flat_map(|i| {
                [
                    s(i, I, Codex, if i == 3 { 40 } else { 100 }, false),
                    s(i, R, Codex, 100, false),
                    s(i, R, Claude, 10, false),
                ]
            })
            .collect();
        let (st, recs) = one(&State::default(), &v);
        assert!(recs.is_empty(), "{recs:?}");
        assert_eq!(st, State::default());
        // And a Codex ladder step is Codex's: medium → low.
        let (st, _) = one(
            &State::default(),
            &night(40, [false; 3])
                .into_iter()
                .map(|mut s| {
                    s.agent = if s.agent == Claude { Codex } else { Claude };
                    s
                })
                .collect::<Vec<_>>(),
        );
        assert_eq!(st.effort((I, Codex)), Some("low"));
    }

    #[test]
    fn only_the_last_three_iterations_count() {
        // An old slow turn (iteration 0) is outside the window of iteration 4.
        let mut v = night(10, [false; 3]);
        v.push(Sample {
            fresh: true,
            ..s(0, I, Claude, 400, false)
        });
        let (_, recs) = one(&State::default(), &v);
        assert!(recs.is_empty(), "{recs:?}");
    }
}
