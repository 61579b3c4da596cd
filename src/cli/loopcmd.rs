//! `drover loop run|lint`: the CLI over [`drover::loopctl`] — flags
//! parsed into the library's types, [`drover::loopctl::start`] called,
//! what it returns printed and mapped to exit codes (`loop status` and
//! `loop control` are in `loopstatus.rs`).

use super::{Ctx, fail};
use clap::{Args, Subcommand};
use drover::exit;
use drover::loopctl::lanes::lanes_ops::{LaneOptions, RealLanes};
use drover::loopctl::ops::LaneSpec;
use drover::loopctl::run::runner::{self, RunConfig, RunStatus};
use drover::loopctl::{LoopError, board, board::charter, board::ready, start};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Subcommand)]
pub enum LoopCmd {
    /// Work the board's Ready tasks through lanes, land them on the integration branch, close out.
    #[command(
        after_help = "Example:\n  drover loop run --charter CHARTER.md --board backlog\n  drover loop run --charter CHARTER.md --sim-implementer imp.toml --sim-reviewer rev.toml"
    )]
    Run(Box<RunArgs>),
    /// Show a run (the latest by default): tasks, lanes, landings.
    #[command(after_help = "Example:\n  drover loop status\n  drover loop status loop3 --json")]
    Status(StatusArgs),
    /// Set a control on a running loop: pause, resume, close-out or emergency-stop.
    #[command(
        after_help = "Precedence: emergency-stop > pause > close-out > resume.\n\nExample:\n  drover loop control loop3 pause --reason \"lunch\"\n  drover loop control 3 resume"
    )]
    Control(ControlArgs),
    /// Check run files.
    #[command(after_help = "Example:\n  drover loop lint queue CHARTER.md .drover/loop1/QUEUE.md")]
    Lint {
        #[command(subcommand)]
        cmd: LintCmd,
    },
    /// Send one test notification to a --notify-url and say whether it was delivered.
    #[command(
        after_help = "Example:\n  drover loop notify-test --notify-url https://ntfy.sh/my-topic\n  drover loop notify-test --notify-url https://ntfy.example/t --notify-ca ca.pem"
    )]
    NotifyTest(super::notify::NotifyTestArgs),
}

#[derive(Debug, Subcommand)]
pub enum LintCmd {
    /// Refuse (exit 3) a QUEUE.md whose Ready rows hold an excluded, Done, needs-owner or unknown task.
    #[command(
        after_help = "Example:\n  drover loop lint queue CHARTER.md .drover/loop1/QUEUE.md --board backlog"
    )]
    Queue(LintQueueArgs),
}

