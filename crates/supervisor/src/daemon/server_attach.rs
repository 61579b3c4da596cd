//! The attach session: draw the screen, then redraw what changed (from the
//! screen model, never the app's raw bytes: docs/architecture.md) and pass
//! the client's input to the pane until detach, kick, pane exit or
//! disconnect. A read-only attach is a watch (server_watch.rs).

use super::protocol::{ErrorCode, Frame, FrameKind, Response, encode, encode_json};
use super::server::{Sup, pane_err};
use crate::pane::AttachMsg;
use crate::proto::args::Attach;
use crate::proto::reply::Attached;
use crate::proto::{AttachControl, AttachEvent};
use std::sync::Arc;
use tokio::io::AsyncWriteExt;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

enum End {
    Detached,
    Kicked,
    Exited,
    ClientGone,
}

pub(super) async fn attach(
    sup: Arc<Sup>,
    id: u64,
    args: Attach,
    mut rd: tokio::io::BufReader<OwnedReadHalf>,
    mut wr: OwnedWriteHalf,
) {
    let name = args.pane;
    let entry = match sup.entry(&name) {
        Ok(e) => e,
        Err(mut r) => {
            r.id = id;
            let _ = wr.write_all(&encode_json(&r)).await;
            return;
        }
    };
    if args.read_only {
        super::server_watch::watch(sup, entry, id, name, rd, wr).await;
        return;
    }
    let pane = entry.pane.clone();
    let size = match (args.cols, args.rows) {
        (Some(c), Some(r)) if c > 0 && r > 0 && c <= 1000 && r <= 1000 => {
            Some((c as u16, r as u16))
        }
        _ => None,
    };
    // A backend without a settable size (herdr) is attached at its own.
    if let Some((c, r)) = size
        && let Err(e) = pane.resize(c, r)
        && !matches!(e, crate::pane::PaneError::Unsupported { .. })
    {
        let mut r = pane_err(e);
        r.id = id;
        let _ = wr.write_all(&encode_json(&r)).await;
        return;
    }
    let mut handle = pane.attach();
    tracing::info!(pane = %name, client = handle.id, "client attached");
    let ok = Response::reply(
        id,
        &Attached {
            pane: name.clone(),
            generation: pane.generation(),
            read_only: false,
        },
    );
    if wr.write_all(&encode_json(&ok)).await.is_err()
        || wr
            .write_all(&encode(FrameKind::Output, &handle.repaint))
            .await
            .is_err()
    {
        pane.detach(handle.id);
        return;
    }
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
    let end = loop {
        tokio::select! {
            () = handle.wake.notified() => {
                // Woken once per change however many came: a slow client
                // gets the latest screen, never a backlog.
                let Some(frame) = pane.attach_frame(handle.id) else { continue };
                if !frame.is_empty()
                    && wr.write_all(&encode(FrameKind::Output, &frame)).await.is_err()
                {
                    break End::ClientGone;
                }
            }
            msg = handle.rx.recv() => match msg {
                Some(AttachMsg::Exited(info)) => {
                    // The last screen first, then the news.
                    if let Some(frame) = pane.attach_frame(handle.id)
                        && !frame.is_empty()
                    {
                        let _ = wr.write_all(&encode(FrameKind::Output, &frame)).await;
                    }
                    let ev = AttachEvent::Exited { exit: Some(info) };
                    let _ = wr.write_all(&encode_json(&ev)).await;
                    break End::Exited;
                }
                Some(AttachMsg::Kicked) | None => {
                    let _ = wr.write_all(&encode_json(&AttachEvent::Kicked)).await;
                    break End::Kicked;
                }
            },
            frame = ctl_rx.recv() => match frame {
                Some(Frame { kind: FrameKind::Input, payload }) => {
                    if pane.write_input(&payload).is_err() {
                        // The pane exited; the Exited message follows.
                        continue;
                    }
                }
                Some(Frame { kind: FrameKind::Json, payload }) => {
                    match AttachControl::parse(&payload) {
                        Some(c @ AttachControl::Resize { .. }) => {
                            if let Some((c, r)) = c.size() {
                                let _ = pane.resize(c, r);
                            }
                        }
                        Some(AttachControl::Detach) => {
                            let _ = wr.write_all(&encode_json(&AttachEvent::Detached)).await;
                            break End::Detached;
                        }
                        None => {
                            let r = Response::err(0, ErrorCode::Usage, "unknown attach control message");
                            let _ = wr.write_all(&encode_json(&r)).await;
                        }
                    }
                }
                Some(_) | None => break End::ClientGone,
            },
        }
    };
    reader.abort();
    pane.detach(handle.id);
    if matches!(end, End::Detached | End::ClientGone) && size.is_some() {
        // Give the pane back the size its detectors were tuned for.
        let (c, r) = pane.spec_size();
        let _ = pane.resize(c, r);
    }
    let how = match end {
        End::Detached => "detached",
        End::Kicked => "kicked",
        End::Exited => "pane exited",
        End::ClientGone => "client gone",
    };
    tracing::info!(pane = %name, client = handle.id, how, "client left");
}
