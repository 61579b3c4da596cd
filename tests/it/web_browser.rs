//! The page of `drover web` in a real browser: headless Chromium driven
//! over WebDriver (tests/it/webdriver.rs) against a real `drover web` over
//! a real supervisor with sim panes and a sim run. The page loads with the
//! token and shows nothing without it; a lane's state change arrives within
//! a bound; agent- and board-written text shows as text and runs nothing;
//! approving from the page moves a blocked lane on, and is refused when the
//! server is read-only; a run is paused and resumed after a confirm; another
//! origin gets no data and answers nothing; a token replaced by
//! `--new-token` is refused; the page reconnects when the server is back.
//! Screenshots at phone and desktop sizes (docs/images/web-*.png).

mod harness;

use crate::common::{Drover, T, wait_until};
use crate::webdriver::Browser;
use harness::{
    DESKTOP, Foreign, LONG, PHONE, Web, asking_sim, block, page_state, pane_sel, port, signed_in,
    sim_run, state,
};
use serde_json::Value;

/// How soon a state change must reach the page (measured: see the prints).
const UPDATE_BOUND_MS: u64 = 3000;

/// Markup and escapes an agent or a board could write.
const IMG: &str = "<img src=x onerror=window.__pwned=1>";
const SCRIPT: &str = "<script>window.__pwned=1</script>";

