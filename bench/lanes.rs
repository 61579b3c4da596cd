//! `cargo bench --bench lanes [-- --runs N]`: `drover lane up --sim` of the
//! four-role topology × both agents (8 lanes) to all-ready, and `lane down
//! --all` of them, on the native backend. Side by side, the peer is the
//! bare work the same lanes need — 8 × `git worktree add -b` plus 8 sim panes
//! through the supervisor and one ready barrier — so the ratio is drover's
//! own overhead (records, checks, env, exclude, version probe). tmux joins
//! once the tmux backend lands.

#[path = "support.rs"]
mod support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use support::{EXE, Supervisor, arg, percentile};

const READY: Duration = Duration::from_secs(30);
const SESSIONS: [&str; 4] = ["orchestrator", "implementer", "reviewer", "ci-eval-auditor"];

fn git(dir: &Path, args: &[&str]) -> Result<(), String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=b", "-c", "user.email=b@b.invalid"])
        .args(args)
        .output()
        .map_err(|e| format!("git: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn repo(dir: &Path) -> Result<std::path::PathBuf, String> {
    let r = dir.join("repo");
    std::fs::create_dir_all(&r).map_err(|e| e.to_string())?;
    git(&r, &["init", "-q", "-b", "main"])?;
    std::fs::write(r.join("README.md"), "bench\n").map_err(|e| e.to_string())?;
    git(&r, &["add", "README.md"])?;
    git(&r, &["commit", "-q", "-m", "initial"])?;
    Ok(r)
}

fn drover(sup: &Supervisor, args: &[&str]) -> Result<(), String> {
    let out = Command::new(EXE)
        .args(args)
        .env("DROVER_STATE_DIR", &sup.state)
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "drover {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// (up ms, down ms) of one drover round.
fn drover_round(sup: &Supervisor, repo: &Path) -> Result<(f64, f64), String> {
    let r = repo.display().to_string();
    let t = Instant::now();
    drover(
        sup,
        &[
            "lane",
            "up",
            "--topology",
            "four-role",
            "--repo",
            &r,
            "--sim",
            "--timeout-ms",
            "30000",
        ],
    )?;
    let up = t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    drover(sup, &["lane", "down", "--all"])?;
    Ok((up, t.elapsed().as_secs_f64() * 1e3))
}

/// (up ms, down ms) of the bare peer.
fn peer_round(sup: &mut Supervisor, repo: &Path, round: usize) -> Result<(f64, f64), String> {
    let root = sup.dir.path().join(format!("peer-{round}"));
    let mut names = Vec::new();
    let t = Instant::now();
    for s in SESSIONS {
        for a in ["claude", "codex"] {
            let name = format!("{s}-{a}");
            let wt = root.join(&name);
            git(
                repo,
                &[
                    "worktree",
                    "add",
                    "-q",
                    "-b",
                    &format!("peer{round}/{s}/{a}"),
                    &wt.display().to_string(),
                ],
            )?;
            sup.sim_pane(&name, a, None, &[])?;
            names.push(name);
        }
    }
    sup.wait_all(&names, &["idle"], READY)?;
    let up = t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    for n in &names {
        sup.call("pane.kill", serde_json::json!({"pane": n}))?;
        let (s, a) = n.rsplit_once('-').ok_or("name")?;
        git(
            repo,
            &["worktree", "remove", &root.join(n).display().to_string()],
        )?;
        git(
            repo,
            &["branch", "-q", "-D", &format!("peer{round}/{s}/{a}")],
        )?;
    }
    Ok((up, t.elapsed().as_secs_f64() * 1e3))
}

fn stats(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (percentile(&v, 50.0), v[0], v[v.len() - 1])
}

fn main() -> Result<(), String> {
    let runs: usize = arg("--runs", 5);
    let mut sup = Supervisor::start()?;
    sup.cleanup_on_signal(|| {})?;
    let repo = repo(sup.dir.path())?;
    // One warm-up round each (page cache, first exec of the binaries).
    drover_round(&sup, &repo)?;
    peer_round(&mut sup, &repo, 0)?;
    let (mut du, mut dd, mut pu, mut pd) = (vec![], vec![], vec![], vec![]);
    for i in 1..=runs {
        let (u, d) = drover_round(&sup, &repo)?;
        du.push(u);
        dd.push(d);
        let (u, d) = peer_round(&mut sup, &repo, i)?;
        pu.push(u);
        pd.push(d);
    }
    println!(
        "lanes: 8 sim lanes (four-role × claude,codex), native backend, {runs} runs, load {}",
        support::loadavg()
    );
    for (what, d, p) in [("up to all-ready", du, pu), ("down --all", dd, pd)] {
        let (dm, dmin, dmax) = stats(d);
        let (pm, pmin, pmax) = stats(p);
        println!(
            "  {what:<16} drover median {dm:>7.1} ms (min {dmin:.1}, max {dmax:.1}) | peer median {pm:>7.1} ms (min {pmin:.1}, max {pmax:.1}) | ratio {:.2}",
            dm / pm
        );
    }
    println!(
        "  target: up ≤ 2000 ms on a 2-core machine; tmux: not yet (the tmux backend is not merged)"
    );
    Ok(())
}
