//! An optional trace of the states the sim draws, for the detection-latency
//! benchmark (`bench/latency.rs`): one line `<unix_time_ns> <state>` appended
//! when a frame showing a new state is written to the terminal. Off unless
//! [`TRACE_ENV`] names a file.

use std::fs::File;
use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

/// Environment variable naming the trace file (appended to; created if absent).
pub const TRACE_ENV: &str = crate::statedir::env::SIM_TRACE;

/// Writes a line per state change; unbuffered, so each line is on disk when
/// `record` returns.
pub struct Trace {
    file: File,
    last: Option<&'static str>,
}

impl Trace {
    /// Open the trace named by [`TRACE_ENV`]; `Ok(None)` when it is unset.
    pub fn from_env() -> std::io::Result<Option<Trace>> {
        let Some(path) = std::env::var_os(TRACE_ENV).filter(|p| !p.is_empty()) else {
            return Ok(None);
        };
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(Some(Trace { file, last: None }))
    }

    /// Note that a frame showing `state` was written at `at`.
    pub fn record(&mut self, state: &'static str, at: SystemTime) {
        if let Some(line) = line(&mut self.last, state, at) {
            // A trace that cannot be written must not stop the agent.
            let _ = self.file.write_all(line.as_bytes());
        }
    }
}

/// The line for `state` when it differs from `last` (which it then becomes).
fn line(last: &mut Option<&'static str>, state: &'static str, at: SystemTime) -> Option<String> {
    if *last == Some(state) {
        return None;
    }
    *last = Some(state);
    let ns = at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    Some(format!("{ns} {state}\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn only_changes_are_traced_with_nanosecond_stamps() {
        let t = UNIX_EPOCH + Duration::new(1_700_000_000, 123);
        let mut last = None;
        assert_eq!(
            line(&mut last, "idle", t).as_deref(),
            Some("1700000000000000123 idle\n")
        );
        assert_eq!(line(&mut last, "idle", t), None, "a redraw is not a change");
        assert_eq!(
            line(&mut last, "working", t).as_deref(),
            Some("1700000000000000123 working\n")
        );
    }
}
