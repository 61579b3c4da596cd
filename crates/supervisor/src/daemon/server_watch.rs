//! A read-only attach (`attach -r`): the pane's screen drawn from the model
//! on the client's terminal, redrawn when it changes, until detach, pane exit
//! or disconnect. A watcher takes no attach slot, so it never displaces the
//! attached writer (and a writer never kicks it); its input and size are
//! ignored.

use super::protocol::{Frame, FrameKind, Response, encode, encode_json};
use super::server::{Entry, Sup};
use crate::proto::reply::Attached;
use crate::proto::{AttachControl, AttachEvent};
use std::sync::Arc;
use tokio::io::AsyncWriteExt;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

pub(super) async fn watch(
    sup: Arc<Sup>,
    entry: Arc<Entry>,
    id: u64,
    name: String,
    mut rd: tokio::io::BufReader<OwnedReadHalf>,
    mut wr: OwnedWriteHalf,
) {
    let pane = entry.pane.clone();
    // Subscribed before the first frame: a change after it is not missed.
    let mut output = entry.output.subscribe();
    let mut epoch = sup.epoch.subscribe();
    let mut renderer = crate::screen::Renderer::new();
    let first = pane.with_screen(|s, _| renderer.frame(s));
    let ok = Response::reply(
        id,
        &Attached {
            pane: name.clone(),
            generation: pane.generation(),
            read_only: true,
        },
    );
    if wr.write_all(&encode_json(&ok)).await.is_err()
        || wr
            .write_all(&encode(FrameKind::Output, &first))
            .await
            .is_err()
    {
        return;
    }
    tracing::info!(pane = %name, "read-only client attached");
    let (ctl_tx, mut ctl_rx) = tokio::sync::mpsc::channel::<Frame>(64);
    let reader = tokio::spawn(async move {
        while let Ok(Some(f)) =
            super::frame_limit::read_frame(&mut rd, &super::frame_limit::BUDGET).await
        {
            if ctl_tx.send(f).await.is_err() {
                break;
            }
        }
    });
    let mut generation = pane.generation();
    let mut removed = false;
    let how = loop {
        // The screen as it is now (empty when nothing changed), then the
        // exit of the generation being watched, if it came.
        let frame = pane.with_screen(|s, _| renderer.frame(s));
        if !frame.is_empty()
            && wr
                .write_all(&encode(FrameKind::Output, &frame))
                .await
                .is_err()
        {
            break "client gone";
        }
        let info = pane.info();
        if info.generation != generation {
            generation = info.generation;
        } else if let Some(exit) = info.exit {
            let _ = wr
                .write_all(&encode_json(&AttachEvent::Exited { exit: Some(exit) }))
                .await;
            break "pane exited";
        }
        if !lock_has(&sup, &name, &entry) {
            // Killed: its exit is recorded by the time the kill is done (the
            // epoch moves then); one more wake-up, then it ends either way.
            if removed {
                let _ = wr
                    .write_all(&encode_json(&AttachEvent::Exited { exit: None }))
                    .await;
                break "pane killed";
            }
            removed = true;
        }
        tokio::select! {
            r = output.changed() => if r.is_err() { break "pane gone" },
            r = epoch.changed() => if r.is_err() { break "supervisor stopping" },
            frame = ctl_rx.recv() => match frame {
                Some(Frame { kind: FrameKind::Json, payload }) => {
                    if AttachControl::parse(&payload) == Some(AttachControl::Detach) {
                        let _ = wr.write_all(&encode_json(&AttachEvent::Detached)).await;
                        break "detached";
                    }
                    // A resize (or anything else) from a watcher changes nothing.
                }
                // Input from a watcher is dropped.
                Some(Frame { kind: FrameKind::Input, .. }) => {}
                Some(_) | None => break "client gone",
            },
        }
    };
    reader.abort();
    tracing::info!(pane = %name, how, "read-only client left");
}

/// Whether `entry` is still the pane table's entry for `name`.
fn lock_has(sup: &Sup, name: &str, entry: &Arc<Entry>) -> bool {
    super::server::lock(&sup.panes)
        .get(name)
        .is_some_and(|e| Arc::ptr_eq(e, entry))
}
