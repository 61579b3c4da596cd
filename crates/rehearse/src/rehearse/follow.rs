//! The brief-following model (`drover mock-model --follow-brief`): a test
//! model that knows nothing of drover but what its prompt says, and does
//! exactly that, with the agent's own tools. No per-task script: what it
//! does is a pure function of the conversation (docs/rehearsal.md, "The
//! brief-following model", lists the phrases it understands).
//!
//! - An implementer's prompt (a brief: `Lane: … · Task: …` and `Rules:`)
//!   asks for files: "Create the file X containing the line Y." and, in a
//!   repair, "X must hold the line `Y`". It writes each file (Claude:
//!   `Read` then `Write`; Codex: `exec_command` with `printf`), then does
//!   what the last rule says: runs the command in "run `…`".
//! - A reviewer's prompt asks for a verdict in a form given in backticks
//!   (`VERDICT: pass`, `VERDICT: fail: <one-line reason>`). It reads the
//!   candidate ("the candidate is `<path>`"), checks each "X contains the
//!   line `Y`" the task asks against the patch, and states the verdict in
//!   that form: a missing line fails with "X must hold the line `Y`".
//! - A rebase round ("the merge stopped with conflict markers in: X.")
//!   resolves each file as it says — both sides kept, the marker lines
//!   deleted (Claude: `Read` then `Write`; Codex: `sed -i`) — then reports.
//! - A follow-up prompt (a reminder, an answer about the report) is
//!   followed the same way: a JSON object to write, or a command to run.
//!
//! [`Reports`] says how it reports, to test each path an agent may take.

use super::script::{Position, Step, ToolCall};
use serde_json::{Value, json};

/// How the model reports its work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Reports {
    /// Runs the command the brief names (`drover report done`).
    #[default]
    Command,
    /// Writes the report file by hand, from the trailer's literal example.
    Json,
    /// First writes the report a model guesses from words alone (the one
    /// of issue 23), then follows what drover answers.
    Guess,
    /// First ends its turn without reporting, then follows the reminder.
    Forget,
}

impl std::str::FromStr for Reports {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "command" => Ok(Reports::Command),
            "json" => Ok(Reports::Json),
            "guess" => Ok(Reports::Guess),
            "forget" => Ok(Reports::Forget),
            _ => Err(format!(
                "--reports {s:?}: one of command, json, guess, forget"
            )),
        }
    }
}

/// One thing the model does with a tool.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Act {
    Read(String),
    Write(String, String),
    Run(String),
}

