//! What the coordinator sees of the work-queue: every delivery of an item
//! to a host comes here too (a host pulls with its deliveries on
//! `drover.<fleet>.deliver.<host>.<agent>`, where only the server
//! publishes), so an attempt is handed out, and an item kept alive, only
//! for a delivery this process saw go to the host that asks.

use super::{Delivery, Shared, lock};
use crate::fleet::Names;
use crate::fleet::work::{self, WorkItem};
use futures_util::StreamExt;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a `start` waits for its delivery to be seen here (the server
/// sends it here before the host has it; this covers a busy reader).
pub(super) const SEEN_WITHIN: Duration = Duration::from_secs(2);

/// How often the hosts present are looked at for one not watched yet.
const HOSTS_EVERY: Duration = Duration::from_secs(1);

/// Keep the latest delivery of each of run `run`'s items; term an item of
/// one of `earlier` (runs of this state dir whose coordinator died: nobody
/// answers them), until the connection closes. A delivery carries the
/// item's own subject, so each host's delivery subject is listened on
/// apart: the hosts present, and any host that asked (`Shared::asked`).
pub(super) async fn watch(
    client: async_nats::Client,
    js: async_nats::jetstream::Context,
    shared: Arc<Mutex<Shared>>,
    names: Names,
    run: String,
    earlier: BTreeSet<String>,
) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(String, async_nats::Message)>();
    let mut watching: BTreeSet<String> = BTreeSet::new();
    loop {
        let mut hosts: Vec<String> = lock(&shared).asked.iter().cloned().collect();
        if let Ok(kv) = js.get_key_value(names.hosts_bucket()).await
            && let Ok(mut keys) = kv.keys().await
        {
            while let Some(Ok(k)) = keys.next().await {
                hosts.push(k);
            }
        }
        for host in hosts {
            if crate::fleet::subjects::check_id("host", &host).is_err() || watching.contains(&host)
            {
                continue;
            }
            let Ok(mut sub) = client.subscribe(names.deliver_subject(&host, "*")).await else {
                continue;
            };
            watching.insert(host.clone());
            tokio::spawn(host_bucket(js.clone(), names.clone(), host.clone()));
            let tx = tx.clone();
            tokio::spawn(async move {
                while let Some(m) = sub.next().await {
                    if tx.send((host.clone(), m)).is_err() {
                        return;
                    }
                }
            });
        }
        let until = tokio::time::Instant::now() + HOSTS_EVERY;
        while let Ok(Some((host, msg))) = tokio::time::timeout_at(until, rx.recv()).await {
            seen_one(&client, &shared, &names, &run, &earlier, &host, msg).await;
        }
    }
}

/// One delivery to `host`.
async fn seen_one(
    client: &async_nats::Client,
    shared: &Mutex<Shared>,
    names: &Names,
    run: &str,
    earlier: &BTreeSet<String>,
    host: &str,
    msg: async_nats::Message,
) {
    // A pull's end (no item within its wait) has no ack subject.
    let Some(ack) = msg.reply.as_ref().map(|r| r.to_string()) else {
        return;
    };
    let Some(info) = work::ack_info(&ack) else {
        return;
    };
    if info.stream != names.work_stream() || msg.payload.len() > work::MAX_ITEM {
        return;
    }
    let Ok(item) = serde_json::from_slice::<WorkItem>(&msg.payload) else {
        return;
    };
    if item.run == run {
        let mut s = lock(shared);
        let newer = s
            .deliveries
            .get(&info.stream_seq)
            .is_none_or(|d| d.delivered <= info.delivered);
        if newer {
            s.deliveries.insert(
                info.stream_seq,
                Delivery {
                    host: host.to_string(),
                    delivered: info.delivered,
                    ack,
                },
            );
        }
    } else if earlier.contains(&item.run) {
        let _ = client.publish(ack, "+TERM".into()).await;
    }
}

/// Whether the latest delivery of job `job`'s item is the `delivered`-th
/// and went to `host`, waiting up to [`SEEN_WITHIN`] for it to be seen;
/// its ack subject when so.
pub(super) async fn seen(
    shared: &Mutex<Shared>,
    job: &str,
    seq: u64,
    host: &str,
    delivered: i64,
    wait: Duration,
) -> Option<String> {
    let until = tokio::time::Instant::now() + wait;
    loop {
        if let Some(ack) = latest(shared, job, seq, host, delivered) {
            return Some(ack);
        }
        if tokio::time::Instant::now() >= until {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The ack subject of the delivery when it is job `job`'s item's latest,
/// the `delivered`-th, to `host`.
pub(super) fn latest(
    shared: &Mutex<Shared>,
    job: &str,
    seq: u64,
    host: &str,
    delivered: i64,
) -> Option<String> {
    let s = lock(shared);
    let r = s.remotes.get(job)?;
    if r.seq != Some(seq) {
        return None;
    }
    let d = s.deliveries.get(&seq)?;
    (d.host == host && d.delivered == delivered).then(|| d.ack.clone())
}

/// Make host `host`'s own object bucket, where it alone writes its patches
/// (a host's user may not make a stream), retried until it is made.
async fn host_bucket(js: async_nats::jetstream::Context, names: Names, host: String) {
    let mut delay = Duration::from_secs(1);
    let mut said = false;
    loop {
        match crate::fleet::objects::host_objects(&js, &names, &host).await {
            Ok(_) => return,
            Err(e) if !said => {
                said = true;
                tracing::warn!(host = %host, error = %e, "cannot make the host's object bucket; retrying");
            }
            Err(_) => {}
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(30));
    }
}
