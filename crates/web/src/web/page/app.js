"use strict";
// The page of `drover web` (docs/web.md): the server's snapshot, live over
// server-sent events, drawn needs-you first. Everything the server sends
// goes into the page as text (createElement + textContent, never markup):
// screen rows and task titles are written by agents and boards.
(function () {
  const BACKOFF_MIN_MS = 1000;
  const BACKOFF_MAX_MS = 30000;
  const AGO_TICK_MS = 15000;
  const DIALOG_ROWS = 12;
  const READ_ONLY_WHY =
    "read-only: start `drover web --allow-actions` to answer from here";
  const NEEDS = ["blocked", "parked", "stalled", "done"];

  const ui = {
    view: null,
    selected: null, // pane name whose screen is shown
    pending: null, // {kind, key, label, body}: an action awaiting its confirm
    disconnectedAt: null,
    backoff: BACKOFF_MIN_MS,
    dialogs: new Map(), // pane → {since, lines}: a blocked pane's dialog rows
    screenAsk: 0,
    busy: false,
  };

  const $ = (id) => document.getElementById(id);

  // An element with properties; children are nodes or strings (as text).
  function h(tag, props, children) {
    const e = document.createElement(tag);
    const p = props || {};
    if (p.cls) e.className = p.cls;
    if (p.testid) e.setAttribute("data-testid", p.testid);
    if (p.data) {
      for (const k of Object.keys(p.data)) e.setAttribute("data-" + k, String(p.data[k]));
    }
    if (p.text !== undefined && p.text !== null) e.textContent = String(p.text);
    if (p.title) e.title = p.title;
    if (p.type) e.type = p.type;
    if (p.disabled) e.disabled = true;
    if (p.onclick) e.addEventListener("click", p.onclick);
    for (const c of children || []) {
      if (c === null || c === undefined || c === false) continue;
      e.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    }
    return e;
  }

  function clear(e) {
    while (e.firstChild) e.removeChild(e.firstChild);
  }

  function ago(ms) {
    if (!ms) return "—";
    const s = Math.max(0, Math.floor((Date.now() - ms) / 1000));
    if (s < 60) return s + "s ago";
    if (s < 3600) return Math.floor(s / 60) + "m ago";
    if (s < 86400) return Math.floor(s / 3600) + "h ago";
    return Math.floor(s / 86400) + "d ago";
  }

  function since(ms) {
    return h("span", { cls: "since", testid: "since", data: { since: ms || 0 }, text: ago(ms) });
  }

  function clock(d) {
    return d.toTimeString().slice(0, 8);
  }

  function stateWord(p) {
    return p.blocked_kind ? p.state + ":" + p.blocked_kind : p.state;
  }

  // ---- actions -----------------------------------------------------------

  function showResult(ok, text) {
    const r = $("result");
    r.hidden = false;
    r.className = "result " + (ok ? "ok" : "err");
    r.textContent = text;
  }

  async function post(path, body) {
    let res;
    try {
      res = await fetch(path, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(body),
        credentials: "same-origin",
      });
    } catch (e) {
      return { ok: false, text: "drover web did not answer: " + e.message };
    }
    let answer = null;
    const raw = await res.text().catch(() => "");
    try {
      answer = JSON.parse(raw);
    } catch (_) {
      answer = null;
    }
    if (answer && typeof answer.error === "string") return { ok: false, text: answer.error };
    if (res.ok && answer && answer.ok) {
      return { ok: true, text: typeof answer.message === "string" ? answer.message : "done" };
    }
    const line = raw.split("\n")[0].slice(0, 200);
    return { ok: res.ok, text: "HTTP " + res.status + (line ? ": " + line : "") };
  }

  // The first click asks; the confirm button sends.
  function ask(kind, key, label, body) {
    ui.pending = { kind, key, label, body };
    render();
  }

  async function confirm() {
    const p = ui.pending;
    if (!p || ui.busy) return;
    ui.pending = null;
    ui.busy = true;
    render();
    const path = p.kind === "answer" ? "/api/answer" : "/api/control";
    const r = await post(path, p.body);
    ui.busy = false;
    showResult(r.ok, p.label + ": " + r.text);
    render();
  }

  function cancel() {
    ui.pending = null;
    render();
  }

  // A button for an action; read-only pages disable it and say why.
  function actionButton(testid, text, onclick, extra) {
    const ro = ui.view && ui.view.read_only;
    return h("button", {
      type: "button",
      cls: "act",
      testid,
      text,
      data: extra || {},
      disabled: ro || ui.busy,
      title: ro ? READ_ONLY_WHY : "",
      onclick,
    });
  }

  function confirmBox(key) {
    const p = ui.pending;
    if (!p || p.key !== key) return null;
    return h("div", { cls: "confirm-box", testid: "confirm-box" }, [
      h("span", { text: p.label + "?" }),
      h("button", { type: "button", cls: "act go", testid: "confirm", text: "Confirm", onclick: confirm }),
      h("button", { type: "button", cls: "act", testid: "cancel", text: "Cancel", onclick: cancel }),
    ]);
  }

  function readOnlyNote() {
    return ui.view && ui.view.read_only
      ? h("span", { cls: "why", testid: "why", text: READ_ONLY_WHY })
      : null;
  }

  // ---- needs you -----------------------------------------------------------

  function answerButtons(p) {
    const key = "pane:" + p.name;
    const body = (action, choice) => ({ pane: p.name, action, choice, since_ms: p.since_ms });
    const buttons = [
      actionButton("approve", "Approve", () =>
        ask("answer", key, "Approve " + p.name, body("approve", null))),
      actionButton("deny", "Deny", () => ask("answer", key, "Deny " + p.name, body("deny", null))),
    ];
    for (const label of p.options || []) {
      buttons.push(
        actionButton("choice", label, () =>
          ask("answer", key, "Answer " + p.name + " with \u201c" + label + "\u201d", body("answer", label)),
          { choice: label })
      );
    }
    return [h("div", { cls: "buttons" }, buttons), readOnlyNote(), confirmBox(key)];
  }

  function needRow(p) {
    const dialog = ui.dialogs.get(p.name);
    const kids = [
      h("div", { cls: "line" }, [
        h("strong", { cls: "name", text: p.name }),
        p.attention !== p.state
          ? h("span", { cls: "badge " + p.attention, testid: "attention", text: p.attention })
          : null,
        h("span", { cls: "state " + p.attention, testid: "pane-state", text: stateWord(p) }),
        since(p.since_ms),
      ]),
    ];
    if (p.decision) kids.push(h("div", { cls: "note", text: p.decision }));
    if (p.parked_until) kids.push(h("div", { cls: "note", text: "parked until " + p.parked_until }));
    if (p.attention === "blocked") {
      // Always drawn, at a fixed height: the buttons below must not move
      // under a thumb when the rows arrive.
      const rows = dialog && dialog.since === p.since_ms ? dialog.lines.join("\n") : "";
      kids.push(h("pre", { cls: "dialog", testid: "dialog", text: rows }));
      kids.push(...answerButtons(p));
    }
    return h("li", { cls: "need", testid: "need-row", data: { pane: p.name } }, kids);
  }

  // The last non-blank rows of a blocked pane's screen: its dialog.
  async function fetchDialog(p) {
    const known = ui.dialogs.get(p.name);
    if (known && known.since === p.since_ms) return;
    ui.dialogs.set(p.name, { since: p.since_ms, lines: [] });
    const s = await getScreen(p.name);
    if (!s) return;
    const rows = s.lines.map((l) => l.replace(/\s+$/, ""));
    while (rows.length && !rows[rows.length - 1]) rows.pop();
    const cur = ui.dialogs.get(p.name);
    if (cur && cur.since === p.since_ms) {
      cur.lines = rows.slice(-DIALOG_ROWS);
      render();
    }
  }

  // ---- runs ----------------------------------------------------------------

  function runRow(r) {
    const key = "run:" + r.n;
    const body = (control) => ({ run: r.n, control, state: r.state });
    const closed = /clos|done|finish|landed|ended/.test(r.state);
    const buttons = [];
    if (r.state === "running") {
      buttons.push(actionButton("pause", "Pause", () => ask("control", key, "Pause loop" + r.n, body("pause"))));
    }
    if (r.state === "paused" || r.state === "pausing") {
      buttons.push(actionButton("resume", "Resume", () => ask("control", key, "Resume loop" + r.n, body("resume"))));
    }
    if (!closed) {
      buttons.push(
        actionButton("close-out", "Close out", () => ask("control", key, "Close out loop" + r.n, body("close-out")))
      );
    }
    const tasks = (r.tasks || []).map((t) =>
      h("li", { cls: "task" + (t.needs_human ? " needy" : ""), testid: "task-row", data: { task: t.id } }, [
        h("span", { cls: "id", text: t.id }),
        h("span", { cls: "title", testid: "task-title", text: t.title }),
        h("span", { cls: "phase", testid: "task-phase", text: t.phase }),
        t.round ? h("span", { cls: "round", text: "round " + t.round }) : null,
        t.agent ? h("span", { cls: "agent", text: t.agent }) : null,
        t.lane ? h("span", { cls: "lane", text: t.lane }) : null,
        t.reason ? h("div", { cls: "note", testid: "task-reason", text: t.reason }) : null,
      ])
    );
    const questions = (r.questions || []).map((q) =>
      h("li", { cls: "question", testid: "question" }, [
        h("span", { cls: "id", text: q.task }),
        h("span", { text: q.question }),
        h("span", { cls: "since", text: q.at }),
      ])
    );
    return h("div", { cls: "run" + (r.needs_human ? " needy" : ""), testid: "run-row", data: { run: r.n } }, [
      h("div", { cls: "line" }, [
        h("strong", { cls: "name", text: "loop" + r.n }),
        h("span", { cls: "state", testid: "run-state", text: r.state }),
        h("span", { cls: "badge " + (r.live ? "live" : "gone"), text: r.live ? "live" : "not running" }),
        h("span", { cls: "mode", text: r.mode }),
        h("span", { cls: "branch", text: "→ " + r.integration_branch }),
      ]),
      r.usage ? h("div", { cls: "note", testid: "run-usage", text: "usage " + r.usage }) : null,
      tasks.length ? h("ul", { cls: "tasks" }, tasks) : null,
      questions.length ? h("ul", { cls: "questions" }, [h("li", { cls: "sub", text: "Questions" })].concat(questions)) : null,
      buttons.length ? h("div", { cls: "buttons" }, buttons) : null,
      buttons.length ? readOnlyNote() : null,
      confirmBox(key),
    ]);
  }

  // ---- panes and their screens ---------------------------------------------

  function paneRow(p) {
    const sel = ui.selected === p.name;
    const lane = [];
    if (p.lane_id) lane.push("lane " + p.lane_id);
    if (p.worktree_state) lane.push(p.worktree_state);
    if (p.ahead !== null && p.ahead !== undefined) lane.push("+" + p.ahead);
    if (p.behind !== null && p.behind !== undefined) lane.push("-" + p.behind);
    if (p.job_id) lane.push("job " + p.job_id);
    if (p.usage) lane.push("used " + p.usage);
    const row = h("li", { cls: "pane" + (sel ? " selected" : "") + (p.needs_human ? " needy" : ""), testid: "pane-row", data: { pane: p.name } }, [
      h("div", { cls: "line" }, [
        h("strong", { cls: "name", text: p.name }),
        h("span", { cls: "state " + p.attention, testid: "pane-state", text: stateWord(p) }),
        h("span", { cls: "agent", testid: "pane-agent", text: p.agent + (p.agent_version ? " " + p.agent_version : "") }),
        since(p.since_ms),
      ]),
      lane.length ? h("div", { cls: "note", text: lane.join(" · ") }) : null,
    ]);
    row.tabIndex = 0;
    row.setAttribute("role", "button");
    const pick = () => select(p.name);
    row.addEventListener("click", pick);
    row.addEventListener("keydown", (e) => {
      if (e.key === "Enter" || e.key === " ") pick();
    });
    return row;
  }

  async function getScreen(name) {
    try {
      const res = await fetch("/api/screen?pane=" + encodeURIComponent(name), { credentials: "same-origin" });
      if (!res.ok) return null;
      const s = await res.json();
      return s && Array.isArray(s.lines) ? s : null;
    } catch (_) {
      return null;
    }
  }

  async function loadScreen() {
    const name = ui.selected;
    if (!name) return;
    const ticket = ++ui.screenAsk;
    const s = await getScreen(name);
    if (ticket !== ui.screenAsk || ui.selected !== name) return;
    $("screen-box").hidden = false;
    $("screen-title").textContent = s ? name + " · " + s.state : name + " · screen not available";
    $("screen").textContent = s ? s.lines.join("\n") : "";
  }

  function select(name) {
    ui.selected = ui.selected === name ? null : name;
    if (!ui.selected) $("screen-box").hidden = true;
    render();
    loadScreen();
  }

  // ---- the whole page ------------------------------------------------------

  function render() {
    const v = ui.view;
    if (!v) return;
    $("host").textContent = v.host;
    $("readonly").hidden = !v.read_only;
    $("warning").hidden = !v.warning;
    $("warning").textContent = v.warning || "";

    const panes = v.panes || [];
    const needs = panes.filter((p) => p.needs_human || NEEDS.includes(p.attention));
    const nl = $("needs-list");
    clear(nl);
    for (const p of needs) nl.appendChild(needRow(p));
    if (!needs.length) nl.appendChild(h("li", { cls: "empty", testid: "nothing-needed", text: "Nothing needs you." }));

    const rl = $("runs-list");
    clear(rl);
    for (const r of v.runs || []) rl.appendChild(runRow(r));
    if (v.gate) {
      rl.appendChild(h("p", { cls: "gate " + (v.gate.ready ? "ok" : ""), testid: "gate", text: v.gate.words }));
    }
    if (v.older_runs) rl.appendChild(h("p", { cls: "note", text: v.older_runs + " older runs" }));
    $("runs").hidden = !(v.runs || []).length && !v.gate && !v.older_runs;

    const pl = $("panes-list");
    clear(pl);
    for (const p of panes) pl.appendChild(paneRow(p));
    if (!panes.length) pl.appendChild(h("li", { cls: "empty", text: "No panes." }));
    if (ui.selected && !panes.some((p) => p.name === ui.selected)) {
      ui.selected = null;
      $("screen-box").hidden = true;
    }

    const hosts = v.hosts || [];
    $("hosts").hidden = !hosts.length;
    const hl = $("hosts-list");
    clear(hl);
    for (const x of hosts) {
      hl.appendChild(
        h("li", { cls: "host", testid: "host-row", data: { host: x.host } }, [
          h("strong", { cls: "name", text: x.host }),
          h("span", { cls: "state", text: x.state }),
          h("span", { text: x.panes + " panes" }),
          x.last_seen ? h("span", { cls: "since", text: "seen " + x.last_seen }) : null,
        ])
      );
    }
    document.body.setAttribute("data-seq", String(v.seq));
  }

  function apply(v) {
    if (!v || typeof v !== "object") return;
    ui.view = v;
    const p = ui.pending;
    // A confirm asked about a state that moved on is dropped, not sent.
    if (p && p.kind === "answer") {
      const now = (v.panes || []).find((x) => x.name === p.body.pane);
      if (!now || now.attention !== "blocked" || now.since_ms !== p.body.since_ms) ui.pending = null;
    } else if (p && p.kind === "control") {
      const now = (v.runs || []).find((x) => x.n === p.body.run);
      if (!now || now.state !== p.body.state) ui.pending = null;
    }
    for (const x of v.panes || []) {
      if (x.attention === "blocked") fetchDialog(x);
      else ui.dialogs.delete(x.name);
    }
    render();
    loadScreen();
  }

  // ---- the live feed -------------------------------------------------------

  function setConn(live, why) {
    const c = $("conn");
    if (live) {
      ui.disconnectedAt = null;
      c.className = "conn live";
      c.textContent = "live";
    } else {
      if (!ui.disconnectedAt) ui.disconnectedAt = new Date();
      c.className = "conn down";
      c.textContent = "disconnected since " + clock(ui.disconnectedAt) + (why ? " (" + why + ")" : "");
    }
  }

  function connect() {
    const es = new EventSource("/api/events");
    es.addEventListener("open", () => {
      ui.backoff = BACKOFF_MIN_MS;
      setConn(true);
    });
    es.addEventListener("view", (e) => {
      let v = null;
      try {
        v = JSON.parse(e.data);
      } catch (_) {
        return;
      }
      setConn(true);
      apply(v);
    });
    es.addEventListener("error", () => {
      es.close();
      const wait = ui.backoff;
      ui.backoff = Math.min(ui.backoff * 2, BACKOFF_MAX_MS);
      // A refused cookie (a new token) is said as such: retrying cannot help.
      fetch("/api/view", { credentials: "same-origin" })
        .then((r) => setConn(false, r.status === 401 ? "not signed in: open the URL `drover web` printed" : ""))
        .catch(() => setConn(false, ""));
      setTimeout(connect, wait);
    });
  }

  setInterval(() => {
    for (const e of document.querySelectorAll("[data-since]")) {
      e.textContent = ago(Number(e.getAttribute("data-since")));
    }
  }, AGO_TICK_MS);

  connect();
})();