#[derive(Debug, Args)]
pub struct LintQueueArgs {
    /// The charter (its `exclude:` list).
    pub charter: PathBuf,
    /// The QUEUE.md to check.
    pub queue: PathBuf,
    /// The Backlog.md dir (default: `backlog` under the current git toplevel).
    #[arg(long, value_name = "DIR")]
    pub board: Option<PathBuf>,
    /// Print one JSON document: the offences.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The charter: aim, `lanes:`, `exclude:`, `gate:`, `guarded-paths:` (LOOP.md).
    #[arg(long, value_name = "FILE", required_unless_present = "resume")]
    pub charter: Option<PathBuf>,
    /// Resume this run (`3` or `loop3`) after the loop stopped unclosed (a kill, a reboot).
    #[arg(long, value_name = "RUN")]
    pub resume: Option<String>,
    /// The Backlog.md dir (default: `<repo>/backlog`).
    #[arg(long, value_name = "DIR")]
    pub board: Option<PathBuf>,
    /// The repository (default: the current git toplevel).
    #[arg(long, value_name = "DIR")]
    pub repo: Option<PathBuf>,
    /// The base lanes start from (default: main, else master).
    #[arg(long, value_name = "REF")]
    pub base: Option<String>,
    /// Task pool size X (default: the charter's `pool:`, else 2; ≤ 0 → 1).
    #[arg(long, value_name = "X", allow_hyphen_values = true)]
    pub pool: Option<String>,
    /// Run once per green landing, with DROVER_INTEGRATION_BRANCH/_SHA in its env (off by default).
    #[arg(long, value_name = "CMD")]
    pub ship_cmd: Option<String>,
    /// Longest one run of --ship-cmd (seconds); it is then ended with its process group.
    #[arg(long, default_value_t = drover::loopctl::night::settings::DEFAULT_SHIP_TIMEOUT.as_secs(), value_name = "S")]
    pub ship_timeout: u64,
    /// Most queued candidates one landing gates as one tree; a red batch is bisected to its culprits (at least 1).
    #[arg(long, default_value_t = drover::loopctl::night::settings::DEFAULT_LAND_BATCH as u64, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub land_batch: u64,
    /// Leave jobs for an operator to complete (shadow decisions only); tasks then wait to time out.
    #[arg(long)]
    pub no_autocomplete: bool,
    /// Repair rounds before a task is parked.
    #[arg(long, default_value_t = runner::DEFAULT_REPAIR_ROUNDS)]
    pub repair_rounds: u32,
    /// Longest one agent turn may take before its task is parked (seconds).
    #[arg(long, default_value_t = runner::DEFAULT_TURN_TIMEOUT.as_secs())]
    pub turn_timeout_s: u64,
    /// Most tasks started (0 = until the queue drains); a trip is decision `blocked`.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub max_iterations: u32,
    /// Parks in a row (no landing between) that stop the run (0 = off).
    #[arg(long, default_value_t = drover::loopctl::night::guards::DEFAULT_MAX_CONSECUTIVE_BLOCKERS, value_name = "N")]
    pub max_consecutive_blockers: u32,
    /// The run's wall-clock budget in seconds (0 = off); bounds every wait and turn.
    #[arg(long, default_value_t = 0, value_name = "S")]
    pub wall_clock_s: u64,
    /// Park lanes at a usage limit and never resume them in this run.
    #[arg(long)]
    pub no_resume_on_limit: bool,
    /// A task whose lane is never resumed after a usage limit (repeatable).
    #[arg(long, value_name = "ID")]
    pub no_resume_task: Vec<String>,
    /// A lane working with no output change this long is `stalled` (seconds).
    #[arg(long, default_value_t = drover::loopctl::night::settings::DEFAULT_STALL_AFTER.as_secs(), value_name = "S")]
    pub stall_after_s: u64,
    /// An implementer done on screen with no report this long is reminded once, then parked (seconds).
    #[arg(long, alias = "report-grace", default_value_t = drover::loopctl::night::settings::DEFAULT_REPORT_GRACE.as_secs(), value_name = "S")]
    pub report_grace_s: u64,
    /// Interrupt a stalled lane once after this long stalled (seconds; off by default).
    #[arg(long, value_name = "S")]
    pub stall_kill_after_s: Option<u64>,
    /// Run on escalations, parks, resumes, landings and the close-out, the event as JSON on stdin.
    #[arg(long, value_name = "CMD")]
    pub notify_cmd: Option<String>,
    /// POST each notification here (ntfy-compatible); retried with backoff, never blocks the loop.
    #[arg(long, value_name = "URL")]
    pub notify_url: Option<String>,
    /// Trust only this PEM bundle for an https:// --notify-url (default: the system's trust store).
    #[arg(long, value_name = "FILE", requires = "notify_url")]
    pub notify_ca: Option<PathBuf>,
    /// Ask nothing: escalations go to QUESTIONS.md with a recommendation and their tasks are parked.
    #[arg(long)]
    pub overnight: bool,
    /// When overnight mode ends, HH:MM in the owner's local time (the next such time).
    #[arg(long, value_name = "HH:MM", requires = "overnight")]
    pub until: Option<String>,
    /// Step each (role, agent)'s effort up or down when its lanes run much slower than its agent's others.
    #[arg(long)]
    pub lane_autotune: bool,
    /// With --lane-autotune: a lane is slow past this many times its agent's median lane time.
    #[arg(long, value_name = "K", default_value_t = drover::loopctl::night::autotune::DEFAULT_K, requires = "lane_autotune")]
    pub autotune_k: f64,
    /// Run the loop's clock this many times faster than the wall clock (rehearsals; 1 = real time).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub clock_scale: u32,
    /// Lanes run `drover sim-agent` (the agent's profile) instead of Claude Code and Codex.
    #[arg(long)]
    pub sim: bool,
    /// Sim implementer lanes follow this sim-agent script (docs/agents.md); implies --sim (reviewers without --sim-reviewer pass).
    #[arg(long, value_name = "FILE")]
    pub sim_implementer: Option<PathBuf>,
    /// Sim reviewer lanes follow this sim-agent script; implies --sim (implementers without --sim-implementer are obedient).
    #[arg(long, value_name = "FILE")]
    pub sim_reviewer: Option<PathBuf>,
    /// The backend lanes run on.
    #[arg(long, default_value = "native", value_name = "NAME", value_parser = super::values::backend())]
    pub backend: drover::pane::Backend,
    /// Set K=V in every lane's environment; `--env K` takes K's value from drover's own environment (repeatable; values are never written to disk).
    #[arg(long = "env", value_name = "K=V|K")]
    pub env: Vec<String>,
    /// Read K=V lines from FILE (mode 0600, yours) into every lane's environment (repeatable).
    #[arg(long = "env-file", value_name = "FILE")]
    pub env_file: Vec<PathBuf>,
    /// Most agents being started at once on this state dir (every run and `lane up` share it).
    #[arg(long, default_value_t = drover::lane::spawn::DEFAULT_SPAWN_BUDGET, value_name = "N")]
    pub spawn_budget: usize,
    /// Put each task's first implementer step and its reviews on this fleet's work-queue for its hosts (`drover fleet work`); the rest runs here (docs/fleet.md). With real agents the board must be committed in the repository at the base: hosts build their briefs from it.
    #[arg(long, value_name = "FLEET")]
    pub fleet: Option<String>,
    /// With --fleet: how long a host may go without acking its step before the step goes to another host.
    #[arg(long, value_name = "MS", default_value_t = drover::fleet::work::ACK_WAIT.as_millis() as u64, requires = "fleet",
          value_parser = clap::value_parser!(u64).range(1000..))]
    pub fleet_ack_wait_ms: u64,
    /// Sign the loop's commits with your signing setup (`user.signingKey`); checked up front with a dry sign, never prompts. Off: drover's commits never sign.
    #[arg(long)]
    pub sign: bool,
    /// Print one JSON document: the final status, instead of the close-out.
    #[arg(long)]
    pub json: bool,
    /// With `resume`: close the run without resuming it (`loop control N
    /// close-out` on a run whose loop process is gone), for this reason.
    #[arg(skip)]
    pub close_only: Option<String>,
}

