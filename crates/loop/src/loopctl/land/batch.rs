//! One landing: a batch of queued candidates (the caller takes at most
//! `--land-batch` of the queue) applied in queue order on the integration
//! head — three-way when a patch no longer applies — and gated as one tree.
//! Green: all land, one commit each. Red: bisected ([`bisect`]) to the
//! culprits, each red on top of the good ones before it; the rest land, on
//! exactly the tree the last green gate run saw. Every gate run is kept in
//! the landing's evidence.

use crate::loopctl::LoopError;
use crate::loopctl::child::Bounds;
use crate::loopctl::land::apply::{self, Applied};
use crate::loopctl::land::bisect::{Verdict, bisect};
use crate::loopctl::land::{
    Fate, GATE_TIMEOUT, GateRun, Landing, Queued, dropped, git, red, run_gate, write_evidence,
};
use std::collections::BTreeMap;
use std::path::Path;

/// Land the queued candidates on the integration worktree `wt` (pure git;
/// the caller holds the one-landing-at-a-time rule), the gate bounded by
/// [`GATE_TIMEOUT`] alone. `number` names the evidence dir under
/// `evidence_root`.
pub fn land(
    wt: &Path,
    branch: &str,
    queued: &[Queued],
    gate: &str,
    evidence_root: &Path,
    number: u32,
) -> Result<Landing, LoopError> {
    land_bounded(
        wt,
        branch,
        queued,
        gate,
        evidence_root,
        number,
        &Bounds::timeout(GATE_TIMEOUT),
    )
}

