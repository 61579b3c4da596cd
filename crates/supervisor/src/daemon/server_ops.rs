//! The supervisor's operations: the dispatch of a typed request to its
//! handler, and the pane operations served here (`ping`, `pane.*`,
//! `shutdown`); each handler takes its typed arguments and returns its
//! typed reply, serialized once in [`handle`].

use super::protocol::{ErrorCode, PROTOCOL_VERSION, Request, Response};
use super::server::{Entry, Sup, lock, pane_err};
use crate::agent::State;
use crate::pane::{Backend, PaneSpecExt};
use crate::proto::args::{PaneNew, Split};
use crate::proto::{Event, PaneEntry, PaneView, reply};
use serde_json::Value;
use std::sync::{Arc, Mutex};

pub(super) async fn handle(sup: &Arc<Sup>, id: u64, req: Request) -> Response {
    let mut resp = match dispatch(sup, req).await {
        Ok(v) => Response::ok(id, v),
        Err(r) => r,
    };
    resp.id = id;
    resp
}

/// A typed reply, serialized once here at the edge.
fn out<T: serde::Serialize>(r: Result<T, Response>) -> Result<Value, Response> {
    r.and_then(|t| {
        serde_json::to_value(t).map_err(|e| Response::err(0, ErrorCode::Internal, e.to_string()))
    })
}

async fn dispatch(sup: &Arc<Sup>, req: Request) -> Result<Value, Response> {
    match req {
        Request::Ping(_) => out(Ok(reply::Pong {
            version: env!("CARGO_PKG_VERSION").to_string(),
            protocol: PROTOCOL_VERSION,
            pid: std::process::id(),
            state_dir: sup.state_dir().to_path_buf(),
        })),
        Request::PaneNew(a) => out(pane_new(sup, a).await),
        Request::PaneLs(_) => out(Ok(pane_ls(sup))),
        Request::PaneRead(a) => out(pane_read(sup, &a)),
        Request::PaneSend(a) => {
            let e = sup.entry(&a.pane)?;
            e.pane.send_text(&a.text, a.enter).map_err(pane_err)?;
            out(Ok(reply::Sent {
                pane: e.pane.name().to_string(),
                bytes: a.text.len(),
                enter: a.enter,
                agent: e.pane.info().agent,
            }))
        }
        Request::PaneKeys(a) => {
            let e = sup.entry(&a.pane)?;
            e.pane.send_keys(&a.keys).map_err(pane_err)?;
            out(Ok(reply::KeysSent {
                pane: e.pane.name().to_string(),
                keys: a.keys.len(),
            }))
        }
        Request::PaneResize(a) => {
            let e = sup.entry(&a.pane)?;
            e.pane.resize(a.cols, a.rows).map_err(pane_err)?;
            out(Ok(reply::Resized {
                pane: e.pane.name().to_string(),
                cols: a.cols,
                rows: a.rows,
            }))
        }
        Request::PaneKill(a) => out(pane_kill(sup, a.pane).await),
        Request::PaneRespawn(a) => out(pane_respawn(sup, &a.pane).await),
        Request::Wait(a) => out(super::detect::wait_barrier(sup, a).await),
        Request::Deliver(a) => out(super::deliver::deliver(sup, a).await),
        Request::PaneAnswer(a) => out(super::answer::answer(sup, a).await),
        Request::EvidenceWatch(a) => out(super::evidence_watch::start(sup, a)),
        Request::PaneExplain(a) => out(super::fusion::explain_settled(sup, &a).await),
        Request::FleetJoin(a) => out(super::fleet_hook::join(sup, a).await),
        Request::FleetLeave(_) => out(super::fleet_hook::leave(sup).await),
        // Answered with the caller's credentials (server.rs), never here.
        Request::Signal(_) => Err(Response::err(
            0,
            ErrorCode::Usage,
            "signal needs the caller's credentials",
        )),
        Request::Shutdown(_) => {
            let _ = sup.shutdown.send(true);
            out(Ok(reply::Stopping { stopping: true }))
        }
        // Served on the connection itself (they take it over or need the
        // peer's credentials); never dispatched here.
        Request::Attach(_) | Request::EventsFollow(_) | Request::Report(_) => Err(Response::err(
            0,
            ErrorCode::Internal,
            "this request is served on its connection",
        )),
    }
}

/// A live pane as `pane ls` and `pane.new` report it.
fn view(e: &Entry) -> PaneView {
    let mut v = crate::pane::backend::view(&*e.pane, lock(&e.obs).clone());
    v.usage = lock(&e.usage).total();
    v
}

fn pane_ls(sup: &Sup) -> Vec<PaneEntry> {
    let entries: Vec<Arc<Entry>> = lock(&sup.panes).values().cloned().collect();
    let mut out: Vec<PaneEntry> = entries
        .iter()
        .map(|e| PaneEntry::Live(Box::new(view(e))))
        .collect();
    out.extend(lock(&sup.lost).values().cloned().map(PaneEntry::Lost));
    out.sort_by(|a, b| a.name().cmp(b.name()));
    out
}

