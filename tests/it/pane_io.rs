//! Input and output of native panes: paste, keys, resize, full-screen
//! rendering, raw reads, scrollback, terminal queries, hostile output.

use crate::common;
use common::*;
use std::time::Duration;

/// A raw-mode `cat -v`: the screen shows exactly the bytes the app received.
const RAW_CAT: &str = "stty raw -echo; printf 'ready\\r\\n'; exec cat -vt";
/// The same after the app enabled bracketed paste (mode 2004).
const RAW_CAT_2004: &str = "stty raw -echo; printf '\\033[?2004hready\\r\\n'; exec cat -vt";

#[test]
fn send_uses_bracketed_paste_when_enabled_then_enter() {
    let d = Drover::new();
    d.new_pane("bp", &[], &["sh", "-c", RAW_CAT_2004]);
    d.wait_text("bp", "ready", T);
    d.ok(&["pane", "send", "bp", "hello world"]);
    let s = d.wait_text("bp", "^M", T);
    assert!(
        s.contains("^[[200~hello world^[[201~^M"),
        "paste then a separate Enter:\n{s}"
    );
    // A paste cannot end itself early: an embedded end marker is removed.
    d.ok(&["pane", "send", "bp", "--no-enter", "a\x1b[201~b"]);
    let s = d.wait_text("bp", "^[[200~ab^[[201~", T);
    assert_eq!(s.matches("^M").count(), 1, "--no-enter sent Enter:\n{s}");
}

#[test]
fn send_without_mode_2004_is_plain_text_then_enter() {
    let d = Drover::new();
    d.new_pane("plain", &[], &["sh", "-c", RAW_CAT]);
    d.wait_text("plain", "ready", T);
    d.ok(&["pane", "send", "plain", "hello"]);
    let s = d.wait_text("plain", "^M", T);
    assert!(s.contains("hello^M"), "{s}");
    assert!(
        !s.contains("200~"),
        "no paste markers without mode 2004:\n{s}"
    );
}

#[test]
fn named_keys_reach_the_app() {
    let d = Drover::new();
    d.new_pane("keys", &[], &["sh", "-c", RAW_CAT]);
    d.wait_text("keys", "ready", T);
    d.ok(&[
        "pane", "keys", "keys", "Up", "Tab", "C-c", "Esc", "y", "1", "F5", "BTab", "Enter",
    ]);
    let s = d.wait_text("keys", "^M", T);
    assert!(s.contains("^[[A^I^C^[y1^[[15~^[[Z^M"), "{s}");
}

/// After DECCKM (`ESC [?1h`) the arrows use the application encoding.
#[test]
fn cursor_keys_follow_application_mode() {
    let d = Drover::new();
    let script = "stty raw -echo; printf '\\033[?1hready\\r\\n'; exec cat -vt";
    d.new_pane("app", &[], &["sh", "-c", script]);
    d.wait_text("app", "ready", T);
    d.ok(&["pane", "keys", "app", "Up", "Left", "Enter"]);
    let s = d.wait_text("app", "^M", T);
    assert!(s.contains("^[OA^[OD^M"), "{s}");
}

