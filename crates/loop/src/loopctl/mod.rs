//! The loop (`drover loop run`, described in `LOOP.md`): a Backlog.md board
//! worked through lanes — implement, capture, review, gate, land on an
//! integration branch, close out.
//!
//! One folder per concern; imports run one way, each room using only the
//! ones above it in this list:
//! - the seam: `error` ([`LoopError`]), [`ops`] (what the runner needs from
//!   lanes and dispatch, as a trait, and the data that crosses it),
//!   [`sha256`], [`child`] (the loop's own bounded child processes);
//! - [`board`]: the Backlog.md directory, the charter, which tasks may start
//!   (`ready`, `loop lint queue`) and the lane's brief;
//! - [`land`]: the loop's git, a lane's candidate patch, the integration
//!   branch and the gate, the close-out;
//! - [`review`]: a read-only reviewer's stated verdict and its watcher;
//! - [`night`]: what unattended runs are made of — every timing (`clock`),
//!   guards, controls (`control.json`), settings, overnight mode,
//!   the convergence tripwire, notifications, lane autotune, stall classes;
//! - [`lanes`]: the trait over `drover lane` lanes (real or sim agents, the
//!   implementer's lease renewal) and over bare sim panes;
//! - [`run`]: the run dir (`<state>/loop<N>/`) and the runner — the pipeline
//!   over the trait, its loop, steps, landing, resume, close-out, usage-limit
//!   parking, escalations and stall classes;
//! - [`start`]: a run started from what `loop run` is given — the resumed
//!   run's record, the repository, charter and board checked, the clock,
//!   the lanes here or on a fleet — and driven to its end.

pub mod board;
pub mod child;
mod error;
pub mod land;
pub mod lanes;
pub mod night;
pub mod ops;
pub mod review;
pub mod run;
pub mod sha256;
pub mod start;

pub use error::LoopError;
pub use night::stall::class as stall_class;
pub use run::limits::{backoff, parse_resets_at, resume_at};
