//! drover's infrastructure: the git runner, procfs, the state dir's layout, the store (atomic writes, locks, JSONL), paths, evidence, exit codes, time, shell quoting, backoff.

pub use drover_proto::proto;

pub mod backoff;
pub mod evidence;
pub mod exit;
pub mod git;
pub mod paths;
pub mod procfs;
pub mod shell;
pub mod statedir;
pub mod store;
pub mod time;
