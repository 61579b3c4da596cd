//! The sim agent's script: what it does for each prompt (format: docs/agents.md).

use crate::agent::AgentError;
use crate::evidence::LaneReportState;
use serde::Deserialize;
use std::path::Path;

/// Largest script file read, so a wrong path cannot make the sim read a huge file.
const MAX_SCRIPT_BYTES: u64 = 1 << 20;

/// A whole script.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// Milliseconds before the first idle screen appears (the `starting` state).
    #[serde(default)]
    pub startup_ms: u64,
    /// Codex profile: send OSC `blocked` this many milliseconds before drawing
    /// the permission dialog, as real Codex does (~800 ms). Default 0.
    #[serde(default)]
    pub osc_blocked_lead_ms: u64,
    /// Turns, chosen per prompt (see [`Script::turn_for`]).
    #[serde(default, rename = "turn")]
    pub turns: Vec<Turn>,
    /// The effort the sim was started with (Claude's `--effort`, Codex's
    /// `-c model_reasoning_effort=`): no effect but to be named in reports.
    #[serde(skip)]
    pub effort: Option<String>,
    /// The scriptless sim: a prompt carrying drover's `[drover] … report=`
    /// line gets its report written before the turn finishes, as an agent
    /// that follows the prompt would.
    #[serde(skip)]
    pub reports_when_asked: bool,
}

/// What the sim does for one prompt.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    /// When set, the turn is chosen for any prompt containing this text.
    #[serde(default, rename = "match")]
    pub matches: Option<String>,
    /// When set (`NAME=VALUE`), the turn is chosen only in a sim whose
    /// environment has it: what differs between hosts or accounts (one
    /// whose login is at its usage limit), which no prompt says.
    #[serde(default)]
    pub env: Option<String>,
    /// The steps, in order. A turn whose steps run out finishes.
    pub steps: Vec<Step>,
}

impl Turn {
    /// Whether the turn's `env` condition holds in the environment `get`.
    pub fn applies(&self, get: impl Fn(&str) -> Option<String>) -> bool {
        match self
            .env
            .as_deref()
            .map(|c| c.split_once('=').unwrap_or((c, "")))
        {
            None => true,
            Some((k, v)) => get(k).as_deref() == Some(v),
        }
    }
}

/// One step of a turn.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Step {
    /// Show the working spinner for this many milliseconds.
    Work(u64),
    /// Ask permission to run this command; approval continues, denial ends the
    /// turn without a finished-turn marker.
    Ask(String),
    /// Write a file (a relative path is relative to the sim's cwd); with
    /// `append`, add `content` at its end (after a line end), keeping what
    /// it holds.
    Write {
        path: String,
        #[serde(default)]
        content: String,
        #[serde(default)]
        append: bool,
    },
    /// Resolve the conflict markers git left in a file (a relative path is
    /// relative to the sim's cwd), keeping `ours`, `theirs` or `both`.
    Resolve {
        path: String,
        keep: crate::agent::sim::Keep,
    },
    /// Write a report JSON document (atomically) to `path`.
    Report {
        path: String,
        #[serde(default = "finalized")]
        state: LaneReportState,
        /// Extra fields merged into the document.
        #[serde(default)]
        fields: Option<serde_json::Map<String, serde_json::Value>>,
    },
    /// Print a line of reply text.
    Say(String),
    /// Report a status for the prompt's task through `drover session-heartbeat`
    /// (the sim is the drover binary): the session is `DROVER_SESSION_ID`, the
    /// lane's agent `DROVER_AGENT` (else the profile), the task the prompt's
    /// `task=` token.
    Heartbeat {
        status: String,
        #[serde(default)]
        session: Option<String>,
    },
    /// Report the session's running usage totals as Claude Code's status
    /// line does (`drover signal claude-status`; the sim is the drover
    /// binary): `{ usage = { input_tokens = 1200, output_tokens = 300,
    /// cost_usd = 0.05 } }`, each figure optional.
    Usage(super::usage::Totals),
    /// Stop at a usage limit: show the agent's limit line above the prompt
    /// and end the turn without the finished-turn marker; the line goes away
    /// after `ms` (the limit resets). `resets` is the time shown. Claude
    /// profile: `menu` labels draw the `What do you want to do?` menu in that
    /// order; choosing any row but "Stop and wait for limit to reset" exits
    /// the sim with code 3 (a wrong row is a lost night).
    Limit {
        ms: u64,
        #[serde(default)]
        resets: Option<String>,
        #[serde(default)]
        menu: Vec<String>,
    },
    /// End the turn with the finished-turn marker.
    Finish,
    /// Exit the process with this code.
    Exit(i32),
}

fn finalized() -> LaneReportState {
    LaneReportState::Finalized
}

