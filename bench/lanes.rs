//! `cargo bench --bench lanes [-- --runs N]`: `drover lane up --sim` of the
//! four-role topology × both agents (8 lanes) to all-ready, and `lane down
//! --all` of them, on the native backend. Side by side, the peer is the
//! bare work the same lanes need — 8 × `git worktree add -b` plus 8 sim panes
//! through the supervisor and one ready barrier — so the ratio is drover's
//! own overhead (records, checks, env, exclude, version probe). Runs on
//! native and tmux, interleaved in one run (`DROVER_BENCH_BACKEND=native`
//! or `=tmux` for one of them).

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
    let out = Command::new(EXE.as_str())
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
fn drover_round(sup: &Supervisor, repo: &Path, backend: &str) -> Result<(f64, f64), String> {
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
            "--backend",
            backend,
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
fn peer_round(
    sup: &mut Supervisor,
    repo: &Path,
    round: usize,
    backend: &str,
) -> Result<(f64, f64), String> {
    let root = sup.dir.path().join(format!("peer-{backend}-{round}"));
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
                    &format!("peer-{backend}-{round}/{s}/{a}"),
                    &wt.display().to_string(),
                ],
            )?;
            sup.sim_pane_on(&name, a, None, &[], backend)?;
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
            &[
                "branch",
                "-q",
                "-D",
                &format!("peer-{backend}-{round}/{s}/{a}"),
            ],
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
    let backends: Vec<String> = std::env::var("DROVER_BENCH_BACKEND")
        .unwrap_or_else(|_| "native,tmux".into())
        .split(',')
        .map(str::trim)
        .filter(|b| !b.is_empty())
        .map(String::from)
        .collect();
    let mut sup = Supervisor::start()?;
    sup.cleanup_on_signal(|| {})?;
    let repo = repo(sup.dir.path())?;
    // One warm-up round each (page cache, first exec of the binaries, the
    // tmux server).
    for b in &backends {
        drover_round(&sup, &repo, b)?;
        peer_round(&mut sup, &repo, 0, b)?;
    }
    // Per backend: drover up, drover down, peer up, peer down.
    let mut m: Vec<[Vec<f64>; 4]> = backends.iter().map(|_| Default::default()).collect();
    for i in 1..=runs {
        for (k, b) in backends.iter().enumerate() {
            let (u, d) = drover_round(&sup, &repo, b)?;
            m[k][0].push(u);
            m[k][1].push(d);
            let (u, d) = peer_round(&mut sup, &repo, i, b)?;
            m[k][2].push(u);
            m[k][3].push(d);
        }
    }
    println!(
        "lanes: 8 sim lanes (four-role × claude,codex), {runs} runs, load {}",
        support::loadavg()
    );
    let mut ups = Vec::new();
    for (k, b) in backends.iter().enumerate() {
        let [du, dd, pu, pd] = m[k].clone();
        ups.push(stats(du.clone()).0);
        for (what, d, p) in [("up to all-ready", du, pu), ("down --all", dd, pd)] {
            let (dm, dmin, dmax) = stats(d);
            let (pm, pmin, pmax) = stats(p);
            println!(
                "  {b:<6} {what:<16} drover median {dm:>7.1} ms (min {dmin:.1}, max {dmax:.1}) | peer median {pm:>7.1} ms (min {pmin:.1}, max {pmax:.1}) | ratio {:.2}",
                dm / pm
            );
        }
    }
    if let [n, t] = ups[..] {
        println!("  up: {} / {} = {:.2}", backends[1], backends[0], t / n);
    }
    println!("  target: up ≤ 2000 ms on a 2-core machine (each backend)");
    Ok(())
}
