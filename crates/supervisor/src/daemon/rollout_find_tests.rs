use super::*;

const T1: &str = "0199aaaa-0000-7000-8000-000000000001";
const T2: &str = "0199aaaa-0000-7000-8000-000000000002";
const T3: &str = "0199aaaa-0000-7000-8000-000000000003";

struct Home {
    _dir: tempfile::TempDir,
    home: PathBuf,
    cwd: PathBuf,
    other: PathBuf,
}

fn home() -> Home {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("codex");
    let cwd = dir.path().join("lane");
    let other = dir.path().join("other");
    std::fs::create_dir_all(&cwd).unwrap();
    std::fs::create_dir_all(&other).unwrap();
    let cwd = std::fs::canonicalize(&cwd).unwrap();
    Home {
        _dir: dir,
        home,
        cwd,
        other,
    }
}

/// A rollout of `cwd` in day folder `day` (`YYYY/MM/DD`), its first line
/// whole or torn.
fn rollout(h: &Home, day: &str, thread: &str, cwd: &Path, whole: bool) -> PathBuf {
    let d = h.home.join("sessions").join(day);
    std::fs::create_dir_all(&d).unwrap();
    let p = d.join(format!("rollout-2026-12-06T08-00-00-{thread}.jsonl"));
    let meta = serde_json::json!({
        "timestamp": "2026-12-06T08:00:00.000Z",
        "type": "session_meta",
        "payload": {"id": thread, "cwd": cwd},
    });
    let mut text = meta.to_string();
    if whole {
        text.push('\n');
    } else {
        text.truncate(text.len() / 2);
    }
    std::fs::write(&p, text).unwrap();
    p
}

fn want(h: &Home, since_ms: u64, thread: Option<&str>) -> Want {
    Want {
        home: h.home.clone(),
        cwd: h.cwd.clone(),
        since_ms,
        thread: thread.map(str::to_string),
        exclude: Vec::new(),
    }
}

#[test]
fn the_newest_file_of_the_panes_cwd_made_since_it_started() {
    let h = home();
    let before = crate::paths::now_ms();
    let mine = rollout(&h, "2026/12/06", T1, &h.cwd, true);
    rollout(&h, "2026/12/06", T2, &h.other, true);
    let got = find(&want(&h, before, None)).unwrap();
    assert_eq!(
        got,
        Found {
            path: mine.clone(),
            fresh: true
        }
    );
    // A later one of the same cwd (a new session in the pane) wins.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let later = rollout(&h, "2026/12/06", T3, &h.cwd, true);
    assert_eq!(find(&want(&h, before, None)).unwrap().path, later);
}

#[test]
fn a_file_made_before_the_pane_or_of_another_cwd_is_never_taken() {
    let h = home();
    rollout(&h, "2026/12/06", T1, &h.cwd, true);
    rollout(&h, "2026/12/06", T2, &h.other, true);
    let after = crate::paths::now_ms() + 60_000;
    assert_eq!(find(&want(&h, after, None)), None, "made before the pane");
    // The notify naming a thread of another cwd does not make it the pane's.
    let since = crate::paths::now_ms() - 5_000;
    let got = find(&want(&h, since, Some(T2))).unwrap();
    assert!(
        got.path
            .ends_with(format!("rollout-2026-12-06T08-00-00-{T1}.jsonl"))
    );
}

#[test]
fn the_notified_thread_wins_even_when_older_but_not_read_from_its_start() {
    let h = home();
    let old = rollout(&h, "2026/12/05", T1, &h.cwd, true);
    let since = crate::paths::now_ms() + 60_000;
    rollout(&h, "2026/12/06", T2, &h.cwd, true);
    assert_eq!(
        find(&want(&h, since, Some(T1))),
        Some(Found {
            path: old,
            fresh: false
        })
    );
}

#[test]
fn a_torn_first_line_is_no_session_yet() {
    let h = home();
    let since = crate::paths::now_ms();
    let p = rollout(&h, "2026/12/06", T1, &h.cwd, false);
    assert_eq!(find(&want(&h, since, None)), None);
    assert_eq!(rollout(&h, "2026/12/06", T1, &h.cwd, true), p);
    assert_eq!(find(&want(&h, since, None)).unwrap().path, p);
}

#[test]
fn a_symlinked_cwd_is_the_same_cwd() {
    let h = home();
    let link = h.cwd.parent().unwrap().join("link");
    std::os::unix::fs::symlink(&h.cwd, &link).unwrap();
    let since = crate::paths::now_ms();
    let p = rollout(&h, "2026/12/06", T1, &link, true);
    assert_eq!(find(&want(&h, since, None)).unwrap().path, p);
}

#[test]
fn only_the_two_newest_days_are_looked_in() {
    let h = home();
    for d in ["2025/01/01", "2026/11/30", "2026/12/01"] {
        std::fs::create_dir_all(h.home.join("sessions").join(d)).unwrap();
    }
    let days = day_dirs(&h.home);
    assert_eq!(days.len(), 2);
    assert!(days[0].ends_with("2026/12/01") && days[1].ends_with("2026/11/30"));
}

#[test]
fn codex_home_is_codex_home_else_home_dot_codex() {
    let none = |_: &str| None;
    let cwd = Path::new("/w");
    let env = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
    assert_eq!(
        codex_home(&env("CODEX_HOME", "/c"), none, cwd),
        Some(PathBuf::from("/c"))
    );
    assert_eq!(
        codex_home(&env("CODEX_HOME", "rel"), none, cwd),
        Some(PathBuf::from("/w/rel"))
    );
    assert_eq!(
        codex_home(&env("HOME", "/h"), |_| Some("/x".into()), cwd),
        Some(PathBuf::from("/x"))
    );
    assert_eq!(
        codex_home(&[], |k| (k == "HOME").then(|| "/h".into()), cwd),
        Some(PathBuf::from("/h/.codex"))
    );
    assert_eq!(codex_home(&[], none, cwd), None);
}

#[test]
fn a_previous_generations_file_is_not_the_new_ones() {
    let h = home();
    let since = crate::paths::now_ms();
    let old = rollout(&h, "2026/12/06", T1, &h.cwd, true);
    let mut w = want(&h, since, None);
    w.exclude = vec![old.clone()];
    assert_eq!(find(&w), None);
    let new = rollout(&h, "2026/12/06", T2, &h.cwd, true);
    assert_eq!(find(&w).unwrap().path, new);
    w.thread = Some(T1.into());
    assert_eq!(find(&w).unwrap().path, old, "unless its notify names it");
}
