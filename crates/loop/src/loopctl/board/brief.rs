//! The brief: a lane's first message, at most ~2 KB. Its first line is exactly
//! `Lane: <id> · Task: <ID> (<title>) · Tier: routine|guarded`, then `Why:`,
//! `Done when:`, `Scope:`, `Rules:`. A task is `guarded` when its files touch
//! auth, secrets, credentials, migrations, CI workflows, infrastructure,
//! `LOOP.md` or the charter's `guarded-paths:`.

use crate::loopctl::LoopError;
use crate::loopctl::board::Task;
use crate::registry::scope::claim_matches;

/// Largest brief.
pub const MAX_BRIEF_BYTES: usize = 2048;
/// The sections after the first line, in order.
pub const SECTIONS: [&str; 4] = ["Why:", "Done when:", "Scope:", "Rules:"];
/// Path fragments that make a task guarded whatever the charter says.
const GUARDED_PARTS: &[&str] = &[
    "auth",
    "secret",
    "credential",
    "migration",
    ".github/workflows",
    "terraform",
    "k8s",
    "kubernetes",
    "helm",
    "deploy",
    "wrangler",
    "LOOP.md",
];

/// The review tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    Routine,
    Guarded,
}

impl Tier {
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Routine => "routine",
            Tier::Guarded => "guarded",
        }
    }
}

/// Whether one path is guarded (pure).
pub fn is_guarded(path: &str, guarded_paths: &[String]) -> bool {
    let lower = path.to_ascii_lowercase();
    GUARDED_PARTS
        .iter()
        .any(|p| lower.contains(&p.to_ascii_lowercase()))
        || guarded_paths.iter().any(|g| claim_matches(g, path))
}

/// The tier of a task from its files (pure).
pub fn tier_of(files: &[String], guarded_paths: &[String]) -> Tier {
    if files.iter().any(|f| is_guarded(f, guarded_paths)) {
        Tier::Guarded
    } else {
        Tier::Routine
    }
}

/// A parsed brief.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Brief {
    pub lane: String,
    pub task: String,
    pub title: String,
    pub tier: Tier,
    pub why: String,
    pub done_when: String,
    pub scope: String,
    pub rules: String,
}

/// The first line (pure).
pub fn first_line(lane: &str, task: &str, title: &str, tier: Tier) -> String {
    format!(
        "Lane: {lane} · Task: {task} ({title}) · Tier: {}",
        tier.as_str()
    )
}

/// Cut a string to at most `max` bytes on a char boundary, marking the cut.
fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let end = (0..=max.saturating_sub(3))
        .rev()
        .find(|i| s.is_char_boundary(*i))
        .unwrap_or(0);
    format!("{}…", &s[..end])
}

/// The brief's rules for an implementer; the last one is how it reports,
/// with the command verbatim (`cmd` is how the lane runs drover).
pub fn implementer_rules(cmd: &str) -> String {
    format!(
        "Edit only the files in Scope, in this worktree; do not commit or push. When finished, run `{cmd} report done` (or `{cmd} report failed --reason \"<why>\"` if you cannot finish)."
    )
}

/// Build the brief for a task (pure). The description and criteria are cut so
/// the whole stays under [`MAX_BRIEF_BYTES`]. `report_cmd` is how the lane
/// runs drover (the rules name `<report_cmd> report done`).
pub fn build(lane: &str, task: &Task, tier: Tier, others: &[String], report_cmd: &str) -> Brief {
    let criteria: Vec<String> = task
        .criteria
        .iter()
        .map(|c| format!("#{} {}", c.number, c.text))
        .collect();
    let others = if others.is_empty() {
        "none".to_string()
    } else {
        others.join(", ")
    };
    Brief {
        lane: lane.to_string(),
        task: task.id.clone(),
        title: cut(&task.title.replace(['\n', '\r'], " "), 120),
        tier,
        why: cut(&task.description.replace('\n', " "), 600),
        done_when: cut(&criteria.join("; "), 500),
        scope: cut(
            &format!(
                "{}. Other live lanes are in: {others}.",
                task.files.join(", ")
            ),
            300,
        ),
        rules: implementer_rules(report_cmd),
    }
}

/// How much of the task's criteria a review brief quotes (it stays ≤ 2 KB).
pub const REVIEW_CRITERIA_CHARS: usize = 600;

/// What a reviewer's brief is built from, besides the board's task: the
/// coordinator and a fleet host build the same text from it.
#[derive(Debug, Clone, Copy)]
pub struct ReviewOf<'a> {
    pub lane: &'a str,
    pub task: &'a str,
    pub title: &'a str,
    pub tier: Tier,
    pub round: u32,
    pub reviewer: &'a str,
    /// The reviewer's own copy of the candidate.
    pub patch: &'a std::path::Path,
    /// The candidate before its rebase round, when it changed more than the
    /// conflicts' resolution.
    pub before: Option<&'a std::path::Path>,
}

