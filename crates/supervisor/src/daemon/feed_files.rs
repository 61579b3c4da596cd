//! The feed's file sources: CLI processes write job transitions
//! (`jobs/audit.jsonl`), shadow decisions (`shadow/decisions.jsonl`) and
//! registry events (`registry/events.jsonl`); the supervisor follows those
//! files from where they ended when it started, woken by inotify (never a
//! timer), and publishes each new complete line into the feed.

use super::feed::Feed;
use crate::proto::event::{Event, JobEvent, RegistryEvent, ShadowDecisionEvent};
use crate::statedir::StateDir;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;

/// The directories whose files the feed follows.
fn dirs(sd: &StateDir) -> [PathBuf; 3] {
    [sd.jobs_dir(), sd.shadow_dir(), sd.registry_dir()]
}

/// Which log a line came from, and so how it maps to a feed event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Audit,
    Decisions,
    Registry,
}

/// One followed JSONL file and what its lines are.
struct Tail {
    tail: crate::store::JsonlTail,
    source: Source,
}

impl Tail {
    fn new(path: PathBuf, source: Source) -> Self {
        // Live from now: what is already on disk is history (`drover events`).
        Tail {
            tail: crate::store::JsonlTail::from_end(path),
            source,
        }
    }

    /// The complete lines written since the last call.
    fn read_new(&mut self) -> Vec<Vec<u8>> {
        self.tail.read_new()
    }
}

/// A string field of a line, when it is one.
fn text(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str).map(str::to_string)
}

/// Map one line of a followed log to its event. Only named fields are
/// copied: free text a caller gave (a job's reason) never reaches the feed.
fn map_line(source: Source, line: &[u8]) -> Option<Event> {
    let Ok(Value::Object(m)) = serde_json::from_slice::<Value>(line) else {
        return None;
    };
    match source {
        Source::Audit => {
            let outcome = m.get("outcome")?.as_str()?;
            let request = m.get("request");
            let f = JobEvent {
                job_id: text(m.get("job_id")),
                request: text(
                    request
                        .and_then(|r| r.get("action"))
                        .and_then(|a| a.get("request")),
                ),
                from: text(m.get("from")),
                to: text(m.get("to")),
                rule: text(m.get("rule")),
                new_attempt_id: text(m.get("new_attempt_id")),
                job_seq: m.get("seq").and_then(Value::as_u64),
                authority: text(
                    request
                        .and_then(|r| r.get("actor"))
                        .and_then(|a| a.get("authority")),
                ),
            };
            Some(match outcome {
                "accepted" => Event::JobTransition(f),
                "refused" => Event::JobRefused(f),
                _ => Event::JobAck(f),
            })
        }
        Source::Decisions => {
            let summary = m.get("summary");
            Some(Event::ShadowDecision(ShadowDecisionEvent {
                pane: text(summary.and_then(|s| s.get("pane"))),
                job_id: text(m.get("job_id")),
                attempt_id: text(m.get("attempt_id")),
                decision: text(m.get("decision")),
                reason: text(m.get("reason")),
                action: text(m.get("action")),
                generation: summary
                    .and_then(|s| s.get("pane_generation"))
                    .and_then(Value::as_u64),
            }))
        }
        Source::Registry => {
            // Already redacted by the registry's only writer.
            let kind = m.get("kind")?.as_str()?.to_string();
            let pane = text(m.get("pane"));
            let mut f = m;
            f.remove("kind");
            f.remove("pane");
            if let Some(s) = f.remove("seq") {
                f.insert("registry_seq".into(), s);
            }
            // The registry's own time is when it was written; keep it apart.
            if let Some(at) = f.remove("at") {
                f.insert("written_at".into(), at);
            }
            f.insert("source".into(), Value::from("registry"));
            Some(Event::Registry(RegistryEvent {
                kind,
                pane,
                fields: f,
            }))
        }
    }
}