/// The spans between pairs of backticks.
fn backticked(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

fn is_brief(prompt: &str) -> bool {
    prompt
        .lines()
        .any(|l| l.starts_with("Lane: ") && l.contains(" · Task: "))
        && prompt.lines().any(|l| l.starts_with("Rules:"))
}

/// The verdict forms the prompt asks for: (pass, fail with `<…>`).
fn verdict_forms(prompt: &str) -> Option<(String, String)> {
    let spans = backticked(prompt);
    let pass = spans.iter().find(|s| s.ends_with(": pass"))?;
    let fail = spans.iter().find(|s| s.contains(": fail: <"))?;
    Some((pass.to_string(), fail.to_string()))
}

/// The word before `at` in `text`, without quotes or punctuation.
fn word_before(text: &str, at: usize) -> String {
    text[..at]
        .split_whitespace()
        .next_back()
        .unwrap_or("")
        .trim_matches(|c: char| c == '`' || c == '"' || c == ',' || c == ';' || c == ':')
        .to_string()
}

/// The text after `from`: a backticked span when it starts with one, else
/// up to the end of the sentence.
fn value_after(text: &str, from: usize) -> Option<String> {
    let rest = text[from..].trim_start();
    if let Some(r) = rest.strip_prefix('`') {
        return r.split_once('`').map(|(v, _)| v.to_string());
    }
    let end = rest
        .char_indices()
        .find(|(i, c)| {
            *c == '\n'
                || (*c == '.' && rest[i + 1..].chars().next().is_none_or(char::is_whitespace))
        })
        .map_or(rest.len(), |(i, _)| i);
    let v = rest[..end].trim();
    (!v.is_empty()).then(|| v.to_string())
}

/// Every `(file, line)` a phrase `…X <phrase> Y` asks for, in order.
fn pairs(text: &str, phrase: &str) -> Vec<(String, String)> {
    let lower = text.to_ascii_lowercase();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = lower[from..].find(phrase) {
        let at = from + i;
        let file = word_before(text, at);
        if let Some(line) = value_after(text, at + phrase.len())
            && !file.is_empty()
        {
            out.push((file, line));
        }
        from = at + phrase.len();
    }
    out
}

/// "Create the file X containing the line Y": (X, Y).
fn creations(text: &str) -> Vec<(String, String)> {
    let lower = text.to_ascii_lowercase();
    let mut out = Vec::new();
    let mut from = 0;
    const HEAD: &str = "create the file ";
    const MID: &str = " containing the line ";
    while let Some(i) = lower[from..].find(HEAD) {
        let start = from + i + HEAD.len();
        from = start;
        let Some(j) = lower[start..].find(MID) else {
            break;
        };
        let file = text[start..start + j].trim().trim_matches('`').to_string();
        if file.contains(char::is_whitespace) || file.is_empty() {
            continue;
        }
        if let Some(line) = value_after(text, start + j + MID.len()) {
            out.push((file, line));
        }
    }
    out
}

/// The files to write and their lines, from every phrase of the prompt.
fn files(prompt: &str) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    let asks = creations(prompt)
        .into_iter()
        .chain(pairs(prompt, " must hold the line "));
    for (file, line) in asks {
        match out.iter_mut().find(|(f, _)| *f == file) {
            Some((_, lines)) if !lines.contains(&line) => lines.push(line),
            Some(_) => {}
            None => out.push((file, vec![line])),
        }
    }
    out
}

/// The first command the prompt says to run (`run `…``).
fn command(prompt: &str) -> Option<String> {
    let lower = prompt.to_ascii_lowercase();
    let i = lower.find("run `")?;
    prompt[i + 5..].split_once('`').map(|(c, _)| c.to_string())
}

/// The report file and the JSON object the prompt says to write
/// ("write <path> … as this one JSON object …: {…}").
fn json_to_write(prompt: &str) -> Option<(String, String)> {
    const PHRASE: &str = "as this one JSON object";
    let at = prompt.find(PHRASE)?;
    let lower = prompt[..at].to_ascii_lowercase();
    let w = lower.rfind("write ")?;
    let path = prompt[w + 6..at].split_whitespace().next()?.to_string();
    let brace = at + prompt[at..].find('{')?;
    let mut it = serde_json::Deserializer::from_str(&prompt[brace..]).into_iter::<Value>();
    let v = it.next()?.ok()?;
    Some((path, v.to_string()))
}

/// A `key=value` token of the prompt.
fn token(prompt: &str, key: &str) -> Option<String> {
    let k = format!("{key}=");
    prompt
        .split_whitespace()
        .find_map(|w| w.strip_prefix(&k).map(str::to_string))
}

/// The report a model guesses from "write it with attempt_id, session_id,
/// state and side_effects" (issue 23): wrong in every field drover needs.
fn guessed(prompt: &str, files: &[(String, Vec<String>)]) -> Option<Act> {
    let path = token(prompt, "report")?;
    let effects: Vec<Value> = files
        .iter()
        .map(|(f, _)| json!({"type": "file", "action": "created", "path": f}))
        .collect();
    let doc = json!({"attempt_id": token(prompt, "attempt"), "session_id": null,
                     "state": "completed", "side_effects": effects});
    Some(Act::Write(path, doc.to_string()))
}

fn report_act(prompt: &str, reports: Reports, files: &[(String, Vec<String>)]) -> Option<Act> {
    let brief = is_brief(prompt);
    let run = || command(prompt).map(Act::Run);
    let write = || json_to_write(prompt).map(|(p, j)| Act::Write(p, j));
    match reports {
        Reports::Forget if brief => None,
        Reports::Guess if brief => guessed(prompt, files),
        Reports::Json | Reports::Guess => write().or_else(run),
        Reports::Command | Reports::Forget => run().or_else(write),
    }
}