#[test]
fn unknown_keys_are_usage_errors_and_nothing_is_sent() {
    let d = Drover::new();
    d.new_pane("uk", &[], &["sh", "-c", RAW_CAT]);
    d.wait_text("uk", "ready", T);
    for bad in ["Foo", "C-", "F13", "C-ab"] {
        let out = d.run(&["pane", "keys", "uk", "y", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", stderr(&out));
        assert!(stderr(&out).contains("unknown key"), "{}", stderr(&out));
    }
    d.ok(&["pane", "keys", "uk", "z", "Enter"]);
    let s = d.wait_text("uk", "^M", T);
    assert!(s.ends_with("ready\nz^M\n"), "partial sends leaked:\n{s}");
}

#[test]
fn resize_reaches_the_app() {
    let d = Drover::new();
    d.new_pane("rs", &["--size", "100x30", "--env", "PS1=$ "], &["sh"]);
    d.ok(&["pane", "send", "rs", "stty size"]);
    d.wait_text("rs", "30 100", T);
    for bad in ["0x0", "5", "10x0"] {
        let out = d.run(&["pane", "resize", "rs", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
    }
    d.ok(&["pane", "resize", "rs", "90x25"]);
    let p = d.pane("rs").unwrap();
    assert_eq!(
        (p["cols"].as_u64(), p["rows"].as_u64()),
        (Some(90), Some(25))
    );
    d.ok(&["pane", "send", "rs", "clear; stty size"]);
    d.wait_text("rs", "25 90", T);
}

/// An app that redraws at once on SIGWINCH: clears the screen and writes
/// `COLSxROWS` ending at the terminal's last cell (the size from TIOCGWINSZ).
const WINCH_DRAW: &str = r#"$| = 1;
sub draw {
    my $b = "\0" x 8;
    ioctl(STDOUT, 0x5413, $b) or die "TIOCGWINSZ: $!";
    my ($r, $c) = unpack("S2", $b);
    my $m = "${c}x${r}";
    printf "\e[2J\e[Hdrawn\e[%d;%dH%s", $r, $c - length($m) + 1, $m;
}
$SIG{WINCH} = \&draw;
draw();
sleep 1000 while 1;
"#;

/// The frame an app draws the moment it sees its new size lands in a screen
/// of that size, however soon after the resize it is read: the last row ends
/// with the size at the last column. (On tmux the app can be handed the size
/// before drover has the reply to its resize; a model resized only then
/// clipped that frame into the old size, and it stayed so.)
#[test]
fn the_frame_drawn_on_sigwinch_lands_at_the_new_size() {
    let d = Drover::new();
    d.new_pane("w", &["--size", "80x24"], &["perl", "-e", WINCH_DRAW]);
    d.wait_text("w", "80x24", T);
    for (c, r) in [
        (200u16, 60u16),
        (80, 24),
        (150, 50),
        (60, 20),
        (200, 60),
        (100, 30),
        (80, 24),
        (180, 45),
        (80, 24),
        (200, 60),
        (120, 40),
        (60, 20),
    ] {
        // tmux hands a resize to the app at once only when it applied none
        // in the last 250 ms (its pane resize timer; later ones wait for
        // it): each resize here is one it applies at once, the race this
        // test is about.
        std::thread::sleep(Duration::from_millis(300));
        let size = format!("{c}x{r}");
        d.ok(&["pane", "resize", "w", &size]);
        let mut last = String::new();
        let drawn = wait_until(Duration::from_secs(10), || {
            last = d.read("w");
            let lines: Vec<&str> = last.lines().collect();
            lines.first() == Some(&"drawn")
                && lines.len() == usize::from(r)
                && lines
                    .last()
                    .is_some_and(|l| l.ends_with(&size) && l.chars().count() == usize::from(c))
        });
        assert!(
            drawn,
            "the frame for {size} is not at {size}; screen:\n{last}"
        );
    }
}

/// A small alternate-screen program: positioned text on the alt screen, and
/// the main screen back intact when it leaves.
#[test]
fn alternate_screen_program_renders_right() {
    let d = Drover::new();
    let script = "printf 'main-screen-text\\n'; \
        printf '\\033[?1049h\\033[H\\033[2JTOP-LEFT\\033[20;10HMIDDLE\\033[40;111HCORNER'; \
        read x; printf '\\033[?1049l'; printf 'after\\n'; sleep 1000";
    d.new_pane("alt", &["--size", "120x40"], &["sh", "-c", script]);
    let s = d.wait_text("alt", "CORNER", T);
    let lines: Vec<&str> = s.lines().collect();
    assert_eq!(lines[0], "TOP-LEFT", "{s}");
    assert_eq!(lines[19], format!("{}MIDDLE", " ".repeat(9)), "{s}");
    assert_eq!(lines[39], format!("{}CORNER", " ".repeat(110)), "{s}");
    assert!(
        !s.contains("main-screen-text"),
        "alt screen shows main:\n{s}"
    );
    d.ok(&["pane", "send", "alt", ""]);
    let s = d.wait_text("alt", "after", T);
    assert!(s.starts_with("main-screen-text\n"), "{s}");
    assert!(!s.contains("MIDDLE"), "{s}");
}

/// vim: a real full-screen TUI renders its buffer, tildes and status line.
#[test]
#[ignore = "needs vim"]
fn vim_renders_right() {
    let d = Drover::new();
    let dir = d.scratch();
    let file = dir.join("poem.txt");
    std::fs::write(&file, "alpha line\nbeta line\ngamma line\n").unwrap();
    d.new_pane(
        "vim",
        &["--size", "80x24", "--cwd", dir.to_str().unwrap()],
        &["vim", "-u", "NONE", "-N", "-n", "-i", "NONE", "poem.txt"],
    );
    // vim may draw its message line before the buffer: wait for both.
    d.wait_text("vim", "\"poem.txt\" 3L", T);
    let s = d.wait_text("vim", "gamma line", T);
    let lines: Vec<&str> = s.lines().collect();
    assert_eq!(
        &lines[..3],
        ["alpha line", "beta line", "gamma line"],
        "{s}"
    );
    assert!(lines[3..23].iter().all(|l| *l == "~"), "{s}");
    assert!(lines[23].starts_with("\"poem.txt\" 3L"), "{s}");
    // Edit through keys: go to line 2, replace the word, check the grid.
    d.ok(&["pane", "keys", "vim", "j", "c", "w"]);
    d.ok(&["pane", "send", "vim", "--no-enter", "BETA"]);
    d.ok(&["pane", "keys", "vim", "Esc"]);
    d.wait_text("vim", "BETA line", T);
    // vim enabled bracketed paste, so `send` would paste: commands are keys.
    d.ok(&["pane", "keys", "vim", ":", "q", "!", "Enter"]);
    let out = d.wait_state(&["vim"], "exited", 10_000);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let s = d.read("vim");
    assert!(!s.contains("BETA line"), "alt screen left behind:\n{s}");
}

#[test]
fn read_raw_keeps_sgr_plain_does_not() {
    let d = Drover::new();
    let script =
        "printf '\\033[1;31mRED\\033[0m plain \\033[38;5;208mORANGE\\033[0m\\n'; sleep 1000";
    d.new_pane("sgr", &[], &["sh", "-c", script]);
    let plain = d.wait_text("sgr", "ORANGE", T);
    assert!(plain.contains("RED plain ORANGE"), "{plain}");
    assert!(!plain.contains('\x1b'), "plain read has escapes: {plain:?}");
    let raw = d.ok(&["pane", "read", "sgr", "--raw"]);
    assert!(raw.contains("\x1b["), "raw read without SGR: {raw:?}");
    let sgr_before = |word: &str| {
        let i = raw.find(word).unwrap();
        let esc = raw[..i].rfind('\x1b').unwrap();
        raw[esc..i].to_string()
    };
    let red = sgr_before("RED");
    assert!(
        red.ends_with('m') && red.contains("31") && red.contains('1'),
        "{red:?}"
    );
    assert_eq!(sgr_before("ORANGE"), "\x1b[38;5;208m");
    let json: serde_json::Value =
        serde_json::from_str(&d.ok(&["pane", "read", "sgr", "--json"])).unwrap();
    assert_eq!(json["cols"], 120);
    assert!(json["text"].as_str().unwrap().contains("RED plain"));
}

#[test]
fn scrollback_rows_come_before_the_screen_in_order() {
    let d = Drover::new();
    d.new_pane(
        "sb",
        &["--size", "80x24"],
        &["sh", "-c", "seq 1 200; sleep 1000"],
    );
    let screen = d.wait_text("sb", "200", T);
    let nums = |s: &str| -> Vec<u32> { s.lines().filter_map(|l| l.parse().ok()).collect() };
    let vis = nums(&screen);
    assert_eq!(vis.first(), Some(&178), "{screen}");
    assert_eq!(vis.last(), Some(&200));
    let with = d.ok(&["pane", "read", "sb", "--scrollback", "50"]);
    let all = nums(&with);
    let want: Vec<u32> = (128..=200).collect();
    assert_eq!(all, want, "{with}");
    // Asking for more than exists returns what exists, from 1.
    let every = nums(&d.ok(&["pane", "read", "sb", "--scrollback", "100000"]));
    assert_eq!(every, (1..=200).collect::<Vec<u32>>());
}

/// DA1, DSR 5 and DSR 6 are answered while no client is attached: a script
/// that blocks on each reply finishes and prints what it got.
#[test]
fn terminal_queries_are_answered_while_detached() {
    let d = Drover::new();
    if !on_native() {
        // On tmux, tmux is the app's terminal and answers (it has no DECRQM).
        let script = r#"stty -echo -icanon
printf '\033[5;10H\033[6n'; IFS= read -r -d R pos
printf '\033[5n'; IFS= read -r -d n st
printf '\033[H\033[2J'
echo "POS=${pos#*[}"; echo "ST=${st#*[}"
sleep 1000"#;
        d.new_pane("q", &[], &["bash", "--norc", "--noprofile", "-c", script]);
        let s = d.wait_text("q", "ST=", T);
        assert!(s.contains("POS=5;10\n"), "{s}");
        assert!(s.contains("ST=0\n"), "{s}");
        return;
    }
    let script = r#"stty -echo -icanon
printf '\033[5;10H\033[6n'; IFS= read -r -d R pos
printf '\033[c'; IFS= read -r -d c da
printf '\033[5n'; IFS= read -r -d n st
printf '\033[?2004h\033[?2004$p'; IFS= read -r -d y rqm
printf '\033[H\033[2J'
echo "POS=${pos#*[}"; echo "DA=${da#*[}"; echo "ST=${st#*[}"; echo "RQM=${rqm#*[}"
sleep 1000"#;
    d.new_pane("q", &[], &["bash", "--norc", "--noprofile", "-c", script]);
    let s = d.wait_text("q", "RQM=", T);
    assert!(s.contains("POS=5;10\n"), "{s}");
    assert!(s.contains("DA=?62;22\n"), "{s}");
    assert!(s.contains("ST=0\n"), "{s}");
    assert!(s.contains("RQM=?2004;1$"), "{s}");
}

/// Hostile escapes (OSC 52 clipboard writes, title floods, C1 controls) never
/// reach a reader of `pane read`.
#[test]
fn hostile_output_is_sanitised() {
    let d = Drover::new();
    let script = "printf '\\033]52;c;aGVsbG8=\\007'; \
        i=0; while [ $i -lt 2000 ]; do printf '\\033]0;title-%s-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\\007' $i; i=$((i+1)); done; \
        printf 'visible \\302\\233 end\\n'; sleep 1000";
    d.new_pane("evil", &[], &["sh", "-c", script]);
    let s = d.wait_text("evil", "end", T);
    assert!(!s.chars().any(|c| c.is_control() && c != '\n'), "{s:?}");
    let v: serde_json::Value =
        serde_json::from_str(&d.ok(&["pane", "read", "evil", "--json"])).unwrap();
    let title = v["title"].as_str().unwrap_or_default();
    assert!(title.starts_with("title-1999"), "{title}");
}

/// Binary garbage and a 10 MB line: the supervisor keeps answering, the pane
/// stays readable, and the output after the flood renders.
#[test]
fn binary_garbage_and_huge_line_are_contained() {
    let d = Drover::new();
    d.new_pane(
        "garbage",
        &[],
        &[
            "sh",
            "-c",
            "head -c 3000000 /dev/urandom; printf '\\033c'; echo GARBAGE-DONE; sleep 1000",
        ],
    );
    d.new_pane(
        "line",
        &[],
        &[
            "sh",
            "-c",
            "head -c 10000000 /dev/zero | tr '\\0' x; printf '\\nLINE-DONE\\n'; sleep 1000",
        ],
    );
    let s = d.wait_text("line", "LINE-DONE", Duration::from_secs(60));
    assert!(s.contains("LINE-DONE"), "{s}");
    assert!(s.contains(&"x".repeat(120)), "{s}");
    let p = d.pane("line").unwrap();
    assert!(p["bytes"].as_u64().unwrap() >= 10_000_000, "{p}");
    d.wait_text("garbage", "GARBAGE-DONE", Duration::from_secs(60));
    assert!(d.pane("garbage").unwrap()["exit"].is_null());
    // Still answering, still creating panes.
    d.new_pane("after", &[], &["true"]);
}

/// Regression: input to a pane whose app does not read used to block the PTY
/// write under the pane lock on a tokio worker, hanging the whole supervisor.
/// Input now goes through a bounded per-pane writer thread.
#[test]
fn input_to_a_pane_that_does_not_read_never_hangs_the_supervisor() {
    let d = Drover::new();
    let info = d.new_pane("deaf", &[], &["sleep", "1000"]);
    let big = "a".repeat(120_000);
    let sends: Vec<_> = (0..3)
        .map(|_| {
            d.cmd()
                .args(["pane", "send", "deaf", &big])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    // Give the sends their chance to finish (they should, or fail).
    let mut sends = sends;
    wait_until(Duration::from_secs(5), || {
        sends.iter_mut().all(|s| s.try_wait().unwrap().is_some())
    });
    // Each probe is bounded itself: a hung supervisor never answers.
    let answered = wait_until(T, || {
        let mut ls = d
            .cmd()
            .args(["pane", "ls"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let done = wait_until(Duration::from_secs(2), || {
            ls.try_wait().unwrap().is_some_and(|s| s.success())
        });
        let _ = ls.kill();
        let _ = ls.wait();
        done
    });
    for mut s in sends {
        let _ = s.kill();
        let _ = s.wait();
    }
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(pid_of(&info)),
        nix::sys::signal::Signal::SIGKILL,
    );
    assert!(answered, "supervisor stopped answering");
}

/// Regression, same root cause: an app in raw mode that floods DSR queries
/// and never reads its input used to block the reader thread writing the
/// replies under the pane lock. Replies are now queued and dropped when full.
#[test]
fn query_flood_from_an_app_that_does_not_read_is_contained() {
    let d = Drover::new();
    let info = d.new_pane(
        "flood",
        &[],
        &[
            "sh",
            "-c",
            "stty raw -echo; while :; do printf '\\033[6n\\033[6n\\033[6n\\033[6n'; done",
        ],
    );
    // Keep asking while the flood runs: every answer must come, and the
    // pane must keep being read (its byte count grows past 2 MB).
    let mut hung = false;
    let grew = wait_until(Duration::from_secs(20), || {
        match bounded(&d, &["pane", "ls", "--json"]) {
            Some(out) => {
                let v: serde_json::Value = serde_json::from_str(&out).unwrap();
                v[0]["bytes"].as_u64().unwrap_or(0) > 2_000_000
            }
            None => {
                hung = true;
                true
            }
        }
    });
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(pid_of(&info)),
        nix::sys::signal::Signal::SIGKILL,
    );
    assert!(!hung, "supervisor stopped answering");
    assert!(grew, "the pane's output stopped being read");
}

/// Run `drover ARGS` for at most 3 s; stdout when it succeeded in time.
fn bounded(d: &Drover, args: &[&str]) -> Option<String> {
    let mut c = d
        .cmd()
        .args(args)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let done = wait_until(Duration::from_secs(3), || c.try_wait().unwrap().is_some());
    if !done {
        let _ = c.kill();
    }
    let out = c.wait_with_output().unwrap();
    (done && out.status.success()).then(|| String::from_utf8(out.stdout).unwrap())
}