/// Start following the state dir's logs on a thread of its own; it blocks in
/// `read(2)` on the inotify descriptor between changes.
pub(super) fn start(state: &StateDir, feed: Arc<Feed>) {
    let state_dir = state.path().to_path_buf();
    let inotify = match Inotify::init(InitFlags::IN_CLOEXEC) {
        Ok(i) => i,
        Err(e) => {
            tracing::warn!(error = %e, "inotify unavailable: the event feed will not see file events");
            return;
        }
    };
    let mut tails = vec![
        Tail {
            tail: crate::engine::audit::follow(crate::statedir::StateDir::new(&state_dir)),
            source: Source::Audit,
        },
        Tail::new(StateDir::new(&state_dir).decisions_log(), Source::Decisions),
        Tail::new(
            StateDir::new(&state_dir).registry_events(),
            Source::Registry,
        ),
    ];
    let mut watched: Vec<(WatchDescriptor, usize)> = Vec::new();
    let dir_flags = AddWatchFlags::IN_MODIFY
        | AddWatchFlags::IN_CLOSE_WRITE
        | AddWatchFlags::IN_MOVED_TO
        | AddWatchFlags::IN_CREATE;
    if let Err(e) = inotify.add_watch(
        &state_dir,
        AddWatchFlags::IN_CREATE | AddWatchFlags::IN_MOVED_TO,
    ) {
        tracing::warn!(error = %e, "cannot watch the state dir");
    }
    let dirs = dirs(StateDir::new(&state_dir));
    let add_dirs = move |inotify: &Inotify, watched: &mut Vec<(WatchDescriptor, usize)>| {
        for (i, d) in dirs.iter().enumerate() {
            if watched.iter().any(|(_, n)| *n == i) {
                continue;
            }
            if let Ok(wd) = inotify.add_watch(d, dir_flags) {
                watched.push((wd, i));
            }
        }
    };
    add_dirs(&inotify, &mut watched);
    let spawned = std::thread::Builder::new()
        .name("drover-feed-files".into())
        .spawn(move || {
            // A line written between the offsets above and the watches is read now.
            publish_new(&mut tails, &feed);
            loop {
                match inotify.read_events() {
                    Ok(_) => {}
                    Err(nix::errno::Errno::EINTR) => continue,
                    Err(e) => {
                        tracing::warn!(error = %e, "inotify read failed; the feed stops following files");
                        return;
                    }
                }
                add_dirs(&inotify, &mut watched);
                publish_new(&mut tails, &feed);
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "cannot start the feed's file follower");
    }
}

fn publish_new(tails: &mut [Tail], feed: &Feed) {
    for t in tails.iter_mut() {
        for line in t.read_new() {
            match map_line(t.source, &line) {
                Some(event) => {
                    feed.publish(event);
                }
                None => {
                    tracing::debug!(path = %t.tail.path().display(), "skipped a line the feed cannot read")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audit_lines_carry_no_free_text() {
        let line = br#"{"seq":3,"at":"t","job_id":"J1","outcome":"accepted","from":"queued","to":"running","rule":null,"reason":"secret words","new_attempt_id":"A1","request":{"job_id":"J1","action":{"request":"claim","session":"s"},"actor":{"authority":"agent"}},"pid":1}"#;
        let ev = map_line(Source::Audit, line).unwrap();
        let Event::JobTransition(f) = &ev else {
            panic!("not a transition: {ev:?}");
        };
        assert_eq!(f.job_id.as_deref(), Some("J1"));
        assert_eq!(f.request.as_deref(), Some("claim"));
        assert_eq!(f.job_seq, Some(3));
        let line = serde_json::to_string(&ev).unwrap();
        assert!(!line.contains("secret"), "{line}");
    }

    #[test]
    fn a_torn_line_waits_for_its_newline() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.jsonl");
        std::fs::write(&p, "").unwrap();
        let mut t = Tail::new(p.clone(), Source::Registry);
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(b"{\"seq\":1,\"kind\":\"a\"}\n{\"seq\":2,")
            .unwrap();
        assert_eq!(t.read_new().len(), 1);
        f.write_all(b"\"kind\":\"b\"}\n").unwrap();
        let got = t.read_new();
        assert_eq!(got.len(), 1);
        let Some(Event::Registry(r)) = map_line(Source::Registry, &got[0]) else {
            panic!("not a registry event");
        };
        assert_eq!(r.kind, "b");
        assert_eq!(r.fields["registry_seq"], 2);
    }
}
