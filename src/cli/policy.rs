//! `drover policy eval|check`: run the pure policy on scenario files.
//!
//! `check` is a lint over a fixture directory: a scenario that disagrees with its
//! `expected_policy` exits 3 (a lint said no); a malformed one exits 2 (a bad input
//! file), which wins over a disagreement because a set that does not parse proves nothing.

use super::{Ctx, fail};
use drover::exit;
use drover::policy::{self, Decision, ExpectedPolicy, Scenario, ScenarioError};
use std::io::Read;
use std::path::{Path, PathBuf};

#[derive(Debug, clap::Subcommand)]
pub enum Commands {
    /// The shadow policy: evaluate scenarios, check fixtures.
    Policy {
        #[command(subcommand)]
        cmd: PolicyCmd,
    },
}

#[derive(Debug, clap::Subcommand)]
pub enum PolicyCmd {
    /// Decide one scenario; prints {"decision": "...", "reason": "..."}.
    #[command(
        after_help = "Example:\n  drover policy eval tests/fixtures/scenarios/finished-clean.json"
    )]
    Eval {
        /// Scenario file, or `-` for stdin.
        file: String,
    },
    /// Decide every *.json scenario in DIR against its expected_policy
    /// (exit 3 on a disagreement, 2 on a malformed file).
    #[command(after_help = "Example:\n  drover policy check tests/fixtures/scenarios")]
    Check {
        /// Directory of scenario files.
        dir: PathBuf,
        /// Print one JSON document (an array of results) instead of a table.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(cmd: Commands, _ctx: &Ctx) -> anyhow::Result<u8> {
    let Commands::Policy { cmd } = cmd;
    match cmd {
        PolicyCmd::Eval { file } => eval(&file),
        PolicyCmd::Check { dir, json } => check(&dir, json),
    }
}

/// The largest scenario read: far above any real one, and a bound on what an
/// endless input (`/dev/urandom`, a pipe that never closes) can cost.
const MAX_SCENARIO_BYTES: u64 = 16 << 20;

/// Read at most [`MAX_SCENARIO_BYTES`]; more is a usage error, not a hang.
fn read_bounded(label: &str, r: impl Read) -> anyhow::Result<String> {
    let mut bytes = Vec::new();
    r.take(MAX_SCENARIO_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| fail(exit::ERROR, format!("cannot read {label}: {e}")))?;
    if bytes.len() as u64 > MAX_SCENARIO_BYTES {
        return Err(fail(
            exit::USAGE,
            format!(
                "{label}: larger than {MAX_SCENARIO_BYTES} bytes; a scenario is a small JSON file (docs/policy.md)"
            ),
        ));
    }
    String::from_utf8(bytes).map_err(|_| {
        fail(
            exit::USAGE,
            format!("{label}: not UTF-8 text; a scenario is a JSON file (docs/policy.md)"),
        )
    })
}

fn eval(file: &str) -> anyhow::Result<u8> {
    let (label, text) = if file == "-" {
        (
            "stdin".to_string(),
            read_bounded("stdin", std::io::stdin())?,
        )
    } else {
        let path = Path::new(file);
        let f = std::fs::File::open(path).map_err(|e| {
            let code = if e.kind() == std::io::ErrorKind::NotFound {
                exit::USAGE
            } else {
                exit::ERROR
            };
            fail(code, format!("cannot read {}: {e}", path.display()))
        })?;
        (file.to_string(), read_bounded(file, f)?)
    };
    let scenario = policy::parse_scenario(&text).map_err(|e| malformed(&label, &e))?;
    println!("{}", serde_json::to_string(&policy::decide(&scenario))?);
    Ok(exit::OK)
}

fn read(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).map_err(|e| {
        let code = if e.kind() == std::io::ErrorKind::NotFound {
            exit::USAGE
        } else {
            exit::ERROR
        };
        fail(code, format!("cannot read {}: {e}", path.display()))
    })
}

fn malformed(label: &str, e: &ScenarioError) -> anyhow::Error {
    fail(
        exit::USAGE,
        format!("{label}: {e} (the scenario format is in docs/policy.md)"),
    )
}

/// One scenario file's outcome under `check`.
#[derive(Debug, serde::Serialize)]
struct Outcome {
    file: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    expected: Option<ExpectedPolicy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    decision: Option<Decision>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    ok: bool,
}

