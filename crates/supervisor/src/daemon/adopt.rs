//! At start-up, take back the panes a previous supervisor of this state dir
//! left running on a backend that outlives it (tmux): their screens are
//! re-seeded and their observations continue.

use super::server::{AdoptedEvents, Sup, insert_adopted, lock};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

pub(super) async fn adopt(sup: &Arc<Sup>) {
    let s = sup.clone();
    let adopted = tokio::task::spawn_blocking(move || {
        let handles: Mutex<HashMap<String, AdoptedEvents>> = Mutex::new(HashMap::new());
        let panes = s.hosts.adopt(&|name: &str| {
            let (events, keep) = s.adopted_events();
            lock(&handles).insert(name.to_string(), keep);
            events
        });
        let mut handles = handles.into_inner().unwrap_or_else(|e| e.into_inner());
        panes
            .into_iter()
            .filter_map(|p| {
                let h = handles.remove(p.name())?;
                Some((p, h))
            })
            .collect::<Vec<_>>()
    })
    .await
    .unwrap_or_default();
    for (pane, events) in adopted {
        tracing::info!(pane = %pane.name(), backend = %pane.backend(), "pane re-adopted");
        insert_adopted(sup, pane, events);
    }
}