#[derive(Debug, Args)]
pub struct ControlArgs {
    /// The run (`3` or `loop3`).
    pub run: String,
    /// pause | resume | close-out | emergency-stop
    #[arg(value_name = "CONTROL")]
    pub control: String,
    /// Why (recorded in DECISIONS.md and printed with PAUSED:).
    #[arg(long, value_name = "TEXT", default_value = "operator")]
    pub reason: String,
    /// Print one JSON document: the controls now set.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The run number (`3` or `loop3`; default: the latest).
    pub run: Option<String>,
    /// Print one JSON document: the run's `run.json`.
    #[arg(long)]
    pub json: bool,
}

pub(super) fn lerr(e: LoopError) -> anyhow::Error {
    fail(e.exit_code(), e.to_string())
}

/// `--env K=V` and `--env-file F` for every lane of a run (or of a fleet
/// host): a name drover sets for every lane is refused.
pub(super) fn lane_env(
    pairs: &[String],
    files: &[PathBuf],
) -> anyhow::Result<Vec<(String, String)>> {
    let env = super::pane::env_args(pairs, files)?;
    // Every copy the run shows or stores is redacted of these values.
    drover::registry::redact::remember_given(env.iter().map(|(_, v)| v));
    if let Some((k, _)) = env.iter().find(|(k, _)| {
        drover::lane::up::LANE_ENV.contains(&k.as_str()) || k == drover::statedir::env::AGENT
    }) {
        return Err(fail(
            exit::USAGE,
            format!("--env {k}: set by drover for every lane; pick another name"),
        ));
    }
    // A bad port range start would park every task as its lane comes up.
    drover::lane::ports::range_start().map_err(|e| fail(e.exit_code(), e.to_string()))?;
    Ok(env)
}

pub fn run(cmd: LoopCmd, ctx: &Ctx) -> anyhow::Result<u8> {
    match cmd {
        LoopCmd::Run(a) => run_cmd(*a, ctx),
        LoopCmd::Status(a) => super::loopstatus::status(a, ctx),
        LoopCmd::Control(a) => super::loopstatus::control_cmd(a, ctx),
        LoopCmd::Lint {
            cmd: LintCmd::Queue(a),
        } => lint_queue(a),
        LoopCmd::NotifyTest(a) => super::notify::notify_test(a),
    }
}