/// [`land`] with each gate run bounded by `bounds`. The commits are made on
/// a detached HEAD and `branch` is moved to them (one atomic ref update)
/// only once the gate is green on exactly that tree: the branch never holds
/// a candidate whose gate did not pass, and every `Task:` trailer on it is
/// a landing. When the run must stop during a gate, nothing of this landing
/// reaches the branch and every candidate not landed is [`Fate::Stopped`];
/// when a gate times out, what is not yet found good is [`Fate::TimedOut`].
pub fn land_bounded(
    wt: &Path,
    branch: &str,
    queued: &[Queued],
    gate: &str,
    evidence_root: &Path,
    number: u32,
    bounds: &Bounds,
) -> Result<Landing, LoopError> {
    let dir = evidence_root.join(number.to_string());
    crate::store::create_private_dir(&dir)?;
    let reference = format!("refs/heads/{branch}");
    let start = git::line(wt, &["rev-parse", "--verify", &reference])?;
    git::run(wt, &["checkout", "-q", "--detach", &start])?;
    let mut fates: Vec<(String, Fate)> = Vec::new();
    // The batch: what applies, in queue order, on top of the ones before it.
    let mut batch: Vec<(Queued, bool)> = Vec::new();
    for q in queued {
        match apply::apply_one(wt, q, &dir)? {
            Applied::Committed { three_way, .. } => batch.push((q.clone(), three_way)),
            Applied::Refused { reason, conflicts } => {
                fates.push((q.task.clone(), dropped(reason, conflicts)))
            }
        }
    }
    let built = git::line(wt, &["rev-parse", "HEAD"])?;
    let mut gates: Vec<GateRun> = Vec::new();
    // The sets gated red (by index into `batch`), and the gate run of each.
    let mut reds: Vec<(Vec<usize>, usize)> = Vec::new();
    // Candidates that applied in the batch but not on a smaller tree.
    let mut unapplied: BTreeMap<usize, (String, Vec<String>)> = BTreeMap::new();
    let mut green_head: Option<String> = None;
    let mut stopped: Option<String> = None;
    let mut timed_out: Option<String> = None;
    let mut failure: Option<LoopError> = None;
    let all: Vec<usize> = (0..batch.len()).collect();
    let mut gate_set = |set: &[usize]| -> Result<Verdict, LoopError> {
        // The whole batch is already built; a smaller set is built again.
        if set != all.as_slice() || !gates.is_empty() {
            git::run(wt, &["reset", "-q", "--hard", &start])?;
            for &i in set {
                if let Applied::Refused { reason, conflicts } =
                    apply::apply_one(wt, &batch[i].0, &dir)?
                {
                    unapplied.insert(i, (reason, conflicts));
                    return Ok(Verdict::Red);
                }
            }
        } else {
            git::run(wt, &["reset", "-q", "--hard", &built])?;
        }
        let n = gates.len() + 1;
        let g = run_gate(wt, gate, &dir.join(format!("gate-{n}.log")), bounds)?;
        let verdict = if g.stopped {
            stopped = g.ended.clone();
            Verdict::Ended
        } else if g.green {
            green_head = Some(g.head.clone());
            Verdict::Green
        } else if g.exit.is_none() {
            // Timed out (not a stop): the gate could not say.
            timed_out = g.ended.clone();
            Verdict::Ended
        } else {
            reds.push((set.to_vec(), gates.len()));
            Verdict::Red
        };
        gates.push(g);
        Ok(verdict)
    };
    let b = bisect(batch.len(), |set| match gate_set(set) {
        Ok(v) => v,
        Err(e) => {
            failure = Some(e);
            Verdict::Ended
        }
    });
    if let Some(e) = failure {
        let _ = git::run(wt, &["reset", "-q", "--hard", &start]);
        let _ = git::run(wt, &["checkout", "-q", branch]);
        return Err(e);
    }
    let mut shas: Vec<(String, String, bool)> = Vec::new();
    if let Some(why) = &stopped {
        // A landing is its commits and its gate, one unit: none of it lands.
        git::run(wt, &["reset", "-q", "--hard", &start])?;
        for q in queued {
            if !fates.iter().any(|(t, _)| t == &q.task) {
                let reason = format!("its landing's gate was ended: {why}");
                fates.push((q.task.clone(), Fate::Stopped { reason }));
            }
        }
    } else {
        let head = match (&green_head, b.landed.is_empty()) {
            (Some(h), false) => h.clone(),
            _ => start.clone(),
        };
        git::run(wt, &["reset", "-q", "--hard", &head])?;
        let log = git::run(
            wt,
            &[
                "log",
                "--reverse",
                "--format=%H",
                &format!("{start}..{head}"),
            ],
        )?;
        let list: Vec<&str> = log.lines().collect();
        if list.len() != b.landed.len() {
            return Err(LoopError::Git {
                args: format!("log {start}..{head}"),
                message: format!(
                    "{} commits for {} good candidates",
                    list.len(),
                    b.landed.len()
                ),
            });
        }
        for (&i, sha) in b.landed.iter().zip(list) {
            shas.push((batch[i].0.task.clone(), sha.to_string(), batch[i].1));
        }
        for &i in &b.culprits {
            let fate = match unapplied.remove(&i) {
                Some((reason, conflicts)) => dropped(reason, conflicts),
                None => match reds.iter().rev().find(|(set, _)| set.contains(&i)) {
                    Some((_, g)) => red(&gates[*g]),
                    None => dropped("turns the gate red".into(), Vec::new()),
                },
            };
            fates.push((batch[i].0.task.clone(), fate));
        }
        for &i in &b.undecided {
            let why = timed_out.clone().unwrap_or_else(|| "ended".into());
            let reason = format!(
                "the gate on its batch of {} timed out ({why}) before it was found good or red",
                batch.len()
            );
            fates.push((batch[i].0.task.clone(), Fate::TimedOut { reason }));
        }
    }
    let head = git::line(wt, &["rev-parse", "HEAD"])?;
    if head != start {
        git::run(
            wt,
            &[
                "update-ref",
                "-m",
                &format!("drover loop landing {number}"),
                &reference,
                &head,
                &start,
            ],
        )?;
    }
    git::run(wt, &["checkout", "-q", branch])?;
    for (task, sha, three_way) in shas {
        fates.push((task, Fate::Landed { sha, three_way }));
    }
    // Keep the queue's order in the report.
    fates.sort_by_key(|(t, _)| queued.iter().position(|q| &q.task == t));
    let landing = Landing {
        number,
        branch: branch.to_string(),
        start,
        head,
        fates,
        gates,
        evidence_dir: dir,
    };
    write_evidence(&landing)?;
    Ok(landing)
}