impl Default for Script {
    /// Work 500 ms, then finish, for every prompt (after writing the report
    /// a dispatched prompt asks for).
    fn default() -> Self {
        Script {
            startup_ms: 0,
            osc_blocked_lead_ms: 0,
            turns: vec![Turn {
                matches: None,
                env: None,
                steps: vec![Step::Work(500), Step::Finish],
            }],
            effort: None,
            reports_when_asked: true,
        }
    }
}

impl Script {
    /// The script as a read-only agent runs it (started with Claude's
    /// `--permission-mode plan` or Codex's `-s read-only`): every `write`
    /// step becomes a line saying the file was not written. Reports (written
    /// outside the worktree, where the dispatch says) are kept.
    pub fn read_only(mut self) -> Self {
        for t in &mut self.turns {
            for s in &mut t.steps {
                if let Step::Write { path, .. } | Step::Resolve { path, .. } = s {
                    *s = Step::Say(format!("read-only: not writing {path}"));
                }
            }
        }
        self
    }

    /// The script as an agent started at an effort level runs it: the same
    /// steps, its reports naming the level (`"effort"`).
    pub fn with_effort(mut self, effort: Option<String>) -> Self {
        self.effort = effort;
        self
    }

    /// Parse a script: JSON when it starts with `{`, else TOML.
    pub fn parse(text: &str, origin: &str) -> Result<Self, AgentError> {
        let bad = |message: String| AgentError::Script {
            origin: origin.to_string(),
            message,
        };
        let script: Script = if text.trim_start().starts_with('{') {
            serde_json::from_str(text).map_err(|e| bad(e.to_string()))?
        } else {
            toml::from_str(text).map_err(|e| bad(e.to_string().trim().to_string()))?
        };
        for (i, t) in script.turns.iter().enumerate() {
            for s in &t.steps {
                let path = match s {
                    Step::Write { path, .. }
                    | Step::Resolve { path, .. }
                    | Step::Report { path, .. } => path,
                    Step::Heartbeat { status, .. } if status.is_empty() => {
                        return Err(bad(format!("turn #{}: empty heartbeat status", i + 1)));
                    }
                    _ => continue,
                };
                if path.is_empty() || path.contains('\0') {
                    return Err(bad(format!("turn #{}: empty or invalid path", i + 1)));
                }
            }
        }
        Ok(script)
    }

    /// Read and parse a script file.
    pub fn load(path: &Path) -> Result<Self, AgentError> {
        let io = |source| AgentError::Io {
            path: path.to_path_buf(),
            source,
        };
        let meta = std::fs::metadata(path).map_err(io)?;
        if meta.len() > MAX_SCRIPT_BYTES {
            return Err(AgentError::Script {
                origin: path.display().to_string(),
                message: format!("larger than {MAX_SCRIPT_BYTES} bytes"),
            });
        }
        let text = std::fs::read_to_string(path).map_err(io)?;
        Self::parse(&text, &path.display().to_string())
    }

    /// The turn for the `n`th prompt (0-based): the first turn whose `match`
    /// text the prompt contains, else the `n`th turn without `match` (the last
    /// such turn repeats), else the default (work 500 ms, finish).
    pub fn turn_for(&self, n: usize, prompt: &str) -> Turn {
        let mut turn = self.chosen_turn(n, prompt);
        let asked = prompt
            .lines()
            .any(|l| l.starts_with("[drover] job=") && l.contains(" report="));
        let reports = turn.steps.iter().any(|s| matches!(s, Step::Report { .. }));
        if self.reports_when_asked && asked && !reports {
            let at = turn
                .steps
                .iter()
                .position(|s| matches!(s, Step::Finish))
                .unwrap_or(turn.steps.len());
            turn.steps.insert(
                at,
                Step::Report {
                    path: "{report}".into(),
                    state: finalized(),
                    fields: None,
                },
            );
        }
        turn
    }

