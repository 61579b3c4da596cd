//! Each live lane's own range of TCP ports, for projects whose tests start
//! servers: `DROVER_PORT_BASE` in the lane's env (its record, its pane, the
//! loop's `setup:` and gate for it), ports `base..base+PORT_STEP` the lane's
//! own. A base is picked under the lane registry's lock, the lowest one no
//! recorded lane that is wanted up holds, so two live lanes never share one;
//! a lane taken down frees its base for the next lane.

use super::{Desired, LaneError, LaneRecord, LanesDoc};
use std::collections::BTreeSet;

/// The variable a lane's port base is given in.
pub const PORT_ENV: &str = crate::statedir::env::PORT_BASE;
/// Where the bases start when the operator sets no `DROVER_PORT_START`.
pub const DEFAULT_PORT_START: u16 = 20000;
/// Ports per lane.
pub const PORT_STEP: u16 = 100;
/// The operator's start of the range (a port number ≥ 1024), read by the
/// process that brings lanes up.
pub const START_ENV: &str = crate::statedir::env::PORT_START;

/// The port base recorded in a lane's env.
pub fn port_base(rec: &LaneRecord) -> Option<u16> {
    rec.env
        .iter()
        .find(|(k, _)| k == PORT_ENV)
        .and_then(|(_, v)| v.parse().ok())
}

/// The lowest base from `start`, in steps of [`PORT_STEP`], not in `taken`
/// and with its whole range below 65536 (pure).
pub fn first_free(taken: &BTreeSet<u16>, start: u16) -> Option<u16> {
    let mut base = start;
    loop {
        base.checked_add(PORT_STEP - 1)?;
        if !taken.contains(&base) {
            return Some(base);
        }
        base = base.checked_add(PORT_STEP)?;
    }
}

/// The start of the range: [`START_ENV`] when set, else the default.
pub fn range_start() -> Result<u16, LaneError> {
    match std::env::var(START_ENV) {
        Err(_) => Ok(DEFAULT_PORT_START),
        Ok(v) => match v.trim().parse::<u16>() {
            Ok(n) if n >= 1024 => Ok(n),
            _ => Err(LaneError::usage(
                START_ENV,
                format!("must be a port number from 1024 to 65435, not {v:?}"),
            )),
        },
    }
}

/// Give `rec` the lowest base free in `doc` (called under the lane
/// registry's lock, before `rec` is put in it); the base.
pub fn assign(doc: &LanesDoc, rec: &mut LaneRecord) -> Result<u16, LaneError> {
    let taken: BTreeSet<u16> = doc
        .lanes
        .iter()
        .filter(|r| r.desired == Desired::Up && r.lane_id != rec.lane_id)
        .filter_map(port_base)
        .collect();
    let start = range_start()?;
    let base = first_free(&taken, start).ok_or_else(|| {
        LaneError::Refused(format!(
            "no port range left for lane {}: {} live lanes hold every base from {start}",
            rec.lane_id,
            taken.len()
        ))
    })?;
    rec.env.retain(|(k, _)| k != PORT_ENV);
    rec.env.push((PORT_ENV.into(), base.to_string()));
    Ok(base)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lowest_free_base_in_steps() {
        let taken: BTreeSet<u16> = [20000, 20200].into_iter().collect();
        assert_eq!(first_free(&taken, 20000), Some(20100));
        assert_eq!(first_free(&BTreeSet::new(), 20000), Some(20000));
        let taken: BTreeSet<u16> = [20000, 20100].into_iter().collect();
        assert_eq!(first_free(&taken, 20000), Some(20200));
        // The last range must fit below 65536.
        assert_eq!(first_free(&BTreeSet::new(), 65500), None);
        assert_eq!(first_free(&BTreeSet::new(), 65436), Some(65436));
    }
}
