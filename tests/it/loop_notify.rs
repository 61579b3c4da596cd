//! Loop notifications against a local HTTP server and a real command:
//! retried with backoff until accepted, delivered once per intent id.

use drover::loopctl::night::notify::{Note, Notifier, Targets, intent_id};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn note(id: &str, text: &str) -> Note {
    Note {
        intent_id: id.to_string(),
        event: "landed".into(),
        run: "loop1".into(),
        task: Some("TASK-1".into()),
        text: text.into(),
        at: "2026-12-01T03:00:00Z".into(),
    }
}

/// Serves POSTs: answers 500 to the first `fail` requests, then 200; records each body.
/// Each request's answer code and body.
type Seen = Arc<Mutex<Vec<(u16, String)>>>;

fn server(fail: usize) -> (String, Seen) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/drover-topic", l.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let rec = seen.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            // Read the head, then the body by Content-Length (any case: the
            // client sends `content-length`, and a body that comes in a
            // later segment than the head was read as empty under load).
            loop {
                let n = s.read(&mut chunk).unwrap_or(0);
                if n == 0 {
                    break;
                }
                buf.extend_from_slice(&chunk[..n]);
                let text = String::from_utf8_lossy(&buf).to_string();
                if let Some((head, body)) = text.split_once("\r\n\r\n") {
                    let len: usize = head
                        .lines()
                        .filter_map(|l| l.split_once(':'))
                        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
                        .and_then(|(_, v)| v.trim().parse().ok())
                        .unwrap_or(0);
                    if body.len() >= len {
                        break;
                    }
                }
            }
            let text = String::from_utf8_lossy(&buf).to_string();
            let body = text
                .split_once("\r\n\r\n")
                .map(|x| x.1.to_string())
                .unwrap_or_default();
            let mut r = rec.lock().unwrap();
            let code = if r.len() < fail { 500 } else { 200 };
            r.push((code, body));
            drop(r);
            let _ = s.write_all(
                format!("HTTP/1.1 {code} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                    .as_bytes(),
            );
        }
    });
    (url, seen)
}

/// Guards notify-url: a server that fails twice then accepts gets the
/// notification delivered once (three attempts, one accepted), and a
/// second send of the same intent is not delivered again.
#[test]
fn a_failing_url_is_retried_and_delivered_once() {
    let (url, seen) = server(2);
    let mut n = Notifier::start(Targets {
        cmd: None,
        url: Some(url),
        first_retry: Some(Duration::from_millis(50)),
        ..Default::default()
    });
    let id = intent_id("loop1", "landed", "TASK-1");
    n.send(note(&id, "TASK-1 landed as abc"));
    n.send(note(&id, "TASK-1 landed as abc"));
    let delivered = n.finish(Duration::from_secs(60));
    assert_eq!(delivered, vec![id.clone()]);
    let r = seen.lock().unwrap().clone();
    let codes: Vec<u16> = r.iter().map(|x| x.0).collect();
    assert_eq!(codes, [500, 500, 200], "{r:?}");
    assert!(
        r[2].1.starts_with("TASK-1 landed as abc (intent ") && r[2].1.contains(&id),
        "{r:?}"
    );
}

/// Guards notify-cmd: the event as JSON on stdin, with its intent id; secrets redacted.
#[test]
fn the_command_reads_the_event_and_never_a_secret() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("got.jsonl");
    let mut n = Notifier::start(Targets {
        cmd: Some(format!(
            "cat >> {}; echo >> {}",
            out.display(),
            out.display()
        )),
        url: None,
        first_retry: Some(Duration::from_millis(20)),
        ..Default::default()
    });
    n.send(note(
        "aa",
        "TASK-1 parked: token sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789",
    ));
    n.send(note("bb", "TASK-2 landed"));
    n.send(note("aa", "again"));
    assert_eq!(n.finish(Duration::from_secs(30)), ["aa", "bb"]);
    let text = std::fs::read_to_string(&out).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert_eq!(lines[0]["intent_id"], "aa");
    assert_eq!(lines[0]["event"], "landed");
    assert!(
        !text.contains("abcdefghijklmnopqrstuvwxyz0123456789"),
        "{text}"
    );
}

/// Guards the loop's path: a notifier whose target never answers does not block `send`.
#[test]
fn a_dead_target_never_blocks_send() {
    let mut n = Notifier::start(Targets {
        cmd: Some("sleep 30".into()),
        url: None,
        first_retry: Some(Duration::from_secs(1)),
        ..Default::default()
    });
    let t = std::time::Instant::now();
    for k in 0..50 {
        n.send(note(&format!("id{k}"), "x"));
    }
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "send blocked: {:?}",
        t.elapsed()
    );
    assert!(n.finish(Duration::from_millis(100)).is_empty());
}

fn to_file(out: &Path) -> Targets {
    Targets {
        cmd: Some(format!(
            "cat >> {}; echo >> {}",
            out.display(),
            out.display()
        )),
        url: None,
        first_retry: Some(Duration::from_millis(20)),
        ..Default::default()
    }
}

/// Guards the dedup across a resume: the intents a run delivered are
/// recorded in its run dir, and the notifier of the resumed loop (a new
/// process, a new notifier on the same record) never sends them again.
#[test]
fn a_delivered_intent_is_not_sent_again_after_a_resume() {
    let d = tempfile::tempdir().unwrap();
    let (out, record) = (d.path().join("got.jsonl"), d.path().join("notified.json"));
    let (mut n, warn) = Notifier::start_recorded(to_file(&out), &record);
    assert_eq!(warn, None);
    n.send(note("aa", "TASK-1 landed"));
    assert_eq!(n.finish(Duration::from_secs(30)), ["aa"]);
    let kept: Vec<String> =
        serde_json::from_str(&std::fs::read_to_string(&record).unwrap()).unwrap();
    assert_eq!(kept, ["aa"]);
    // The resumed loop says both again.
    let (mut n, _) = Notifier::start_recorded(to_file(&out), &record);
    n.send(note("aa", "TASK-1 landed"));
    n.send(note("bb", "TASK-2 landed"));
    assert_eq!(n.finish(Duration::from_secs(30)), ["bb"]);
    let text = std::fs::read_to_string(&out).unwrap();
    let ids: Vec<String> = text
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["intent_id"].to_string())
        .collect();
    assert_eq!(ids, ["\"aa\"", "\"bb\""], "{text}");
}

/// Guards "corrupt files reported, never reset": an unreadable record is
/// reported and left byte for byte; notifications still go out.
#[test]
fn an_unreadable_record_is_reported_and_left_as_it_is() {
    let d = tempfile::tempdir().unwrap();
    let (out, record) = (d.path().join("got.jsonl"), d.path().join("notified.json"));
    std::fs::write(&record, "not json").unwrap();
    let (mut n, warn) = Notifier::start_recorded(to_file(&out), &record);
    assert!(
        warn.as_deref().is_some_and(|w| w.contains("notified.json")),
        "{warn:?}"
    );
    n.send(note("aa", "TASK-1 landed"));
    assert_eq!(n.finish(Duration::from_secs(30)), ["aa"]);
    assert_eq!(std::fs::read_to_string(&record).unwrap(), "not json");
}
