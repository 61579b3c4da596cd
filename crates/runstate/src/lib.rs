//! A loop run's state on disk: what `run.json` holds, the run dirs of a
//! state dir, whether a run's loop process still runs, and the controls an
//! operator sets on a run. The loop writes it; `loop status`, `top` and
//! `drover web` read it without depending on the loop.

pub use drover_base::{exit, procfs, statedir, store, time};
pub use drover_engine::registry;
pub use drover_proto::proto;

pub mod runstate;
