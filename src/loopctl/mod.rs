//! The loop (`drover loop run`, described in `LOOP.md`): a Backlog.md board
//! worked through lanes — implement, capture, review, gate, land on an
//! integration branch, close out.
//!
//! Layers, lowest first; each only uses the ones above it in this list:
//! - [`sha256`], [`board`] (the Backlog.md directory), [`charter`];
//! - [`ready`] (which tasks may start, the task pool, `loop lint queue`),
//!   [`brief`] (the lane's first message), [`rundir`] (`<state>/loop<N>/`);
//! - [`capture`] (a lane's candidate patch), [`land`] (the integration branch
//!   and the gate), [`closeout`];
//! - [`ops`] (what the runner needs from lanes and dispatch, as a trait) and
//!   [`runner`] (the pipeline over it); [`lanes_ops`] implements the trait
//!   over `drover lane` lanes (real agents or sim agents, [`renew`] keeping
//!   an implementer's lease alive, [`verdict`] reading a read-only
//!   reviewer's stated verdict), [`simlanes`] over bare sim panes;
//! - for unattended runs: [`clock`] (every timing), [`guards`], [`control`]
//!   (`control.json`), [`settings`], [`overnight`] (owner present or not),
//!   [`tripwire`] (convergence); the runner's loop, usage-limit parking,
//!   escalations and stall classes live beside it.

pub mod autotune;
pub mod board;
pub mod brief;
pub mod capture;
pub mod charter;
pub mod clock;
pub mod closeout;
pub mod control;
mod drive;
mod error;
pub mod git;
pub mod guards;
pub mod land;
mod landing;
pub mod lanes_ops;
mod limits;
pub use limits::{backoff, parse_resets_at, resume_at};
pub mod notify;
pub mod ops;
pub mod overnight;
pub mod ready;
pub mod renew;
pub mod resume;
pub mod rundir;
pub mod runner;
pub mod settings;
pub mod sha256;
pub mod simlanes;
mod stall;
pub use stall::class as stall_class;
mod escalate;
mod finish;
mod steps;
pub mod tripwire;
mod tuning;
pub mod verdict;
pub mod verdict_watch;

pub use error::LoopError;
