//! `drover demo`: the tour on built-in programs, no API keys, no network.
//! Runs in a temporary state dir with its own supervisor and cleans up.

use super::{Ctx, client_err, fail};
use drover::daemon::Client;
use drover::exit;
use serde_json::{Value, json};
use std::time::Instant;

#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Keep the demo's state dir and supervisor running at the end (to attach).
    #[arg(long)]
    pub keep: bool,
}

struct Demo {
    client: Client,
    started: Instant,
}

impl Demo {
    fn call(&mut self, op: &str, args: Value) -> anyhow::Result<Value> {
        self.client.call(op, args).map_err(client_err)
    }

    fn say(&self, msg: &str) {
        println!("[{:>5.1}s] {msg}", self.started.elapsed().as_secs_f64());
    }

    fn wait(&mut self, panes: &[&str], until: &str, timeout_ms: u64) -> anyhow::Result<Vec<Value>> {
        let v = self.call(
            "wait",
            json!({"panes": panes, "until": until.split(',').collect::<Vec<_>>(), "timeout_ms": timeout_ms}),
        )?;
        if v["timed_out"].as_bool() == Some(true) {
            return Err(fail(
                exit::TIMEOUT,
                format!("demo: {panes:?} did not reach {until} in {timeout_ms} ms"),
            ));
        }
        Ok(v["snapshots"].as_array().cloned().unwrap_or_default())
    }

    fn show_screen(&mut self, pane: &str, max_rows: usize) -> anyhow::Result<()> {
        let v = self.call("pane.read", json!({"pane": pane}))?;
        let text = v["text"].as_str().unwrap_or_default();
        println!("  ┌─ {pane} ─");
        for line in text.lines().take(max_rows) {
            println!("  │ {line}");
        }
        println!("  └─");
        Ok(())
    }
}

pub fn run(args: DemoArgs, _ctx: &Ctx) -> anyhow::Result<u8> {
    let tmp = std::env::temp_dir().join(format!("drover-demo-{}", std::process::id()));
    let state_dir = tmp.join("state");
    std::fs::create_dir_all(&state_dir)?;
    let state_dir = std::fs::canonicalize(&state_dir)?;
    let socket =
        drover::paths::socket_path(&state_dir).map_err(|e| fail(exit::ERROR, e.to_string()))?;
    let exe = std::env::current_exe()?;
    let client = Client::connect_or_start(&state_dir, &socket, Some(&exe)).map_err(client_err)?;
    let mut d = Demo {
        client,
        started: Instant::now(),
    };
    let result = tour(&mut d, &tmp);
    if args.keep && result.is_ok() {
        println!();
        println!("The supervisor is still running. Try:");
        println!("  export DROVER_STATE_DIR={}", state_dir.display());
        println!("  drover pane ls");
        println!("  drover attach shell      # detach with Ctrl-\\");
        println!("  drover kill-server       # when done");
        return result.map(|()| exit::OK);
    }
    let _ = d.call("shutdown", json!({}));
    // The supervisor removes its socket and releases its lock as it stops.
    let lock = state_dir.join("supervisor.lock");
    let deadline = Instant::now() + std::time::Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = drover::store::LockGuard::try_exclusive(&lock) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = std::fs::remove_dir_all(&tmp);
    result.map(|()| exit::OK)
}

fn tour(d: &mut Demo, tmp: &std::path::Path) -> anyhow::Result<()> {
    let work = tmp.join("work");
    std::fs::create_dir_all(&work)?;
    d.say("starting two panes: a live monitor and an interactive shell");
    let monitor = r#"i=0; while [ $i -lt 600 ]; do i=$((i+1)); printf '\033[H\033[2J\033[1;36mmonitor\033[0m  tick %d\n' "$i"; printf 'load: %s\n' "$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"; printf '\033[32m%s\033[0m\n' '████████░░░░'; sleep 0.1; done"#;
    let spec = |name: &str, argv: Vec<&str>, env: Vec<(&str, &str)>| {
        json!({"spec": {
            "name": name, "argv": argv, "env": env, "cwd": work,
            "cols": 100, "rows": 30, "agent": "shell"}})
    };
    d.call(
        "pane.new",
        spec("monitor", vec!["sh", "-c", monitor], vec![]),
    )?;
    d.call(
        "pane.new",
        spec(
            "shell",
            vec!["sh", "-i"],
            vec![
                ("DEMO_GREETING", "hello from an env var set at creation"),
                ("PS1", "demo$ "),
            ],
        ),
    )?;
    let snaps = d.wait(&["shell"], "idle", 10_000)?;
    d.say(&format!(
        "shell is {} (a barrier woke on the observation change)",
        snaps[0]["state"].as_str().unwrap_or("?")
    ));
    d.say("sending a command to the shell");
    d.call(
        "pane.send",
        json!({"pane": "shell", "text": "echo \"$DEMO_GREETING\"; ls -a"}),
    )?;
    d.wait(&["shell"], "working", 5_000).ok();
    d.wait(&["shell"], "idle", 10_000)?;
    d.show_screen("shell", 6)?;
    d.show_screen("monitor", 4)?;
    let list = d.call("pane.ls", json!({}))?;
    d.say("pane ls:");
    for p in list.as_array().cloned().unwrap_or_default() {
        println!(
            "  {:<8} pid {:<7} gen {} {}x{} state {}",
            p["name"].as_str().unwrap_or("?"),
            p["pid"].to_string(),
            p["generation"],
            p["cols"],
            p["rows"],
            p["observation"]["state"].as_str().unwrap_or("?"),
        );
    }
    d.say("respawning the shell (a new generation)");
    let v = d.call("pane.respawn", json!({"pane": "shell"}))?;
    d.say(&format!("shell is now generation {}", v["generation"]));
    d.wait(&["shell"], "idle", 10_000)?;
    d.call("pane.send", json!({"pane": "shell", "text": "exit 7"}))?;
    let snaps = d.wait(&["shell"], "exited", 10_000)?;
    d.say(&format!("shell exited with code {}", snaps[0]["exit_code"]));
    d.say("killing the monitor's process group");
    d.call("pane.kill", json!({"pane": "monitor"}))?;
    d.call("pane.kill", json!({"pane": "shell"}))?;
    d.say("done: every pane stopped, nothing left running");
    Ok(())
}
