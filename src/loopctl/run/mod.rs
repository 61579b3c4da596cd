//! A run: its directory (`<state>/loop<N>/`) and the runner, whose methods
//! are spread over one file per part of the pipeline.
//!
//! ## Map: the runner's state and the files that use it
//!
//! [`runner::Runner`] owns the run and wires its parts ([`parts`]):
//!
//! | part | fields | used by |
//! |---|---|---|
//! | identity, config | `ops`, `cfg`, `run` | nearly every step file |
//! | board view | `board`, `board_reported` | boardsync, steps, runner |
//! | recorded state | `status` (`run.json`) | all but bounded, limits, nudge, stall |
//! | `slots` | `lanes`, `jobs`, `limited`, `quiet`, `held`, `nudges` | steps, rounds, finish, escalate, limits, nudge, stall, tuning, drive, resume |
//! | `queues` | `landing`, `reviews`, `carried` | drive, gatecheck, landing, resume, escalate, steps, rounds |
//! | `clocks` | `started`, `spent_before`, `persisted`, `last_pass` | bounded, drive, runner, escalate |
//! | `locks` | `run`, `board` | runner, resume |
//! | `tuning` | `state`, `samples`, `iteration_of` | tuning, runner |
//! | guards, outputs | `consecutive_blockers`, `stop`, `paused`, `mode`, `rulings`, `notifier`, `resume_tag`, `say` | drive, escalate, steps, landing, finish, limits, rounds, resume, runner |
//!
//! ## Map: a task's fields by phase
//!
//! [`runner::TaskState`] is flat (as `run.json` has it); each optional field
//! matters only in some phases:
//!
//! - `tier`: set on start and kept (steps, resume).
//! - `agent`, `lane`, `job`, `worktree`, `branch`, `first_dispatch`: set when
//!   implementing starts (steps), kept through Reviewing and Landing, read by
//!   resume, landing and the tripwire; `lane`/`job` change per round (rounds).
//! - `reviewer`, `candidate_sha256`, `candidate_base`, `prior_candidate`:
//!   set when a candidate is captured and goes to review (steps), read in
//!   Reviewing and Landing.
//! - `round`, `onto`, `rebases`, `rebase`, `findings`: repair and rebase
//!   rounds (rounds, the tripwire), from Implementing to Landing.
//! - `sha`: Landed only (landing).
//! - `reason`, `resume`, `cause`: Held and Parked (boardsync, steps, limits,
//!   landing, resume, finish); `limit_parks`, `stall`, `excluded_s`: any live
//!   phase (limits, stall, escalate).
//!
//! Fields outlive their phase on disk, so an enum per phase must carry them
//! or `run.json` changes: a parked task keeps its `lane` (only `job` is
//! cleared); a Landing task the run stopped before its turn has `reason`
//! and `resume`; a batch landing writes Landed with `sha` while `lane` and
//! `job` are still set (`landed` clears them after); a task back from a
//! usage-limit park returns to Implementing or Reviewing with everything it
//! had.

pub(in crate::loopctl) mod boardsync;
mod bounded;
pub mod cause;
pub mod closeonly;
mod drive;
mod escalate;
mod finish;
mod gatecheck;
mod landing;
pub mod limits;
pub mod nudge;
pub(in crate::loopctl) mod parts;
pub mod resume;
pub mod rounds;
pub mod run_state;
pub mod rundir;
pub mod runner;
mod setup;
mod stall;
mod steps;
pub mod task;
mod tuning;