/// The tool call for an act, as `agent`'s API names it.
fn call(act: &Act, agent: &str) -> (String, ToolCall) {
    let claude = agent == "claude";
    let tool = |name: &str, input: Value| ToolCall {
        name: name.into(),
        input,
    };
    match act {
        Act::Read(p) if claude => (
            format!("Reading {p}."),
            tool("Read", json!({"file_path": p})),
        ),
        Act::Read(p) => (
            format!("Reading {p}."),
            tool(
                "exec_command",
                json!({"cmd": format!("cat {}", crate::shell::quote(p))}),
            ),
        ),
        Act::Write(p, c) if claude => (
            format!("Writing {p}."),
            tool("Write", json!({"file_path": p, "content": c})),
        ),
        Act::Write(p, c) => {
            let dir = std::path::Path::new(p)
                .parent()
                .map(|d| d.display().to_string())
                .filter(|d| !d.is_empty());
            let mkdir = dir
                .map(|d| format!("mkdir -p {} && ", crate::shell::quote(&d)))
                .unwrap_or_default();
            (
                format!("Writing {p}."),
                tool(
                    "exec_command",
                    json!({"cmd": format!("{mkdir}printf '%s' {} > {}", crate::shell::quote(c), crate::shell::quote(p))}),
                ),
            )
        }
        Act::Run(c) if claude => (
            format!("Running {c}."),
            tool(
                "Bash",
                json!({"command": c, "description": "Run what the prompt asks"}),
            ),
        ),
        Act::Run(c) => (
            format!("Running {c}."),
            tool("exec_command", json!({"cmd": c})),
        ),
    }
}

/// Whether the candidate `patch` adds `line` to `file` (a tool's output of
/// it: line numbers or a header before each line do not matter).
fn adds(patch: &str, file: &str, line: &str) -> bool {
    let mut current = String::new();
    let plus = format!("+{line}");
    for l in patch.lines() {
        if let Some(i) = l.find("+++ b/") {
            current = l[i + 6..].trim().to_string();
        } else if current == file && l.trim_end().ends_with(&plus) && !l.contains("+++") {
            return true;
        }
    }
    false
}

/// The verdict line, in the form the prompt asked for.
fn verdict(prompt: &str, patch: Option<&str>, forms: &(String, String)) -> String {
    let asks = pairs(prompt, " contains the line ");
    let missing = match patch {
        None => Some("the candidate could not be read".to_string()),
        Some(p) => asks
            .iter()
            .find(|(f, l)| !adds(p, f, l))
            .map(|(f, l)| format!("{f} must hold the line `{l}`")),
    };
    match missing {
        None => format!(
            "Findings: every line the task asks for is in the candidate ({} checked).\n\n{}",
            asks.len(),
            forms.0
        ),
        Some(reason) => {
            let (head, rest) = forms.1.split_once('<').unwrap_or((&forms.1, ""));
            let tail = rest.split_once('>').map_or("", |(_, t)| t);
            format!("Findings: {reason}.\n\n{head}{reason}{tail}")
        }
    }
}

/// The files a rebase round names ("the merge stopped with conflict markers
/// in: X, Y.").
fn conflicted(prompt: &str) -> Option<Vec<String>> {
    const PHRASE: &str = "conflict markers in: ";
    let i = prompt.find(PHRASE)?;
    let rest = &prompt[i + PHRASE.len()..];
    let end = rest
        .find(". ")
        .or_else(|| rest.find('\n'))
        .unwrap_or(rest.len());
    let files: Vec<String> = rest[..end]
        .trim_end_matches('.')
        .split(", ")
        .map(|f| f.trim().trim_matches('`').to_string())
        .filter(|f| !f.is_empty() && !f.contains(char::is_whitespace))
        .collect();
    (!files.is_empty()).then_some(files)
}