fn check(dir: &Path, json: bool) -> anyhow::Result<u8> {
    let entries = std::fs::read_dir(dir).map_err(|e| {
        fail(
            exit::USAGE,
            format!("cannot read directory {}: {e}", dir.display()),
        )
    })?;
    let mut files: Vec<PathBuf> = Vec::new();
    for entry in entries {
        let path = entry
            .map_err(|e| fail(exit::ERROR, format!("cannot list {}: {e}", dir.display())))?
            .path();
        if path.extension().is_some_and(|x| x == "json") && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    if files.is_empty() {
        return Err(fail(
            exit::USAGE,
            format!("no *.json scenario in {}", dir.display()),
        ));
    }
    let mut outcomes = Vec::with_capacity(files.len());
    for path in &files {
        outcomes.push(check_one(path)?);
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&outcomes)?);
    } else {
        print_table(&outcomes);
    }
    let broken: Vec<&Outcome> = outcomes.iter().filter(|o| o.error.is_some()).collect();
    let wrong: Vec<&Outcome> = outcomes
        .iter()
        .filter(|o| o.error.is_none() && !o.ok)
        .collect();
    for o in &broken {
        eprintln!(
            "drover: {}: {}",
            o.file,
            o.error.as_deref().unwrap_or_default()
        );
    }
    for o in &wrong {
        eprintln!(
            "drover: {}: expected {}, decided {}",
            o.file,
            o.expected.as_ref().map(describe).unwrap_or_default(),
            o.decision
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default()
        );
    }
    let n = outcomes.len();
    if !broken.is_empty() {
        return Err(fail(
            exit::USAGE,
            format!(
                "policy check: {} of {n} scenario file(s) are malformed; fix the named fields",
                broken.len()
            ),
        ));
    }
    if !wrong.is_empty() {
        let names: Vec<&str> = wrong.iter().map(|o| o.file.as_str()).collect();
        return Err(fail(
            exit::REFUSED,
            format!(
                "policy check: {} of {n} scenario(s) disagree with expected_policy: {}",
                wrong.len(),
                names.join(", ")
            ),
        ));
    }
    Ok(exit::OK)
}

/// Decide one file; a malformed file is an outcome, not an early exit, so every
/// problem in the directory is listed at once.
fn check_one(path: &Path) -> anyhow::Result<Outcome> {
    let file = path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string());
    let text = read(path)?;
    let broken = |error: String| Outcome {
        file: file.clone(),
        expected: None,
        decision: None,
        error: Some(error),
        ok: false,
    };
    let scenario: Scenario = match policy::parse_scenario(&text) {
        Ok(s) => s,
        Err(e) => return Ok(broken(e.to_string())),
    };
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    if scenario.name != stem {
        return Ok(broken(format!(
            "name: {:?} does not match the file name {stem:?} (a fixture's name says what it guards)",
            scenario.name
        )));
    }
    let Some(expected) = scenario.expected_policy.clone() else {
        return Ok(broken("expected_policy: missing".to_string()));
    };
    let decision = policy::decide(&scenario);
    let ok = decision.kind() == expected.decision
        && expected
            .reason_contains
            .as_deref()
            .is_none_or(|frag| decision.reason().contains(frag));
    Ok(Outcome {
        file,
        expected: Some(expected),
        decision: Some(decision),
        error: None,
        ok,
    })
}

/// `hold_stale (reason containing "…")`.
fn describe(e: &ExpectedPolicy) -> String {
    match &e.reason_contains {
        Some(frag) => format!("{} (reason containing {frag:?})", e.decision),
        None => e.decision.to_string(),
    }
}

fn print_table(outcomes: &[Outcome]) {
    let width = outcomes
        .iter()
        .map(|o| o.file.len())
        .max()
        .unwrap_or(4)
        .max(4);
    println!(
        "{:<width$}  {:<18}  {:<18}  RESULT",
        "FILE", "EXPECTED", "DECISION"
    );
    for o in outcomes {
        let expected = o
            .expected
            .as_ref()
            .map(|e| e.decision.name())
            .unwrap_or("-");
        let decision = o.decision.as_ref().map(|d| d.kind().name()).unwrap_or("-");
        let result = match (&o.error, o.ok) {
            (Some(_), _) => "malformed",
            (None, true) => "ok",
            (None, false) => "MISMATCH",
        };
        println!(
            "{:<width$}  {expected:<18}  {decision:<18}  {result}",
            o.file
        );
    }
    let agree = outcomes.iter().filter(|o| o.ok).count();
    println!("{} scenario(s), {agree} agree", outcomes.len());
}