fn pane_read(sup: &Sup, a: &crate::proto::args::PaneRead) -> Result<reply::PaneText, Response> {
    let e = sup.entry(&a.pane)?;
    let raw = a.raw;
    let scrollback = usize::try_from(a.scrollback.unwrap_or(0)).unwrap_or(usize::MAX);
    let (rows, formatted, generation, size, title) = e.pane.with_screen(|s, m| {
        let mut rows = s.scrollback_rows(scrollback);
        rows.extend(s.rows());
        let formatted = raw.then(|| {
            s.rows_formatted()
                .into_iter()
                .map(|r| String::from_utf8_lossy(&r).into_owned())
                .collect::<Vec<_>>()
        });
        (
            rows,
            formatted,
            m.generation,
            s.size(),
            s.hooks().title().map(str::to_string),
        )
    });
    Ok(reply::PaneText {
        pane: e.pane.name().to_string(),
        generation,
        cols: size.0,
        rows: size.1,
        text: crate::screen::join_rows(&rows),
        lines: rows,
        formatted,
        title,
        observation: lock(&e.obs).clone(),
    })
}

async fn pane_kill(sup: &Arc<Sup>, name: String) -> Result<reply::Killed, Response> {
    let removed = lock(&sup.panes).remove(&name);
    let Some(e) = removed else {
        // A lost pane (its processes are being or were ended) is dismissed.
        if lock(&sup.lost).remove(&name).is_some() {
            return Ok(reply::Killed {
                pane: name,
                killed: false,
                dismissed: true,
            });
        }
        return Err(Response::err(
            0,
            ErrorCode::NotFound,
            format!("no pane named {name}"),
        ));
    };
    let info = e.pane.info();
    let pid = info.pid;
    let e2 = e.clone();
    let sup2 = sup.clone();
    let _ = tokio::task::spawn_blocking(move || {
        e2.pane.kill();
        super::lost::forget(&sup2, e2.pane.name());
        unwire_killed(&sup2, &info);
    })
    .await;
    e.notify.notify_one();
    sup.epoch.send_modify(|x| *x += 1);
    tracing::info!(pane = %name, pid, "pane killed");
    sup.feed.publish(Event::PaneKilled {
        pane: name.clone(),
        pid,
    });
    Ok(reply::Killed {
        pane: name,
        killed: true,
        dismissed: false,
    })
}

/// A killed pane started with Claude's settings file drover wrote for it
/// loses its signals folder (`<state>/signals/<pane>/`); nothing else.
fn unwire_killed(sup: &Sup, info: &crate::pane::PaneInfo) {
    let settings = sup.state_dir().claude_settings(&info.name);
    let wired = info
        .argv
        .iter()
        .any(|a| std::path::Path::new(a) == settings);
    if wired && let Err(e) = crate::agent::signal_wire::unwire(sup.state_dir(), &info.name) {
        tracing::warn!(pane = %info.name, error = %e, "the killed pane's signals folder stays");
    }
}

async fn pane_respawn(sup: &Arc<Sup>, name: &str) -> Result<reply::Generation, Response> {
    let e = sup.entry(name)?;
    let argv = e.pane.info().argv;
    // Claude does not start on a settings file removed meanwhile.
    crate::agent::signal_wire::rewire_if_gone(sup.state_dir(), name, &argv)
        .map_err(|e| Response::err(0, ErrorCode::Internal, e.to_string()))?;
    let pane = e.pane.clone();
    let generation = tokio::task::spawn_blocking(move || pane.respawn())
        .await
        .map_err(|e| Response::err(0, ErrorCode::Internal, e.to_string()))?
        .map_err(pane_err)?;
    // Until the detector classifies the new generation, barriers must
    // not match the old one's state (e.g. its `exited`).
    {
        let mut obs = lock(&e.obs);
        if obs.generation < generation {
            obs.generation = generation;
            obs.state = State::Starting;
            obs.kind = None;
            obs.exit_code = None;
            obs.since_ms = crate::paths::now_ms();
            obs.since = crate::paths::now_rfc3339();
            obs.evidence = vec!["respawned".into()];
        }
    }
    super::lost::record(sup, &*e.pane);
    sup.epoch.send_modify(|x| *x += 1);
    e.notify.notify_one();
    tracing::info!(pane = %e.pane.name(), generation, "pane respawned");
    sup.feed.publish(Event::PaneRespawned {
        pane: e.pane.name().to_string(),
        generation,
    });
    Ok(reply::Generation {
        pane: e.pane.name().to_string(),
        generation,
    })
}

