//! `--notify-cmd` is bounded: a command that hangs is ended at its timeout
//! with its whole process group and retried, so later notifications still
//! go out, and nothing it started is left running once the loop gave up on
//! it. Real `sh` processes.

use crate::common;

use common::wait_until;
use drover::loopctl::night::notify::{CMD_TIMEOUT, Note, Notifier, Targets};
use std::path::Path;
use std::time::{Duration, Instant};

fn note(id: &str) -> Note {
    Note {
        intent_id: id.into(),
        event: "landed".into(),
        run: "loop1".into(),
        task: Some("TASK-1".into()),
        text: format!("{id} landed"),
        at: "2026-12-01T00:00:00Z".into(),
    }
}

/// Every process group recorded in `pids` has no live member left.
fn groups_gone(pids: &Path) -> bool {
    let text = std::fs::read_to_string(pids).unwrap_or_default();
    text.lines()
        .filter_map(|l| l.trim().parse().ok())
        .all(|g: i32| {
            wait_until(Duration::from_secs(5), || {
                common::group_members(g).iter().all(|m| m.state == 'Z')
            })
        })
}

/// Guards issue 24 item 10: the first run of the command hangs (and leaves
/// a `sleep` in the background); it is ended at the timeout with its group,
/// retried, and all four notifications are delivered.
#[test]
fn a_hanging_notify_cmd_is_ended_with_its_group_and_the_rest_delivered() {
    let d = tempfile::tempdir().unwrap();
    let (flag, pids, out) = (
        d.path().join("hung"),
        d.path().join("pids"),
        d.path().join("got.jsonl"),
    );
    let cmd = format!(
        "if [ ! -e {f} ]; then touch {f}; echo $$ >> {p}; sleep 600 & sleep 600; fi; cat >> {o}; echo >> {o}",
        f = flag.display(),
        p = pids.display(),
        o = out.display()
    );
    let mut n = Notifier::start(Targets {
        cmd: Some(cmd),
        url: None,
        first_retry: Some(Duration::from_millis(50)),
        ..Targets::default()
    });
    for id in ["a", "b", "c", "d"] {
        n.send(note(id));
    }
    let t0 = Instant::now();
    let delivered = n.finish(CMD_TIMEOUT * 4);
    assert_eq!(delivered, ["a", "b", "c", "d"], "after {:?}", t0.elapsed());
    assert!(groups_gone(&pids), "the hung command's group outlived it");
}

/// Guards issue 24 item 10: when the close-out stops waiting, a command
/// still running is ended with its group (nothing is left under pid 1).
#[test]
fn a_notify_cmd_still_running_at_the_close_out_is_ended() {
    let d = tempfile::tempdir().unwrap();
    let pids = d.path().join("pids");
    let mut n = Notifier::start(Targets {
        cmd: Some(format!(
            "echo $$ >> {}; sleep 600 & sleep 600",
            pids.display()
        )),
        url: None,
        first_retry: Some(Duration::from_millis(50)),
        ..Targets::default()
    });
    n.send(note("a"));
    assert!(wait_until(Duration::from_secs(10), || pids.exists()));
    let t0 = Instant::now();
    assert!(n.finish(Duration::from_millis(200)).is_empty());
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    assert!(groups_gone(&pids), "the command outlived the close-out");
}