    fn chosen_turn(&self, n: usize, prompt: &str) -> Turn {
        let here = |t: &&Turn| t.applies(|k| std::env::var(k).ok());
        if let Some(t) = self
            .turns
            .iter()
            .filter(here)
            .find(|t| t.matches.as_deref().is_some_and(|m| prompt.contains(m)))
        {
            return t.clone();
        }
        let plain: Vec<&Turn> = self
            .turns
            .iter()
            .filter(here)
            .filter(|t| t.matches.is_none())
            .collect();
        match plain.get(n).or(plain.last()) {
            Some(t) => (*t).clone(),
            None => Script::default().turns.remove(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Guards issue 42 item 9: the scriptless sim never reported, so a job
    /// dispatched to it (the README tour's auto-completion line) ran for good.
    #[test]
    fn the_scriptless_sim_reports_where_a_dispatched_prompt_asks() {
        let d = Script::default();
        let asked = d.turn_for(
            0,
            "do it\n\n[drover] job=T-2 attempt=a1 nonce=n1 report=/r.json\n",
        );
        assert_eq!(
            asked.steps,
            vec![
                Step::Work(500),
                Step::Report {
                    path: "{report}".into(),
                    state: LaneReportState::Finalized,
                    fields: None
                },
                Step::Finish
            ]
        );
        let plain = d.turn_for(0, "refactor the parser");
        assert_eq!(plain.steps, vec![Step::Work(500), Step::Finish]);
    }

    #[test]
    fn toml_and_json_forms_parse_the_same() {
        let toml = r#"
startup_ms = 200
[[turn]]
steps = [
  { work = 300 },
  { ask = "touch made.txt" },
  { write = { path = "made.txt", content = "hi\n" } },
  { report = { path = "report.json" } },
  { say = "done" },
  "finish",
]
[[turn]]
match = "EXIT"
steps = [ { exit = 3 } ]
"#;
        let json = r#"{"startup_ms": 200, "turn": [
  {"steps": [{"work": 300}, {"ask": "touch made.txt"},
             {"write": {"path": "made.txt", "content": "hi\n"}},
             {"report": {"path": "report.json"}}, {"say": "done"}, "finish"]},
  {"match": "EXIT", "steps": [{"exit": 3}]}]}"#;
        let a = Script::parse(toml, "a.toml").unwrap();
        let b = Script::parse(json, "b.json").unwrap();
        assert_eq!(a, b);
        assert_eq!(a.turns[0].steps.len(), 6);
        assert_eq!(
            a.turns[0].steps[3],
            Step::Report {
                path: "report.json".into(),
                state: LaneReportState::Finalized,
                fields: None
            }
        );
    }

    /// Guards read-only lanes: a read-only sim carries out no write step and
    /// keeps everything else.
    #[test]
    fn a_read_only_script_writes_nothing() {
        let s = Script::parse(
            r#"
[[turn]]
steps = [ { work = 1 }, { write = { path = "x.txt", content = "x" } }, { report = { path = "r.json" } }, "finish" ]
"#,
            "t",
        )
        .unwrap()
        .read_only();
        let steps = &s.turns[0].steps;
        assert_eq!(steps.len(), 4);
        assert!(!steps.iter().any(|s| matches!(s, Step::Write { .. })));
        assert_eq!(steps[1], Step::Say("read-only: not writing x.txt".into()));
        assert!(matches!(steps[2], Step::Report { .. }));
    }

    #[test]
    fn turn_selection() {
        let s = Script::parse(
            r#"
[[turn]]
steps = [ { work = 1 } ]
[[turn]]
steps = [ { work = 2 } ]
[[turn]]
match = "BASH"
steps = [ { work = 3 } ]
"#,
            "t",
        )
        .unwrap();
        assert_eq!(s.turn_for(0, "x").steps, vec![Step::Work(1)]);
        assert_eq!(s.turn_for(1, "x").steps, vec![Step::Work(2)]);
        assert_eq!(s.turn_for(7, "x").steps, vec![Step::Work(2)]);
        assert_eq!(s.turn_for(0, "run BASH").steps, vec![Step::Work(3)]);
        let d = Script::default();
        assert_eq!(
            d.turn_for(5, "x").steps,
            vec![Step::Work(500), Step::Finish]
        );
        let empty = Script::parse("", "e").unwrap();
        assert_eq!(
            empty.turn_for(0, "x").steps,
            vec![Step::Work(500), Step::Finish]
        );
    }

    #[test]
    fn a_turn_with_an_env_condition_applies_only_where_it_holds() {
        let s = Script::parse(
            "[[turn]]\nenv = \"ACCOUNT=limited\"\nsteps = [ { work = 1 } ]\n[[turn]]\nsteps = [ { work = 2 } ]\n",
            "t",
        )
        .unwrap();
        let t = &s.turns[0];
        assert!(t.applies(|k| (k == "ACCOUNT").then(|| "limited".into())));
        assert!(!t.applies(|k| (k == "ACCOUNT").then(|| "fresh".into())));
        assert!(!t.applies(|_| None));
        assert!(s.turns[1].applies(|_| None), "no condition: always");
        // This test's process has no ACCOUNT: the plain turn is chosen.
        assert_eq!(s.turn_for(0, "x").steps, vec![Step::Work(2)]);
    }

    #[test]
    fn bad_scripts_name_the_file() {
        let e = Script::parse("[[turn]]\nsteps = [ { dance = 1 } ]\n", "s.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("s.toml"), "{e}");
        let e = Script::parse("{\"turn\": 3}", "s.json")
            .unwrap_err()
            .to_string();
        assert!(e.contains("s.json"), "{e}");
        let e = Script::load(Path::new("/nonexistent/script.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("script.toml"), "{e}");
    }
}
