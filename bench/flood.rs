//! Panes that flood output while a benchmark measures something else: native
//! panes printing a line with colours over and over, at a given rate each
//! (100 chunks a second, from one `perl` process per pane that forks nothing)
//! or, at rate 0, as fast as drover takes it (`yes`); stopped and let go as a
//! group with SIGSTOP/SIGCONT to their process groups.

use super::support::Supervisor;
use serde_json::json;

/// Native panes that flood output, paused and resumed as a group.
pub struct Flood {
    pids: Vec<i32>,
    on: std::cell::Cell<bool>,
}

impl Flood {
    /// `n` panes, each printing `line` at `bytes_per_s` (0: unlimited).
    pub fn start(
        sup: &mut Supervisor,
        n: usize,
        line: &str,
        bytes_per_s: usize,
    ) -> Result<Flood, String> {
        let argv: Vec<String> = if bytes_per_s == 0 {
            vec!["yes".into(), line.into()]
        } else {
            let chunk = sup.dir.path().join("flood-chunk.txt");
            let per = (bytes_per_s / 100).max(line.len() + 1);
            let text = format!("{line}\n").repeat(per / (line.len() + 1));
            std::fs::write(&chunk, text).map_err(|e| e.to_string())?;
            // One process writing a chunk every 10 ms. A shell loop of
            // `cat; sleep 0.01` would fork and exec twice per chunk (1 600
            // processes a second for 8 panes), which on a small machine costs
            // more CPU than the output itself and would be counted as drover's.
            let script = "open(my $f, '<', $ARGV[0]) or die; local $/; my $c = <$f>; \
                          $| = 1; while (1) { print $c; select(undef, undef, undef, 0.01) }";
            vec![
                "perl".into(),
                "-e".into(),
                script.into(),
                chunk.display().to_string(),
            ]
        };
        let mut pids = Vec::new();
        for i in 0..n {
            let v = sup.call(
                "pane.new",
                json!({"spec": {
                    "name": format!("flood-{i}"), "argv": argv, "env": [],
                    "cwd": sup.dir.path(), "cols": 120, "rows": 40, "agent": "shell",
                }, "backend": "native"}),
            )?;
            let pid = v["pid"]
                .as_i64()
                .or_else(|| v["pane"]["pid"].as_i64())
                .ok_or_else(|| format!("flood pane has no pid: {v}"))?;
            pids.push(pid as i32);
        }
        Ok(Flood {
            pids,
            on: std::cell::Cell::new(true),
        })
    }

    /// Let the flood run (`true`) or stop it (SIGSTOP to each pane's group).
    pub fn set(&self, on: bool) {
        if self.on.get() == on {
            return;
        }
        let sig = if on {
            nix::sys::signal::Signal::SIGCONT
        } else {
            nix::sys::signal::Signal::SIGSTOP
        };
        for pid in &self.pids {
            let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(*pid), sig);
        }
        self.on.set(on);
    }
}
