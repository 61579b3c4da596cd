//! How a host takes a step: it pulls with its deliveries on its own
//! subject (`drover.<fleet>.deliver.<host>.<agent>`), and a delivery is
//! known by its ack subject (the how-manieth delivery of which stream
//! sequence), which the coordinator reads too.

use super::{FleetError, Names};
use std::time::Duration;

/// One delivery of an item, as its ack subject
/// (`$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.…`) says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AckInfo {
    pub stream: String,
    pub consumer: String,
    pub delivered: i64,
    pub stream_seq: u64,
}

/// The delivery an ack subject names (both the short form and the one with
/// a domain and account hash); None for anything else.
pub fn ack_info(subject: &str) -> Option<AckInfo> {
    let t: Vec<&str> = subject.split('.').collect();
    if t.len() < 9 || t[0] != "$JS" || t[1] != "ACK" {
        return None;
    }
    // $JS.ACK.<stream>.<consumer>.<dc>.<sseq>.<cseq>.<ts>.<pending>, or
    // $JS.ACK.<domain>.<hash>.<stream>.<consumer>.<dc>.<sseq>.… (12 tokens).
    let at = if t.len() == 9 { 2 } else { 4 };
    if t.len() < at + 7 {
        return None;
    }
    Some(AckInfo {
        stream: t[at].to_string(),
        consumer: t[at + 1].to_string(),
        delivered: t[at + 2].parse().ok()?,
        stream_seq: t[at + 3].parse().ok()?,
    })
}

/// Ask `consumer` of the work stream for one item, delivered on `deliver`
/// (a subject this host listens on), waiting at most `expires`.
pub async fn pull_one(
    client: &async_nats::Client,
    names: &Names,
    consumer: &str,
    deliver: &str,
    expires: Duration,
) -> Result<(), FleetError> {
    let body = serde_json::json!({
        "batch": 1,
        "expires": expires.as_nanos() as u64,
    });
    client
        .publish_with_reply(
            format!(
                "$JS.API.CONSUMER.MSG.NEXT.{}.{consumer}",
                names.work_stream()
            ),
            deliver.to_string(),
            body.to_string().into(),
        )
        .await
        .map_err(|e| FleetError::bus("pull from the work-queue", e))
}