async fn pane_new(sup: &Arc<Sup>, args: PaneNew) -> Result<PaneView, Response> {
    super::protocol::args::check_agent(&args.spec.agent)?;
    let backend = backend_arg(args.backend.as_deref())?;
    let split = herdr_split_arg(sup, args.split.as_ref(), backend)?;
    let spec = args.spec;
    spec.validate().map_err(pane_err)?;
    let codex_home = super::rollout::home_of_spec(&spec);
    // Reserve the name, then spawn without holding the pane table: a slow
    // exec must not stall every other request.
    {
        let panes = lock(&sup.panes);
        let mut creating = lock(&sup.creating);
        if panes.contains_key(&spec.name) || creating.contains(&spec.name) {
            return Err(Response::err(
                0,
                ErrorCode::Exists,
                format!(
                    "a pane named {} already exists; pick another name or `drover pane kill {}`",
                    spec.name, spec.name
                ),
            ));
        }
        creating.insert(spec.name.clone());
    }
    // Claude does not start on a settings file removed since the client
    // wrote it (the sweep at a supervisor's start, a `pane kill` of an
    // older pane of this name).
    if let Err(e) =
        crate::agent::signal_wire::rewire_if_gone(sup.state_dir(), &spec.name, &spec.argv)
    {
        lock(&sup.creating).remove(&spec.name);
        return Err(Response::err(0, ErrorCode::Internal, e.to_string()));
    }
    let name = spec.name.clone();
    let sup2 = sup.clone();
    let spawned = tokio::task::spawn_blocking(move || -> Result<Arc<Entry>, Response> {
        let (events, notify, output) = sup2.events();
        let name = spec.name.clone();
        let env_count = spec.env.len();
        // The values a pane is given are redacted from every copy the
        // supervisor shows or stores (drover's own names are not secrets).
        crate::registry::redact::remember_given(
            spec.env
                .iter()
                .filter(|(k, _)| !k.starts_with("DROVER_"))
                .map(|(_, v)| v),
        );
        let pane = match split {
            None => sup2.hosts.spawn(backend, spec, events),
            Some((of, direction)) => sup2.hosts.spawn_herdr_split(spec, of, direction, events),
        }
        .map_err(pane_err)?;
        let info = pane.info();
        tracing::info!(pane = %name, %backend, pid = info.pid, env_vars = env_count, "pane created");
        let entry = Arc::new(Entry {
            obs: Mutex::new(super::detect::starting_snapshot(&name, 1)),
            pane,
            notify,
            output,
            signals: Default::default(),
            signal_rate: Default::default(),
            usage: Default::default(),
            fusion: Default::default(),
            rollout_thread: Default::default(),
            status_at: Default::default(),
        });
        super::lost::record(&sup2, &*entry.pane);
        lock(&sup2.lost).remove(&name);
        lock(&sup2.panes).insert(name, entry.clone());
        Ok(entry)
    })
    .await;
    lock(&sup.creating).remove(&name);
    let entry = spawned.map_err(|e| Response::err(0, ErrorCode::Internal, e.to_string()))??;
    let info = entry.pane.info();
    sup.feed.publish(Event::PaneCreated {
        pane: info.name.clone(),
        agent: info.agent.clone(),
        generation: info.generation,
        pid: info.pid,
    });
    super::rollout::start(sup, &entry, codex_home);
    tokio::spawn(super::detect::detector(sup.clone(), entry.clone()));
    super::signal::take_early(sup, &entry);
    Ok(view(&entry))
}

/// The `backend` of a `pane.new` request (beside `spec`, or inside it);
/// native when absent.
fn backend_arg(name: Option<&str>) -> Result<Backend, Response> {
    match name {
        None => Ok(Backend::Native),
        Some(s) => s
            .parse()
            .map_err(|e: crate::pane::backend::UnknownBackend| {
                Response::err(0, ErrorCode::Usage, e.to_string())
            }),
    }
}

/// `split: {pane, direction}` of `pane.new` (herdr only): herdr's id of
/// that drover pane, and the direction.
fn herdr_split_arg(
    sup: &Sup,
    split: Option<&Split>,
    backend: Backend,
) -> Result<Option<(String, crate::pane::herdr::SplitDirection)>, Response> {
    let Some(split) = split else {
        return Ok(None);
    };
    let usage = |m: String| Response::err(0, ErrorCode::Usage, m);
    if backend != Backend::Herdr {
        return Err(usage(format!(
            "--split works on herdr panes only (this pane's backend is {backend})"
        )));
    }
    let name = split.pane.as_str();
    let direction = split.direction.as_deref().unwrap_or("right");
    let direction = crate::pane::herdr::SplitDirection::parse(direction).ok_or_else(|| {
        usage(format!(
            "--split-direction {direction:?}: use right or down"
        ))
    })?;
    let of = lock(&sup.panes).get(name).map(|e| e.pane.clone());
    let Some(of) = of else {
        return Err(Response::err(
            0,
            ErrorCode::NotFound,
            format!("--split {name}: no such pane; `drover pane ls` lists them"),
        ));
    };
    match (of.backend(), of.backend_pane_id()) {
        (Backend::Herdr, Some(id)) => Ok(Some((id, direction))),
        (b, _) => Err(usage(format!(
            "--split {name}: that pane is on {b}, not herdr; split a herdr pane"
        ))),
    }
}