fn lint_queue(a: LintQueueArgs) -> anyhow::Result<u8> {
    start::need_file("CHARTER", &a.charter).map_err(lerr)?;
    let c = charter::load(&a.charter).map_err(lerr)?;
    let given = a.board.is_some();
    let board_dir = match a.board {
        Some(b) => b,
        None => start::repo(None).map_err(lerr)?.join("backlog"),
    };
    start::need_board(&board_dir, given).map_err(lerr)?;
    let b = board::load(&board_dir).map_err(lerr)?;
    let q = std::fs::read_to_string(&a.queue)
        .map_err(|e| fail(exit::USAGE, format!("{}: {e}", a.queue.display())))?;
    let offences = ready::lint_queue(&q, &b, &c);
    // Files the board leaves out are said, never silently skipped.
    if !a.json {
        for p in &b.problems {
            eprintln!("drover: board: left out: {}", p.describe());
        }
    }
    if a.json {
        println!(
            "{}",
            serde_json::json!({"ok": offences.is_empty(), "offences": offences, "board_problems": b.problems})
        );
    } else {
        for o in &offences {
            println!("{}:{}: {} {}", a.queue.display(), o.line, o.task, o.message);
        }
    }
    if offences.is_empty() {
        if !a.json {
            println!(
                "{}: {} task(s) in ## Ready, none to take out",
                a.queue.display(),
                ready::ready_rows(&q).len()
            );
        }
        Ok(exit::OK)
    } else {
        if !a.json {
            eprintln!(
                "drover: {} offence(s) in {}: take them out of ## Ready",
                offences.len(),
                a.queue.display()
            );
        }
        Ok(exit::REFUSED)
    }
}

pub(super) fn run_cmd(a: RunArgs, ctx: &Ctx) -> anyhow::Result<u8> {
    if !(a.autotune_k.is_finite() && a.autotune_k >= 1.0) {
        return Err(fail(
            exit::USAGE,
            format!(
                "--autotune-k {} is not a multiple of at least 1; give e.g. --autotune-k 2",
                a.autotune_k
            ),
        ));
    }
    let user_env = lane_env(&a.env, &a.env_file)?;
    let state_dir = ctx.state_dir_create()?;
    // A SIGTERM of the loop ends its gate and ship command with it.
    drover::loopctl::child::end_on_signals()?;
    let resume = a.resume.as_deref().map(run_number).transpose()?;
    let given = start::Given {
        repo: a.repo.clone(),
        charter: a.charter.clone(),
        board: a.board.clone(),
        base: a.base.clone(),
        sim: a.sim,
        sim_implementer: a.sim_implementer.clone(),
        sim_reviewer: a.sim_reviewer.clone(),
    };
    let prep = start::prepare(
        drover::statedir::StateDir::new(&state_dir),
        given,
        resume,
        a.close_only.is_none(),
        a.sign,
        ctx.client().ok(),
    )
    .map_err(lerr)?;
    drover::loopctl::land::git::set_sign(a.sign);
    let client = ctx.client_or_start()?;
    let jobs_client = ctx.client()?;
    let exe = std::env::current_exe()?;
    let mut opts = LaneOptions::new(&exe);
    let sim = prep.sim();
    opts.sim = sim;
    opts.backend = a.backend;
    opts.spawn_budget = a.spawn_budget;
    opts.env = user_env;
    opts.scripts = prep.sim_scripts();
    let mut fleet_scripts = prep.sim_scripts();
    let lanes = RealLanes::new(
        drover::statedir::StateDir::new(&state_dir),
        client,
        jobs_client,
        opts,
    );
    let sim_record = prep.given.sim_record();
    let start::Prepared {
        resumed,
        given,
        place,
        ..
    } = prep;
    let mut cfg = config(&a, state_dir.into_path_buf(), place, given.base, sim_record);
    start::set_clock(&mut cfg, a.clock_scale, resumed.as_ref());
    if a.overnight {
        cfg.unattended.mode =
            start::overnight_mode(a.until.as_deref(), cfg.unattended.clock.now()).map_err(lerr)?;
    }
    let json = a.json;
    let mut console = super::console::Console::open(cfg.state(), json);
    let mut say = |m: &str| console.say(m);
    let run_no = resumed.as_ref().map(|r| r.run);
    say(&format!(
        "commits on the integration branch are by {} <{}>, {}",
        drover::git::IDENTITY_NAME,
        drover::git::IDENTITY_EMAIL,
        if a.sign {
            "signed with your key"
        } else {
            "unsigned"
        }
    ));
    let st = match &a.fleet {
        None => start::drive(lanes, cfg, run_no, a.close_only.as_deref(), say),
        Some(fleet) => {
            let f = start::fleet_lanes(
                fleet,
                &cfg,
                sim,
                lanes,
                Box::new(move |s: &LaneSpec| fleet_scripts.as_mut().map(|f| f(s))),
                Duration::from_millis(a.fleet_ack_wait_ms),
            )
            .map_err(lerr)?;
            say(&format!(
                "fleet {fleet}: steps on the work-queue as run {}; its record is {}",
                f.key,
                f.log.display()
            ));
            start::drive(f.lanes, cfg, run_no, None, say)
        }
    }
    .map_err(lerr)?;
    let code = print_final(&st, json)?;
    let stale = start::refused_by_stale_holds(&st);
    if !stale.is_empty() {
        // Not a success: an earlier run's lease kept every task from starting.
        for (id, cmd) in &stale {
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "drover: {id} was not started: an earlier run still holds its write lease; \
                 resume that run, or check its worktree and clear the lease with `{cmd}`"
            );
        }
        return Ok(exit::REFUSED);
    }
    Ok(code)
}

