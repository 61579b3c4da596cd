//! A run: its directory (`<state>/loop<N>/`), its state, and the runner
//! whose steps move that state, one file per part of the pipeline.
//!
//! ## Map: the run's state and the files that use it
//!
//! [`runner::Runner`] is the lanes it works through (`ops`, a
//! [`LaneOps`](crate::loopctl::ops::LaneOps)), its console (`say`) and the
//! run's state, a `state::Run` (`self.run`). What needs no lane (the
//! clock, decisions, task lookups, `persist`) is `Run`'s own; the steps are
//! the runner's. `Run`'s parts (`parts`):
//!
//! | part | fields | used by |
//! |---|---|---|
//! | identity, config | `cfg`, `dir` | nearly every step file |
//! | `board` | `view`, `reported` | boardsync, steps, runner |
//! | recorded state | `status` (`run.json`) | all but bounded, limits, nudge, stall |
//! | `slots` | `lanes`, `jobs`, `limited`, `quiet`, `held`, `nudges`, `usage_lanes`, `usage_jobs` | steps, rounds, finish, escalate, limits, nudge, stall, tuning, drive, resume, cost |
//! | `queues` | `landing`, `reviews`, `carried` | drive, gatecheck, landing, resume, escalate, steps, rounds |
//! | `clocks` | `started`, `spent_before`, `persisted`, `last_pass` | bounded, drive, runner, escalate |
//! | `locks` | `run`, `board` | runner, resume |
//! | `tuning` | `state`, `samples`, `iteration_of` | tuning, runner |
//! | `controls` | `consecutive_blockers`, `stop`, `paused`, `mode`, `rulings` | drive, escalate, steps, landing, finish, limits, rounds, runner |
//! | outputs | `notifier`, `resume_tag` | drive, escalate, finish, resume, runner |
//!
//! ## Map: a task's state by phase
//!
//! [`task::TaskState`] keeps what outlives phases (`id`, `title`, `tier`,
//! `agent`, `limit_parks`, `stall`, `first_dispatch`, `excluded_s`,
//! `findings`, `usage`) beside a [`task::TaskPhase`] whose variants carry what each
//! phase has:
//!
//! - `Held`, `Ready`: a [`task::Note`] only (`reason`, `resume`, `cause`:
//!   boardsync, steps, finish); no work.
//! - `Implementing`, `Reviewing`, `Landing`, `Parked`: a [`task::Work`] (lane,
//!   job, worktree, branch, reviewer, round, candidate, rebase rounds: set by
//!   steps and rounds, read by resume, landing and the tripwire) and a note.
//!   A task parked before it started has an empty work.
//! - `Landed`: its `sha` (landing), with its work and note.
//!
//! The note outlives its phase as `run.json` always kept it: a Landing task
//! the run stopped before its turn says so, and a round sent back from
//! landing keeps it until a step clears it. `run.json` holds a task flat
//! ([`task::TaskRecord`]); loading refuses a record no phase can hold (work
//! on a Held or Ready task, a `sha` on one not Landed, Landed with none, an
//! unreadable `first_dispatch`).

pub(in crate::loopctl) mod boardsync;
mod bounded;
pub mod cause;
pub mod closeonly;
mod cost;
mod drive;
mod escalate;
mod finish;
mod gatecheck;
mod landing;
pub mod limits;
pub mod nudge;
mod park;
pub(in crate::loopctl) mod parts;
pub mod resume;
pub mod rounds;
pub mod run_state;
pub mod rundir;
pub mod runner;
mod setup;
mod stall;
mod state;
mod steps;
pub mod task;
mod tuning;