/// A file's text from a tool's output of it (Claude's `Read` numbers each
/// line, `   1→text`; anything without a number — a note after it — is not
/// the file), conflicts resolved as a rebase round asks: both sides kept,
/// the marker lines deleted.
fn resolved(output: &str) -> String {
    let numbered = |l: &str| -> Option<String> {
        let t = l.trim_start();
        let digits = t.len() - t.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits == 0 {
            return None;
        }
        let rest = &t[digits..];
        rest.strip_prefix('→')
            .or_else(|| rest.strip_prefix('\t'))
            .map(str::to_string)
    };
    let lines: Vec<String> = if output.lines().any(|l| numbered(l).is_some()) {
        output.lines().filter_map(numbered).collect()
    } else {
        output.lines().map(str::to_string).collect()
    };
    lines
        .into_iter()
        .filter(|l| !(l.starts_with("<<<<<<<") || l.starts_with(">>>>>>>") || l == "======="))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// What a rebase round asks of `agent`: resolve each conflicted file
/// (Claude reads it and writes it back resolved; Codex deletes the marker
/// lines with `sed` in its worktree), then report as usual.
fn rebase_acts(
    prompt: &str,
    pos: &Position,
    agent: &str,
    files: &[String],
    reports: Reports,
) -> Vec<Act> {
    let mut acts = Vec::new();
    for f in files {
        if agent == "claude" {
            let read_at = acts.len();
            acts.push(Act::Read(f.clone()));
            let content = pos
                .results
                .get(read_at)
                .map(|r| resolved(r))
                .unwrap_or_default();
            acts.push(Act::Write(f.clone(), content));
        } else {
            acts.push(Act::Run(format!(
                "sed -i -e '/^<<<<<<< /d' -e '/^=======$/d' -e '/^>>>>>>> /d' {}",
                crate::shell::quote(f)
            )));
        }
    }
    acts.extend(report_act(prompt, reports, &[]));
    acts
}

/// The step answering a request at `pos` from `agent`'s API (`claude` or
/// `codex`).
pub fn step(pos: &Position, agent: &str, reports: Reports) -> Step {
    let prompt = pos.prompt.as_str();
    if let Some(forms) = verdict_forms(prompt) {
        let patch = token(prompt, "patch").or_else(|| {
            let i = prompt.find("the candidate is ")?;
            value_after(prompt, i + "the candidate is ".len())
        });
        return match (&patch, pos.tool_results) {
            (Some(p), 0) => {
                let (text, tool) = call(&Act::Read(p.clone()), agent);
                Step {
                    text,
                    tool: Some(tool),
                    ..Default::default()
                }
            }
            _ => Step::text(&verdict(
                prompt,
                pos.results.first().map(String::as_str),
                &forms,
            )),
        };
    }
    if let Some(conflicts) = conflicted(prompt).filter(|_| is_brief(prompt)) {
        let acts = rebase_acts(prompt, pos, agent, &conflicts, reports);
        return match acts.get(pos.tool_results) {
            Some(a) => {
                let (text, tool) = call(a, agent);
                Step {
                    text,
                    tool: Some(tool),
                    ..Default::default()
                }
            }
            None => Step::text("Done: the conflicts are resolved."),
        };
    }
    let files = if is_brief(prompt) {
        files(prompt)
    } else {
        Vec::new()
    };
    let mut acts = Vec::new();
    for (f, lines) in &files {
        let content: String = lines.iter().map(|l| format!("{l}\n")).collect();
        // Claude Code writes over a file only after reading it.
        if agent == "claude" {
            acts.push(Act::Read(f.clone()));
        }
        acts.push(Act::Write(f.clone(), content));
    }
    acts.extend(report_act(prompt, reports, &files));
    match acts.get(pos.tool_results) {
        Some(a) => {
            let (text, tool) = call(a, agent);
            Step {
                text,
                tool: Some(tool),
                ..Default::default()
            }
        }
        None if acts.is_empty() => Step::text("Nothing in the prompt asks me to do anything."),
        None => Step::text("Done."),
    }
}

#[cfg(test)]
#[path = "follow_tests.rs"]
mod tests;
