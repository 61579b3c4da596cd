//! `drover attach` on a herdr pane (docs/herdr.md), on the real herdr where one is installed (else the fake):
//! the attach client runs in a PTY this test owns (the operator's
//! terminal); its typing reaches the pane as herdr keys and text.

use crate::common;
use crate::herdr_common;
use common::*;
use herdr_common::*;
use portable_pty::{CommandBuilder, PtySize, native_pty_system};
use std::io::Write;

/// Guards: attaching to a herdr pane from a terminal failed, because the
/// attach asked for the terminal's size and herdr panes refuse resize.
#[test]
fn herdr_attach_works_from_a_terminal_and_typing_reaches_the_pane() {
    let fx = herdr();
    let d = drover(&fx);
    herdr_pane(&d, "att", &[], &["sh"]);
    d.ok(&["pane", "send", "att", "echo before-$((1+1))"]);
    d.wait_text("att", "before-2", LONG);
    let pair = native_pty_system()
        .openpty(PtySize {
            rows: 30,
            cols: 100,
            pixel_width: 0,
            pixel_height: 0,
        })
        .unwrap();
    let mut cmd = CommandBuilder::new(BIN);
    cmd.args(["attach", "att"]);
    cmd.env("DROVER_STATE_DIR", &d.state);
    cmd.env("TERM", "xterm-256color");
    let mut child = pair.slave.spawn_command(cmd).unwrap();
    let seen = collect_output(pair.master.try_clone_reader().unwrap());
    let mut writer = pair.master.take_writer().unwrap();
    let shown = |needle: &str| String::from_utf8_lossy(&seen.lock().unwrap()).contains(needle);
    assert!(
        wait_until(LONG, || shown("before-2")),
        "the attach replayed the screen: {:?}",
        String::from_utf8_lossy(&seen.lock().unwrap())
    );
    assert!(
        wait_until(LONG, || d
            .pane("att")
            .is_some_and(|p| p["attached"] == true)),
        "attached"
    );
    writer.write_all(b"echo typed-$((6*7))\r").unwrap();
    writer.flush().unwrap();
    d.wait_text("att", "typed-42", LONG);
    assert!(wait_until(LONG, || shown("typed-42")));
    writer.write_all(b"\x1c").unwrap();
    writer.flush().unwrap();
    let mut code = None;
    assert!(wait_until(LONG, || {
        code = child.try_wait().unwrap().map(|s| s.exit_code());
        code.is_some()
    }));
    assert_eq!(code, Some(0), "detached cleanly");
    assert_eq!(d.pane("att").unwrap()["attached"], false);
}
