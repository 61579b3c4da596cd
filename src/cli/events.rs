//! `drover events`: without `--follow`, the registry's event log; with it, the
//! supervisor's live feed (pane states, pane lifecycle, job transitions,
//! shadow decisions, registry events), optionally replayed from a seq first.

use super::{Ctx, client_err, fail};
use clap::Args;
use drover::daemon::{EventStream, FollowSpec};
use drover::exit;
use drover::registry::{self, events};
use drover::statedir::StateDir;
use serde_json::Value;
use std::io::Write;

#[derive(Debug, Args)]
pub struct EventsArgs {
    /// Stream the supervisor's events as they happen (until interrupted).
    #[arg(long)]
    follow: bool,
    /// Only events after this seq; with --follow, replay what the supervisor still holds after it first (0: all it holds).
    #[arg(long, value_name = "SEQ")]
    since: Option<u64>,
    /// Only events about this pane.
    #[arg(long, value_name = "PANE")]
    pane: Option<String>,
    /// Only this kind, or every kind under it (`job` matches `job.transition`).
    #[arg(long, value_name = "KIND")]
    kind: Option<String>,
    /// Print one JSON document (an array of events); not with --follow.
    #[arg(long, conflicts_with_all = ["jsonl", "follow"])]
    json: bool,
    /// Print one JSON object per event per line (also with --follow).
    #[arg(long)]
    jsonl: bool,
    /// With --follow: every host of this fleet (joined with `fleet join`), a HOST column; --since is the fleet stream's seq (docs/fleet.md).
    #[arg(long, value_name = "FLEET", requires = "follow")]
    fleet: Option<String>,
}

/// Write to stdout; `false` once the reader has gone (a closed pipe).
pub(super) fn out(s: &str) -> bool {
    let mut o = std::io::stdout().lock();
    o.write_all(s.as_bytes()).and_then(|()| o.flush()).is_ok()
}

/// `seq  at  kind  k=v …`, one line.
pub(super) fn human(v: &Value) -> String {
    let Some(m) = v.as_object() else {
        return v.to_string();
    };
    let fields: Vec<String> = m
        .iter()
        .filter(|(k, v)| !v.is_null() && !matches!(k.as_str(), "seq" | "at" | "kind"))
        .map(|(k, v)| match v {
            Value::String(s) => format!("{k}={s}"),
            other => format!("{k}={other}"),
        })
        .collect();
    let line = format!(
        "{:>5}  {}  {:<18} {}",
        m.get("seq").and_then(Value::as_u64).unwrap_or(0),
        m.get("at").and_then(Value::as_str).unwrap_or("-"),
        m.get("kind").and_then(Value::as_str).unwrap_or("-"),
        fields.join(" ")
    );
    line.trim_end().to_string()
}

pub(super) fn kind_matches(want: Option<&str>, kind: &str) -> bool {
    want.is_none_or(|k| {
        kind == k || (kind.starts_with(k) && kind.as_bytes().get(k.len()) == Some(&b'.'))
    })
}

pub fn run(a: EventsArgs, state: &StateDir, ctx: &Ctx) -> anyhow::Result<u8> {
    if a.follow {
        return follow(a, ctx);
    }
    let map = |e: registry::RegistryError| fail(e.exit_code(), e.to_string());
    let r = events::read(state).map_err(map)?;
    if r.torn_tail {
        eprintln!(
            "drover: warning: skipped a torn last line in {}",
            state.registry_events().display()
        );
    }
    let kept: Vec<&events::Event> = r
        .records
        .iter()
        .filter(|e| {
            kind_matches(a.kind.as_deref(), &e.kind)
                && a.since.is_none_or(|s| e.seq > s)
                && a.pane
                    .as_deref()
                    .is_none_or(|p| e.fields.get("pane").and_then(Value::as_str) == Some(p))
        })
        .collect();
    if a.json {
        let s =
            serde_json::to_string_pretty(&kept).map_err(|e| fail(exit::ERROR, e.to_string()))?;
        out(&(s + "\n"));
        return Ok(exit::OK);
    }
    for e in kept {
        let line = if a.jsonl {
            serde_json::to_string(e).unwrap_or_default()
        } else {
            human(&serde_json::to_value(e).unwrap_or(Value::Null))
        };
        if !out(&(line + "\n")) {
            break;
        }
    }
    Ok(exit::OK)
}

fn follow(a: EventsArgs, ctx: &Ctx) -> anyhow::Result<u8> {
    if let Some(fleet) = &a.fleet {
        let spec = super::fleet::FleetFollow {
            fleet,
            since: a.since,
            pane: a.pane.as_deref(),
            kind: a.kind.as_deref(),
            jsonl: a.jsonl,
        };
        return super::fleet::follow_events(&spec, ctx);
    }
    let spec = FollowSpec {
        since: a.since,
        pane: a.pane,
        kind: a.kind,
    };
    let mut stream = EventStream::open(ctx.client()?, &spec).map_err(client_err)?;
    loop {
        if reader_gone(&stream) {
            return Ok(exit::OK);
        }
        let Some(line) = stream.next_line().map_err(client_err)? else {
            return Err(fail(
                exit::TRANSPORT,
                "the supervisor stopped; run `drover events --follow --since SEQ` again to resume",
            ));
        };
        let text = if a.jsonl {
            line
        } else {
            human(&serde_json::from_str(&line).unwrap_or(Value::Null))
        };
        if !out(&(text + "\n")) {
            return Ok(exit::OK);
        }
    }
}

/// Wait for the next event or for stdout's reader to go away (`| head -n 1`
/// must end the stream even when no further event comes). True when it went.
fn reader_gone(stream: &EventStream) -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    let stdout = std::io::stdout();
    loop {
        let mut fds = [
            PollFd::new(stream.as_fd(), PollFlags::POLLIN),
            PollFd::new(stdout.as_fd(), PollFlags::empty()),
        ];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            // Cannot wait on both: just read the stream.
            Err(_) => return false,
        }
        let gone = fds[1]
            .revents()
            .is_some_and(|r| r.intersects(PollFlags::POLLERR | PollFlags::POLLHUP));
        return gone;
    }
}
