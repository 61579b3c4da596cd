//! The `events.follow` connection: answer once, then one JSON frame per event
//! (the replay after `since`, then live ones) until the client hangs up.

use super::feed::{Filter, missed_line};
use super::protocol::{FrameKind, Response, encode, encode_json};
use super::server::Sup;
use crate::proto::args::EventsFollow;
use crate::proto::reply::Following;
use std::sync::Arc;
use tokio::io::AsyncWriteExt;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::broadcast::error::RecvError;

pub(super) async fn follow(
    sup: Arc<Sup>,
    id: u64,
    args: EventsFollow,
    mut rd: OwnedReadHalf,
    mut wr: OwnedWriteHalf,
) {
    let since = args.since;
    let filter = Filter {
        pane: args.pane,
        kind: args.kind,
    };
    let mut sub = sup.feed.subscribe(since);
    let ok = Response::reply(
        id,
        &Following {
            last_seq: sub.last_seq,
            since,
            pid: std::process::id(),
        },
    );
    if wr.write_all(&encode_json(&ok)).await.is_err() {
        return;
    }
    let frame = |line: &str| encode(FrameKind::Json, line.as_bytes());
    if sub.missed > 0 {
        let first = sub.missed_through + 1 - sub.missed;
        if wr
            .write_all(&frame(&missed_line(first, sub.missed)))
            .await
            .is_err()
        {
            return;
        }
    }
    let mut last = sub.last_seq;
    for ev in std::mem::take(&mut sub.replay) {
        if filter.matches(&ev) && wr.write_all(&frame(&ev.line)).await.is_err() {
            return;
        }
    }
    // Anything the client sends, or its hanging up, ends the stream.
    let hangup = tokio::spawn(async move {
        let _ = super::frame_limit::read_frame(&mut rd, &super::frame_limit::BUDGET).await;
    });
    let mut hangup = hangup;
    loop {
        tokio::select! {
            got = sub.live.recv() => match got {
                Ok(ev) => {
                    last = ev.seq;
                    if filter.matches(&ev) && wr.write_all(&frame(&ev.line)).await.is_err() {
                        break;
                    }
                }
                Err(RecvError::Lagged(n)) => {
                    let line = missed_line(last + 1, n);
                    last += n;
                    if wr.write_all(&frame(&line)).await.is_err() {
                        break;
                    }
                }
                Err(RecvError::Closed) => break,
            },
            _ = &mut hangup => break,
        }
    }
    hangup.abort();
}