/// `typeof window.__pwned` in the page: "undefined" unless something ran.
fn pwned(b: &Browser) -> String {
    b.exec("return typeof window.__pwned;", vec![])
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The status of a same-origin `fetch` of `path` from the page.
fn fetch_status(b: &Browser, path: &str) -> i64 {
    b.exec(
        "const x = new XMLHttpRequest(); x.open('GET', arguments[0], false); x.send(); return x.status;",
        vec![Value::from(path)],
    )
    .as_i64()
    .unwrap_or(-1)
}

/// Without the token a fresh browser gets a 401 and no data; with the
/// printed URL it lands on `/` (the token out of the address bar), its
/// cookie out of the page's reach, and sees the panes with their states.
#[test]
#[ignore = "needs chromium and chromedriver (apt-get install chromium chromium-driver); .ci/run installs them"]
fn the_page_loads_with_the_token_and_shows_nothing_without_it() {
    let d = Drover::new();
    d.sim("p1", "claude", None);
    d.ok(&["wait", "p1", "--until", "idle", "--timeout-ms", "20000"]);
    let web = Web::start(&d, port(), &[]);

    let b = Browser::start(PHONE.0, PHONE.1);
    b.goto(&format!("{}/", web.origin()));
    let text = b.body_text();
    assert!(!text.contains("p1"), "no data without the token:\n{text}");
    assert!(b.find("[data-testid=pane-row]").is_none(), "{text}");
    assert_eq!(fetch_status(&b, "/api/view"), 401, "the API refuses too");
    b.goto(&format!("{}/?token={}", web.origin(), "0".repeat(64)));
    assert!(
        b.find("[data-testid=pane-row]").is_none(),
        "a wrong token shows nothing:\n{}",
        b.body_text()
    );

    b.goto(&web.url);
    b.wait_find(&pane_sel("p1", ""), LONG);
    assert!(
        !b.url().contains("token="),
        "the token left the address bar: {}",
        b.url()
    );
    let cookies = b.exec("return document.cookie;", vec![]);
    assert!(
        !cookies.as_str().unwrap_or_default().contains(web.token()),
        "the cookie is HttpOnly: {cookies}"
    );
    assert!(
        wait_until(T, || page_state(&b, "p1").as_deref() == Some("idle")),
        "{}",
        b.body_text()
    );
    let conn = b.wait_find("[data-testid=conn]", T);
    assert!(wait_until(T, || b.try_text(&conn).as_deref() == Some("live")));
    let banner = b.wait_find("[data-testid=readonly-banner]", T);
    assert!(
        b.text(&banner).contains("drover web --allow-actions"),
        "read-only says so"
    );
}

/// Each state a sim lane goes through over several turns (working, done)
/// is drawn on the page, and its selected screen follows; the delay from the supervisor's `since_ms` (in the
/// row's `data-since`) to the page's clock when it drew it is printed
/// (median and worst) and bound.
#[test]
#[ignore = "needs chromium and chromedriver (apt-get install chromium chromium-driver); .ci/run installs them"]
fn a_lanes_state_change_reaches_the_page_within_a_bound() {
    const TURNS: usize = 6;
    let d = Drover::new();
    let script = d.scratch().join("turns.toml");
    std::fs::write(&script, "[[turn]]\nsteps = [{ work = 300 }, \"finish\"]\n").unwrap();
    d.sim("p1", "claude", Some(&script));
    d.ok(&["wait", "p1", "--until", "idle", "--timeout-ms", "20000"]);
    let web = Web::start(&d, port(), &[]);
    let b = signed_in(&web, DESKTOP);
    assert!(wait_until(T, || page_state(&b, "p1").as_deref() == Some("idle")));
    // Every (state, since) the row shows, with the page's clock when first
    // drawn (the same machine's clock as the supervisor's since_ms).
    b.exec(
        "window.__t0 = Date.now(); window.__seen = {};
         const look = () => {
           const row = document.querySelector('[data-testid=pane-row][data-pane=p1]');
           if (!row) return;
           const st = row.querySelector('[data-testid=pane-state]').textContent;
           const since = Number(row.querySelector('[data-since]').getAttribute('data-since'));
           const key = st + '@' + since;
           if (since >= window.__t0 && !(key in window.__seen)) window.__seen[key] = Date.now() - since;
         };
         new MutationObserver(look).observe(document.body, {subtree: true, childList: true, characterData: true});",
        vec![],
    );
    // Selected, its screen follows each new snapshot too.
    b.click(&pane_sel("p1", ""), T);
    b.wait_find("[data-testid=screen]", T);
    for k in 0..TURNS {
        d.ok(&["send", "p1", &format!("turn {k}")]);
        d.ok(&["wait", "p1", "--until", "done", "--timeout-ms", "20000"]);
    }
    let last = d.pane("p1").expect("p1")["observation"]["since_ms"]
        .as_u64()
        .unwrap_or(0);
    assert!(
        wait_until(T, || b
            .find(&pane_sel("p1", &format!("[data-since=\"{last}\"]")))
            .is_some()),
        "the page never drew the last turn's state:\n{}",
        b.body_text()
    );
    let last_prompt = format!("turn {}", TURNS - 1);
    let mut screen = String::new();
    assert!(
        wait_until(T, || {
            screen = b
                .find("[data-testid=screen]")
                .and_then(|e| b.try_text(&e))
                .unwrap_or_default();
            screen.contains(&last_prompt)
        }),
        "the selected pane's screen never showed {last_prompt:?}:\n{screen}"
    );
    let seen = b.exec("return window.__seen;", vec![]);
    let mut delays: Vec<u64> = seen
        .as_object()
        .map(|m| m.values().filter_map(Value::as_u64).collect())
        .unwrap_or_default();
    delays.sort_unstable();
    assert!(
        delays.len() >= TURNS,
        "each turn's states were drawn: {seen}"
    );
    let (median, worst) = (delays[delays.len() / 2], delays[delays.len() - 1]);
    println!(
        "web page update: {} state changes of a sim lane drawn {median} ms (median), {worst} ms (worst) after the supervisor saw them",
        delays.len()
    );
    assert!(
        worst <= UPDATE_BOUND_MS,
        "a state change took {worst} ms to reach the page: {seen}"
    );
}

/// A pane's screen and a task's title holding markup and terminal escapes
/// show on the page as the text they are; nothing of them runs.
#[test]
#[ignore = "needs chromium and chromedriver (apt-get install chromium chromium-driver); .ci/run installs them"]
fn agent_and_board_text_shows_as_text_and_runs_nothing() {
    let d = Drover::new().native();
    let line = format!("{IMG} {SCRIPT}");
    d.new_pane(
        "evil",
        &[],
        &[
            "sh",
            "-c",
            "printf '%s\\n\\033[31mRED\\033[0m \\033]0;osc-title\\007\\033[5Cafter-escapes\\n' \"$0\"; exec sleep 600",
            &line,
        ],
    );
    d.wait_text("evil", "after-escapes", T);
    let title = format!("{IMG} {SCRIPT} \u{1b}[31mred\u{1b}[0m");
    let _run = sim_run(&d, &[&title]);
    let web = Web::start(&d, port(), &[]);
    let b = signed_in(&web, DESKTOP);

    b.wait_find("[data-testid=task-title]", LONG);
    // Read in the page in one go (a live run redraws the row).
    let shown = b.exec(
        "return document.querySelector('[data-testid=task-title]').innerText;",
        vec![],
    );
    let shown = shown.as_str().unwrap_or_default();
    assert!(
        shown.contains(IMG) && shown.contains(SCRIPT) && shown.contains("[31mred"),
        "the title as text: {shown:?}"
    );
    b.click(&pane_sel("evil", ""), T);
    let mut screen = String::new();
    assert!(
        wait_until(T, || {
            screen = b
                .find("[data-testid=screen]")
                .and_then(|e| b.try_text(&e))
                .unwrap_or_default();
            screen.contains("after-escapes")
        }),
        "the screen never showed:\n{}",
        b.body_text()
    );
    assert!(
        screen.contains(IMG) && screen.contains(SCRIPT) && screen.contains("RED"),
        "the screen as text: {screen}"
    );
    assert!(!screen.contains("osc-title"), "{screen}");
    assert!(
        !screen.contains('\u{1b}'),
        "no escape reaches the page: {screen:?}"
    );
    let counts = b.exec(
        "return [document.images.length, document.scripts.length];",
        vec![],
    );
    assert_eq!(
        counts,
        serde_json::json!([0, 1]),
        "no element was made of it"
    );
    assert_eq!(pwned(&b), "undefined", "nothing ran");
}

/// Whether the button `sel` is disabled and its title, read in one go in
/// the page (an element found before a redraw would be stale).
fn button(b: &Browser, sel: &str) -> (bool, String) {
    let v = b.exec(
        "const e = document.querySelector(arguments[0]); return e ? [e.disabled, e.title] : null;",
        vec![Value::from(sel)],
    );
    assert!(v.is_array(), "no button {sel}: {}", b.body_text());
    (v[0] == true, v[1].as_str().unwrap_or_default().to_string())
}

/// Read-only: the buttons are disabled and say why; one forced on is
/// refused by the server and the page says why; the lane stays blocked.
/// With `--allow-actions`: Approve, then Confirm, and the lane goes on.
#[test]
#[ignore = "needs chromium and chromedriver (apt-get install chromium chromium-driver); .ci/run installs them"]
fn approve_from_the_page_moves_a_lane_on_and_read_only_refuses_it() {
    let d = Drover::new();
    asking_sim(&d, "p1");
    block(&d, "p1");
    let web = Web::start(&d, port(), &[]);
    let b = signed_in(&web, PHONE);
    let approve = "[data-testid=need-row][data-pane=p1] [data-testid=approve]";
    // The dialog's rows drawn: the page's last redraw before the state moves.
    b.wait_text("the dialog", LONG, |t| {
        t.contains("Do you want to proceed?")
    });
    let (disabled, why) = button(&b, approve);
    assert!(disabled, "read-only disables the button");
    assert!(why.contains("--allow-actions"), "and says why: {why}");
    // Forced on and clicked (in one go: a redraw would disable it again),
    // it reaches the server, which refuses.
    b.exec(
        "const e = document.querySelector(arguments[0]); e.disabled = false; e.click();",
        vec![Value::from(approve)],
    );
    b.click("[data-testid=confirm]", T);
    // The page shows the refusal.
    result_text(&b, |t| t.contains("read-only"));
    assert_eq!(state(&d, "p1"), "blocked", "the lane was not answered");
    let port = web.stop();

    let web = Web::start(&d, port, &["--allow-actions"]);
    b.goto(&format!("{}/", web.origin()));
    b.wait_text("the dialog", LONG, |t| {
        t.contains("Do you want to proceed?")
    });
    assert!(!button(&b, approve).0, "actions allowed");
    assert!(
        b.find("[data-testid=readonly-banner]:not([hidden])")
            .is_none()
    );
    b.click(approve, T);
    b.click("[data-testid=confirm]", T);
    assert!(
        wait_until(LONG, || state(&d, "p1") != "blocked"),
        "the lane is still blocked: {}",
        b.body_text()
    );
    d.ok(&["wait", "p1", "--until", "done", "--timeout-ms", "20000"]);
    assert!(
        wait_until(T, || page_state(&b, "p1")
            .is_some_and(|s| !s.starts_with("blocked"))),
        "{}",
        b.body_text()
    );
    let said = result_text(&b, |t| t.starts_with("Approve p1"));
    assert!(!said.contains("error"), "{said}");
}

/// The page's action result once `ok` holds for its text. The page shows
/// an action's answer when its request returns, which can be after the
/// lane or run has already moved, and until then the answer of the action
/// before it (or nothing).
fn result_text(b: &Browser, ok: impl Fn(&str) -> bool) -> String {
    let mut said = String::new();
    let held = wait_until(T, || {
        said = b
            .find("[data-testid=action-result]:not([hidden])")
            .and_then(|r| b.try_text(&r))
            .unwrap_or_default();
        ok(&said)
    });
    assert!(held, "the page's action result: {said:?}");
    said
}

/// Deny, and a dialog's own option by its label, each after a confirm,
/// end the turn the way the same keys would.
#[test]
#[ignore = "needs chromium and chromedriver (apt-get install chromium chromium-driver); .ci/run installs them"]
fn deny_and_an_option_label_answer_from_the_page() {
    let d = Drover::new();
    asking_sim(&d, "p1");
    block(&d, "p1");
    let web = Web::start(&d, port(), &["--allow-actions"]);
    let b = signed_in(&web, PHONE);
    let row = "[data-testid=need-row][data-pane=p1]";
    b.click(
        &format!("{row} [data-testid=choice][data-choice=\"No\"]"),
        LONG,
    );
    b.click("[data-testid=confirm]", T);
    assert!(
        wait_until(LONG, || state(&d, "p1") == "idle"),
        "the option No did not end the turn: {}; page:\n{}",
        state(&d, "p1"),
        b.body_text()
    );
    assert!(
        !d.scratch().join("made.txt").exists(),
        "denied: nothing made"
    );
    block(&d, "p1");
    b.click(&format!("{row} [data-testid=deny]"), LONG);
    b.click("[data-testid=confirm]", T);
    assert!(
        wait_until(LONG, || state(&d, "p1") == "idle"),
        "Deny did not end the turn: {}; page:\n{}",
        state(&d, "p1"),
        b.body_text()
    );
    result_text(&b, |t| t.starts_with("Deny p1: "));
}

/// `loop status 1 --json`'s state.
fn run_status(d: &Drover) -> String {
    let v: Value =
        serde_json::from_str(&d.ok(&["loop", "status", "1", "--json"])).unwrap_or_default();
    v["state"].as_str().unwrap_or("").to_string()
}

/// Pause asks first (Cancel leaves the run running), Confirm pauses it as
/// `loop control` does, with the page's token id as the reason, and the page
/// then offers Resume, which resumes it.
#[test]
#[ignore = "needs chromium and chromedriver (apt-get install chromium chromium-driver); .ci/run installs them"]
fn pausing_and_resuming_a_run_from_the_page_asks_first() {
    let d = Drover::new().native();
    let _run = sim_run(&d, &["Add the parser"]);
    let web = Web::start(&d, port(), &["--allow-actions"]);
    let b = signed_in(&web, PHONE);
    let pause = "[data-testid=run-row][data-run=\"1\"] [data-testid=pause]";
    b.click(pause, LONG);
    b.click("[data-testid=cancel]", T);
    assert!(b.find("[data-testid=confirm]").is_none(), "cancelled");
    assert_eq!(run_status(&d), "running", "nothing sent before Confirm");
    b.click(pause, T);
    b.click("[data-testid=confirm]", T);
    assert!(
        wait_until(LONG, || matches!(
            run_status(&d).as_str(),
            "pausing" | "paused"
        )),
        "never paused: {}; page:\n{}",
        run_status(&d),
        b.body_text()
    );
    let decisions = std::fs::read_to_string(d.state.join("loop1/DECISIONS.md")).unwrap_or_default();
    assert!(decisions.contains("pause: drover web "), "{decisions}");
    result_text(&b, |t| t.starts_with("Pause loop1: "));
    b.click(
        "[data-testid=run-row][data-run=\"1\"] [data-testid=resume]",
        LONG,
    );
    b.click("[data-testid=confirm]", T);
    assert!(
        wait_until(LONG, || run_status(&d) == "running"),
        "never resumed: {}; page:\n{}",
        run_status(&d),
        b.body_text()
    );
    b.wait_find(
        "[data-testid=run-row][data-run=\"1\"] [data-testid=pause]",
        LONG,
    );
}

/// A page from another origin (another port of the same host, so the
/// browser sends the signed-in cookie: same-site) that reads the API and
/// posts an answer with credentials gets no data and answers nothing.
#[test]
#[ignore = "needs chromium and chromedriver (apt-get install chromium chromium-driver); .ci/run installs them"]
fn another_origin_gets_no_data_and_answers_nothing() {
    let d = Drover::new();
    asking_sim(&d, "p1");
    block(&d, "p1");
    let since = d.pane("p1").expect("p1")["observation"]["since_ms"]
        .as_u64()
        .unwrap_or(0);
    let web = Web::start(&d, port(), &["--allow-actions"]);
    let b = signed_in(&web, DESKTOP);
    let body = format!(r#"{{"pane":"p1","action":"approve","choice":null,"since_ms":{since}}}"#);
    let attack = format!(
        "<!doctype html><title>elsewhere</title><script>
const D = {target:?}, B = {body:?};
window.__out = [];
const note = (what, p) => p.then(async r => window.__out.push(what + ' ' + r.status + ' ' + r.type + ' ' + (await r.text().catch(() => ''))),
                                 e => window.__out.push(what + ' failed ' + e));
Promise.allSettled([
  note('view', fetch(D + '/api/view', {{credentials: 'include'}})),
  note('view-no-cors', fetch(D + '/api/view', {{credentials: 'include', mode: 'no-cors'}})),
  note('answer', fetch(D + '/api/answer', {{method: 'POST', credentials: 'include', headers: {{'Content-Type': 'application/json'}}, body: B}})),
  note('answer-no-cors', fetch(D + '/api/answer', {{method: 'POST', credentials: 'include', mode: 'no-cors', headers: {{'Content-Type': 'text/plain'}}, body: B}})),
]).then(() => {{ window.__done = true; }});
</script>",
        target = web.origin(),
    );
    let foreign = Foreign::serve(attack);
    b.goto(&foreign.url());
    assert!(
        wait_until(T, || b.exec("return window.__done === true;", vec![])
            == true),
        "the foreign page never finished"
    );
    let out = b.exec("return window.__out;", vec![]);
    println!("from another origin: {out}");
    let text = out.to_string();
    assert!(
        !text.contains("p1"),
        "no data reached another origin: {text}"
    );
    assert!(!text.contains("\"ok\""), "no answer was made: {text}");
    assert_eq!(out.as_array().map(Vec::len), Some(4), "{text}");
    assert_eq!(state(&d, "p1"), "blocked", "the lane was not answered");
    // The drover page itself still works with the same cookie.
    b.goto(&format!("{}/", web.origin()));
    b.wait_find(&pane_sel("p1", ""), LONG);
}

/// After a restart with `--new-token` the open page says it is no longer
/// signed in, a reload shows nothing, the old URL is refused and the new
/// one works.
#[test]
#[ignore = "needs chromium and chromedriver (apt-get install chromium chromium-driver); .ci/run installs them"]
fn a_token_replaced_by_new_token_is_refused() {
    let d = Drover::new();
    d.sim("p1", "claude", None);
    d.ok(&["wait", "p1", "--until", "idle", "--timeout-ms", "20000"]);
    let web = Web::start(&d, port(), &[]);
    let old = web.url.clone();
    let b = signed_in(&web, PHONE);
    let port = web.stop();
    let web = Web::start(&d, port, &["--new-token"]);
    assert_ne!(web.url, old, "a new token");
    b.wait_text("the page signed out", LONG, |t| {
        t.contains("disconnected since") && t.contains("not signed in")
    });
    b.goto(&format!("{}/", web.origin()));
    assert!(
        b.find("[data-testid=pane-row]").is_none(),
        "{}",
        b.body_text()
    );
    b.goto(&old);
    assert!(
        b.find("[data-testid=pane-row]").is_none(),
        "{}",
        b.body_text()
    );
    assert_eq!(fetch_status(&b, "/api/view"), 401);
    b.goto(&web.url);
    b.wait_find(&pane_sel("p1", ""), LONG);
}

/// When `drover web` goes away the open page says since when it is
/// disconnected; when it is back (same token) the page reconnects by itself
/// and follows changes again.
#[test]
#[ignore = "needs chromium and chromedriver (apt-get install chromium chromium-driver); .ci/run installs them"]
fn the_page_reconnects_when_drover_web_is_back() {
    let d = Drover::new();
    asking_sim(&d, "p1");
    let web = Web::start(&d, port(), &[]);
    let b = signed_in(&web, PHONE);
    let port = web.stop();
    b.wait_text("disconnected", LONG, |t| t.contains("disconnected since"));
    let _web = Web::start(&d, port, &[]);
    let conn = b.wait_find("[data-testid=conn]", T);
    assert!(
        wait_until(LONG, || b.try_text(&conn).as_deref() == Some("live")),
        "never live again: {}",
        b.body_text()
    );
    block(&d, "p1");
    assert!(
        wait_until(LONG, || page_state(&b, "p1")
            .is_some_and(|s| s.starts_with("blocked"))),
        "no change followed after the reconnect:\n{}",
        b.body_text()
    );
}

/// The page with a blocked lane and a run, at phone and desktop sizes:
/// checked for what they must show, and written to docs/images when
/// `DROVER_WEB_SCREENSHOTS=1`.
#[test]
#[ignore = "needs chromium and chromedriver (apt-get install chromium chromium-driver); .ci/run installs them"]
fn screenshots_at_phone_and_desktop_sizes() {
    let d = Drover::new().native();
    asking_sim(&d, "review-docs");
    block(&d, "review-docs");
    let _run = sim_run(&d, &["Add the parser", "Document the flags"]);
    let web = Web::start(&d, port(), &["--allow-actions"]);
    let write = std::env::var("DROVER_WEB_SCREENSHOTS").is_ok_and(|v| v == "1");
    for (name, size) in [("web-phone.png", PHONE), ("web-desktop.png", DESKTOP)] {
        let b = signed_in(&web, size);
        b.wait_text("the dialog's rows", LONG, |t| {
            t.contains("Do you want to proceed?")
        });
        b.wait_find("[data-testid=run-row] [data-testid=task-title]", LONG);
        let wide = b.exec(
            "const e = document.documentElement; return e.scrollWidth > e.clientWidth;",
            vec![],
        );
        assert_eq!(wide, false, "no sideways scroll at {size:?}");
        let path = if write {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("docs/images")
                .join(name)
        } else {
            d.scratch().join(name)
        };
        b.screenshot(&path);
        let png = std::fs::read(&path).expect("the screenshot");
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
        println!("{}: {} bytes", path.display(), png.len());
    }
}
