//! How much `top --fleet` keeps, whatever the fleet's stream holds: hosts,
//! panes per host and the length of what it shows (a stream of ghost panes
//! or hosts cannot grow its memory).

use super::model::PaneCell;
use std::collections::BTreeMap;

/// The most panes kept for one host: past it, the pane whose newest event
/// is oldest is forgotten (a stream full of ghost panes cannot grow the model).
pub const MAX_PANES_PER_HOST: usize = 256;
/// The most killed pane names kept for one host (past it, the first by name
/// goes: a late `exited` for a pane no longer held changes nothing anyway).
pub const MAX_KILLED_PER_HOST: usize = 256;
/// The most hosts whose feeds are kept; a host no longer present is
/// forgotten first (and at every presence update).
pub const MAX_HOSTS: usize = 128;
/// The longest pane name taken (longer: the event is skipped) and the
/// longest agent, state or kind kept (cut), in chars.
pub const MAX_FIELD_CHARS: usize = 128;

/// Room for one more pane in `panes`: the one whose newest event is oldest goes.
pub(super) fn make_room(panes: &mut BTreeMap<String, PaneCell>) {
    while panes.len() >= MAX_PANES_PER_HOST {
        let oldest = panes
            .iter()
            .min_by_key(|(_, c)| c.last_ms.max(c.since_ms))
            .map(|(k, _)| k.clone());
        match oldest {
            Some(k) => panes.remove(&k),
            None => break,
        };
    }
}