/// A reviewer's brief (pure): it checks the candidate against what the
/// task asks (its criteria, cut to [`REVIEW_CRITERIA_CHARS`]) and ends
/// with its stated verdict.
pub fn review(r: &ReviewOf<'_>, criteria: &[crate::loopctl::board::Criterion]) -> String {
    let asks = if criteria.is_empty() {
        String::new()
    } else {
        let c: Vec<String> = criteria
            .iter()
            .map(|c| format!("#{} {}", c.number, c.text))
            .collect();
        let c: String = c.join("; ").chars().take(REVIEW_CRITERIA_CHARS).collect();
        format!(" The task asks: {c}")
    };
    let before = r.before.map_or(String::new(), |p| {
        format!(
            " It was rebased onto the integration branch and changed more than the conflicts' resolution; before the rebase it was {}.",
            p.display()
        )
    });
    format!(
        "{}\nWhy: review the candidate of {id} before it lands (round {}).{asks}\nDone when: your last reply ends with one line `VERDICT: pass` or `VERDICT: fail: <one-line reason>`, your findings above it; or, if you can run it, you reported with `{cmd} session-heartbeat --session reviewer --agent {} --task {id} --status pass|fail` and wrote the report.\nScope: read-only; the candidate is {}.{before}\nRules: change nothing; findings in your reply (or the report's `findings` field).\n",
        first_line(r.lane, r.task, r.title, r.tier),
        r.round,
        r.reviewer,
        r.patch.display(),
        id = r.task,
        // As every command drover names to an agent: the absolute path.
        cmd = crate::report::own_command_word(),
    )
}

/// The `[loop]` line that ends an implementer's prompt (pure): the task,
/// the round and, for a round sent back, its tag (`repair`, `rebase`).
pub fn implementer_trailer(task: &str, round: u32, tag: &str) -> String {
    let tag = if tag.is_empty() {
        String::new()
    } else {
        format!(" {tag}")
    };
    format!("[loop] task={task} round={round} role=implementer{tag}")
}

/// The `[loop]` line that ends a reviewer's prompt (pure).
pub fn review_trailer(task: &str, round: u32, patch: &std::path::Path) -> String {
    format!(
        "[loop] task={task} round={round} role=reviewer patch={}",
        patch.display()
    )
}

/// What a repair round is told after the brief (pure).
pub fn repair_addendum(evidence: &str) -> String {
    format!("Repair: {evidence}\n")
}

/// A tier by its name (`routine` unless `guarded`).
pub fn tier_named(name: Option<&str>) -> Tier {
    if name == Some("guarded") {
        Tier::Guarded
    } else {
        Tier::Routine
    }
}

/// The brief's text (pure).
pub fn render(b: &Brief) -> String {
    format!(
        "{}\nWhy: {}\nDone when: {}\nScope: {}\nRules: {}\n",
        first_line(&b.lane, &b.task, &b.title, b.tier),
        b.why,
        b.done_when,
        b.scope,
        b.rules
    )
}

fn bad(message: impl Into<String>) -> LoopError {
    LoopError::usage("brief", message)
}