/// The run's config from its flags and where it works.
fn config(
    a: &RunArgs,
    state_dir: PathBuf,
    place: drover::loopctl::start::Place,
    base: Option<String>,
    sim: Option<drover::loopctl::night::settings::SimLanesRecord>,
) -> RunConfig {
    use drover::loopctl::night::{guards::Guards, notify::Targets, settings::Unattended};
    RunConfig {
        state_dir,
        board_dir: place.board_dir,
        repo: place.repo,
        charter: place.charter,
        base,
        pool: a.pool.clone(),
        ship_cmd: a.ship_cmd.clone(),
        autocomplete: !a.no_autocomplete,
        repair_rounds: a.repair_rounds,
        turn_timeout: Duration::from_secs(a.turn_timeout_s.max(1)),
        unattended: Unattended {
            guards: Guards {
                max_iterations: a.max_iterations,
                max_consecutive_blockers: a.max_consecutive_blockers,
                wall_clock: (a.wall_clock_s > 0).then(|| Duration::from_secs(a.wall_clock_s)),
            },
            no_resume_on_limit: a.no_resume_on_limit,
            no_resume_tasks: a.no_resume_task.clone(),
            stall_after: Duration::from_secs(a.stall_after_s.max(1)),
            stall_kill_after: a.stall_kill_after_s.map(Duration::from_secs),
            report_grace: Duration::from_secs(a.report_grace_s.max(1)),
            notify: Targets {
                cmd: a.notify_cmd.clone(),
                url: a.notify_url.clone(),
                first_retry: None,
                ca_file: a.notify_ca.clone(),
                http_timeout: None,
            },
            ship_timeout: Duration::from_secs(a.ship_timeout.max(1)),
            land_batch: usize::try_from(a.land_batch).unwrap_or(usize::MAX),
            sim,
            autotune: a.lane_autotune,
            autotune_k: a.autotune_k,
            ..Default::default()
        },
    }
}

/// Print a finished run: its close-out, or its status as JSON.
pub fn print_final(st: &RunStatus, json: bool) -> anyhow::Result<u8> {
    if json {
        let text = serde_json::to_string_pretty(st)?;
        let shown = drover::loopctl::run::rundir::shown_json(&text);
        super::console::print_quietly(&format!("{shown}\n"));
    } else if let Some(p) = &st.closeout {
        let text = std::fs::read_to_string(p)
            .map_err(|e| fail(exit::ERROR, format!("{}: {e}", p.display())))?;
        super::console::print_quietly(&format!("{text}\n(written to {})\n", p.display()));
    }
    Ok(exit::OK)
}

pub(super) fn run_number(r: &str) -> anyhow::Result<u32> {
    r.trim_start_matches("loop").parse::<u32>().map_err(|_| {
        fail(
            exit::USAGE,
            format!("RUN {r:?} is a number like 3 or loop3"),
        )
    })
}