/// Parse a brief's text and validate it (pure): the first line's exact form,
/// the four sections in order, the size, and that a brief whose scope names a
/// guarded path is not `routine`.
pub fn parse(text: &str, guarded_paths: &[String]) -> Result<Brief, LoopError> {
    if text.len() > MAX_BRIEF_BYTES {
        return Err(bad(format!(
            "{} bytes; a brief is at most {MAX_BRIEF_BYTES}",
            text.len()
        )));
    }
    let mut lines = text.lines();
    let first = lines.next().unwrap_or("");
    let rest = first
        .strip_prefix("Lane: ")
        .ok_or_else(|| bad("the first line must start with `Lane: `"))?;
    let (lane, rest) = rest
        .split_once(" · Task: ")
        .ok_or_else(|| bad("the first line must have ` · Task: `"))?;
    let (task_part, tier) = rest
        .rsplit_once(" · Tier: ")
        .ok_or_else(|| bad("the first line must end with ` · Tier: routine|guarded`"))?;
    let tier = match tier {
        "routine" => Tier::Routine,
        "guarded" => Tier::Guarded,
        t => return Err(bad(format!("tier {t:?} is not routine or guarded"))),
    };
    let (task, title) = task_part
        .split_once(" (")
        .and_then(|(id, t)| Some((id, t.strip_suffix(')')?)))
        .ok_or_else(|| bad("the task must be written `<ID> (<title>)`"))?;
    let ok_id = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    };
    if !ok_id(lane) || !ok_id(task) {
        return Err(bad("lane and task ids are [A-Za-z0-9._-]+"));
    }
    let mut fields = [String::new(), String::new(), String::new(), String::new()];
    let mut next = 0;
    for line in lines {
        if next < SECTIONS.len()
            && let Some(v) = line.strip_prefix(SECTIONS[next])
        {
            fields[next] = v.trim().to_string();
            next += 1;
        } else if next > 0 {
            let f = &mut fields[next - 1];
            f.push('\n');
            f.push_str(line);
        } else {
            return Err(bad(format!(
                "expected `{}` after the first line",
                SECTIONS[0]
            )));
        }
    }
    if next < SECTIONS.len() {
        return Err(bad(format!("missing `{}`", SECTIONS[next])));
    }
    let [why, done_when, scope, rules] = fields;
    let scope_paths: Vec<String> = scope
        .split(|c: char| c == ',' || c.is_whitespace())
        .map(|s| s.trim_end_matches('.').to_string())
        .filter(|s| s.contains('/') || s.contains('.'))
        .collect();
    if tier == Tier::Routine && tier_of(&scope_paths, guarded_paths) == Tier::Guarded {
        return Err(bad(
            "its scope touches a guarded path; the tier must be guarded",
        ));
    }
    Ok(Brief {
        lane: lane.to_string(),
        task: task.to_string(),
        title: title.to_string(),
        tier,
        why,
        done_when,
        scope,
        rules,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loopctl::board::parse_task;
    use std::path::Path;

    fn task(files: &str) -> Task {
        parse_task(
            &format!("---\nid: TASK-3\ntitle: Greet (politely)\nstatus: To Do\nmodified_files: [{files}]\n---\n## Description\nSay hi.\n## Acceptance Criteria\n- [ ] #1 it greets\n"),
            Path::new("t.md"),
        )
        .unwrap()
    }

    #[test]
    fn built_briefs_round_trip() {
        let t = task("hello.txt");
        let b = build(
            "impl-task-3",
            &t,
            tier_of(&t.files, &[]),
            &["a.txt".into()],
            "/opt/drover/bin/drover",
        );
        let text = render(&b);
        assert_eq!(
            text.lines().next().unwrap(),
            "Lane: impl-task-3 · Task: TASK-3 (Greet (politely)) · Tier: routine"
        );
        assert!(text.len() <= MAX_BRIEF_BYTES);
        assert_eq!(parse(&text, &[]).unwrap(), b);
        assert!(
            text.trim_end()
                .ends_with("run `/opt/drover/bin/drover report done` (or `/opt/drover/bin/drover report failed --reason \"<why>\"` if you cannot finish)."),
            "the last rule names the command verbatim: {text}"
        );
        let long = Task {
            description: "x".repeat(10_000),
            ..t
        };
        assert!(render(&build("l", &long, Tier::Routine, &[], "drover")).len() <= MAX_BRIEF_BYTES);
    }

    #[test]
    fn guarded_rule() {
        let g = vec!["src/billing/**".to_string()];
        assert_eq!(tier_of(&["src/billing/x.rs".into()], &g), Tier::Guarded);
        assert_eq!(
            tier_of(&[".github/workflows/ci.yml".into()], &[]),
            Tier::Guarded
        );
        assert_eq!(tier_of(&["LOOP.md".into()], &[]), Tier::Guarded);
        assert_eq!(tier_of(&["src/lib.rs".into()], &g), Tier::Routine);
        let t = task(".github/workflows/ci.yml");
        let mut b = build("l", &t, Tier::Guarded, &[], "drover");
        assert!(parse(&render(&b), &[]).is_ok());
        b.tier = Tier::Routine;
        let e = parse(&render(&b), &[]).unwrap_err().to_string();
        assert!(e.contains("guarded"), "{e}");
    }

    #[test]
    fn malformed_briefs_are_refused() {
        for bad in [
            "Task: X (y) · Tier: routine\nWhy: a\nDone when: b\nScope: c\nRules: d\n",
            "Lane: l · Task: X (y) · Tier: urgent\nWhy: a\nDone when: b\nScope: c\nRules: d\n",
            "Lane: l · Task: X y · Tier: routine\nWhy: a\nDone when: b\nScope: c\nRules: d\n",
            "Lane: l · Task: X (y) · Tier: routine\nWhy: a\nScope: c\nRules: d\n",
            "Lane: l - Task: X (y) - Tier: routine\nWhy: a\nDone when: b\nScope: c\nRules: d\n",
        ] {
            assert!(parse(bad, &[]).is_err(), "{bad}");
        }
        let big = format!(
            "Lane: l · Task: X (y) · Tier: routine\nWhy: {}\nDone when: b\nScope: c\nRules: d\n",
            "w".repeat(3000)
        );
        assert!(parse(&big, &[]).unwrap_err().to_string().contains("2048"));
    }
}
