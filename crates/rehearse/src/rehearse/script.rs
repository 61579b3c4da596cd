//! The mock model's script: what to answer, turn by turn (format in
//! `docs/rehearsal.md`). Selection is a pure function of the request, so a
//! retried or replayed request gets the same answer.

use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Characters per streamed delta when a step does not say.
pub const DEFAULT_CHUNK_CHARS: usize = 16;
/// Pause between streamed deltas when a step does not say.
pub const DEFAULT_DELAY_MS: u64 = 20;
/// The reply when no turn of the script fits the prompt.
pub const FALLBACK_REPLY: &str = "Mock model: no scripted turn matched this prompt.";
/// The title the mock gives every session (Claude asks with `tools: []`).
pub const TITLE: &str = "Mock rehearsal";

/// Errors loading a script.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScriptError {
    #[error("cannot read script {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("script {}: {message}", path.display())]
    Parse { path: PathBuf, message: String },
}

/// A whole script.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// Turns, tried in order.
    #[serde(default, rename = "turn")]
    pub turns: Vec<Turn>,
    /// The rate-limit headers every accepted answer carries (none by default).
    #[serde(default)]
    pub usage: Option<super::usage::Usage>,
    /// Follow the prompt's brief instead of the turns ([`super::follow`]).
    #[serde(skip)]
    pub follow: Option<super::follow::Reports>,
}

/// One user turn: the model's steps until it ends its turn.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    /// Chosen when the prompt contains this text; turns without it are taken in order.
    #[serde(default, rename = "match")]
    pub matches: Option<String>,
    /// Only for requests from this agent's API (`claude`: Anthropic
    /// Messages, `codex`: OpenAI Responses); any when absent.
    #[serde(default)]
    pub agent: Option<String>,
    /// One step per model response; a step with a tool waits for its result.
    #[serde(default, rename = "step")]
    pub steps: Vec<Step>,
}

/// One model response: streamed text, then optionally one tool call.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Step {
    #[serde(default)]
    pub text: String,
    /// Characters per delta.
    #[serde(default)]
    pub chunk_chars: Option<usize>,
    /// Milliseconds between deltas.
    #[serde(default)]
    pub delay_ms: Option<u64>,
    /// Milliseconds before the first byte of the response body.
    #[serde(default)]
    pub first_delay_ms: Option<u64>,
    /// Milliseconds to hold the response open after its content, before it ends
    /// (the agent shows the text and is still working).
    #[serde(default)]
    pub hold_ms: Option<u64>,
    #[serde(default)]
    pub tool: Option<ToolCall>,
    /// Answer with the API's usage-limit rejection (HTTP 429) instead.
    #[serde(default)]
    pub limit: Option<super::limit::Limit>,
    /// The rate-limit headers of this answer, instead of the script's `[usage]`.
    #[serde(default)]
    pub usage: Option<super::usage::Usage>,
}

/// A tool call, named and shaped as the agent's API expects (Claude `Write`
/// with `{file_path, content}`; Codex `exec_command` with `{cmd, …}`).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    pub name: String,
    #[serde(default = "empty_object")]
    pub input: serde_json::Value,
}

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(Default::default())
}

impl Step {
    /// A plain text step with default pacing.
    pub fn text(t: &str) -> Self {
        Step {
            text: t.to_string(),
            ..Default::default()
        }
    }

    /// Characters per delta (at least 1).
    pub fn chunk(&self) -> usize {
        self.chunk_chars.unwrap_or(DEFAULT_CHUNK_CHARS).max(1)
    }

    /// Pause between deltas.
    pub fn delay(&self) -> Duration {
        Duration::from_millis(self.delay_ms.unwrap_or(DEFAULT_DELAY_MS))
    }

    /// Pause after the content, before the response ends.
    pub fn hold(&self) -> Duration {
        Duration::from_millis(self.hold_ms.unwrap_or(0))
    }

    /// Pause before the response starts.
    pub fn first_delay(&self) -> Duration {
        Duration::from_millis(self.first_delay_ms.unwrap_or(0))
    }

    /// The text cut into deltas on character boundaries.
    pub fn chunks(&self) -> Vec<String> {
        let chars: Vec<char> = self.text.chars().collect();
        chars
            .chunks(self.chunk())
            .map(|c| c.iter().collect())
            .collect()
    }
}

/// Where a request stands in the conversation, as far as the script cares.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Position {
    /// The text of the latest user prompt (not a tool result).
    pub prompt: String,
    /// How many user prompts the conversation holds, this one included.
    pub prompts: usize,
    /// Tool results since that prompt: the step to answer with.
    pub tool_results: usize,
    /// Their text, in order (the brief-following model reads them).
    pub results: Vec<String>,
}

impl Script {
    /// Parse a script from TOML text.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ScriptError> {
        toml::from_str(text).map_err(|e| ScriptError::Parse {
            path: path.to_path_buf(),
            message: e.to_string().replace('\n', " "),
        })
    }

    /// Load a script file.
    pub fn load(path: &Path) -> Result<Self, ScriptError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScriptError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// The step answering a request at `pos`: the first turn whose `match` is in
    /// the prompt, else the `prompts`-th turn without a `match`; within it the
    /// step after the tool results seen. Past the end: the fallback text.
    /// `{{key}}` in the step is filled from the prompt's `key=value` tokens
    /// ([`super::template`]).
    pub fn step_for(&self, pos: &Position) -> Step {
        super::template::apply(self.pick(pos, None), &pos.prompt)
    }

    /// [`Script::step_for`] for a request from `agent`'s API (`claude` or
    /// `codex`): turns naming another agent are left out.
    pub fn step_for_agent(&self, pos: &Position, agent: &str) -> Step {
        if let Some(reports) = self.follow {
            return super::follow::step(pos, agent, reports);
        }
        super::template::apply(self.pick(pos, Some(agent)), &pos.prompt)
    }

    fn pick(&self, pos: &Position, agent: Option<&str>) -> Step {
        let turns = || {
            self.turns
                .iter()
                .filter(move |t| agent.is_none_or(|a| t.agent.as_deref().is_none_or(|ta| ta == a)))
        };
        let by_match = turns().find(|t| {
            t.matches
                .as_deref()
                .is_some_and(|m| !m.is_empty() && pos.prompt.contains(m))
        });
        let turn = by_match.or_else(|| {
            turns()
                .filter(|t| t.matches.is_none())
                .nth(pos.prompts.saturating_sub(1))
        });
        match turn {
            Some(t) => match t.steps.get(pos.tool_results) {
                Some(s) => s.clone(),
                None if pos.tool_results > 0 => Step::text("Done."),
                None => Step::text(FALLBACK_REPLY),
            },
            None => Step::text(FALLBACK_REPLY),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(prompt: &str, prompts: usize, tool_results: usize) -> Position {
        Position {
            prompt: prompt.into(),
            prompts,
            tool_results,
            results: Vec::new(),
        }
    }

    const SCRIPT: &str = r#"
[[turn]]
match = "write"
[[turn.step]]
text = "Writing."
tool = { name = "Write", input = { file_path = "a.txt", content = "hi" } }
[[turn.step]]
text = "Wrote a.txt."

[[turn]]
[[turn.step]]
text = "first"

[[turn]]
[[turn.step]]
text = "second"
chunk_chars = 2
"#;

    #[test]
    fn match_wins_then_steps_follow_tool_results() {
        let s = Script::parse(SCRIPT, Path::new("s.toml")).unwrap();
        let first = s.step_for(&pos("please write it", 3, 0));
        assert_eq!(first.tool.as_ref().unwrap().name, "Write");
        assert_eq!(
            s.step_for(&pos("please write it", 3, 1)).text,
            "Wrote a.txt."
        );
        assert_eq!(s.step_for(&pos("please write it", 3, 2)).text, "Done.");
    }

    #[test]
    fn unmatched_turns_go_in_prompt_order() {
        let s = Script::parse(SCRIPT, Path::new("s.toml")).unwrap();
        assert_eq!(s.step_for(&pos("hi", 1, 0)).text, "first");
        assert_eq!(s.step_for(&pos("hi", 2, 0)).text, "second");
        assert_eq!(s.step_for(&pos("hi", 3, 0)).text, FALLBACK_REPLY);
    }

    #[test]
    fn chunks_split_on_characters_not_bytes() {
        let mut st = Step::text("é✓ab");
        st.chunk_chars = Some(2);
        assert_eq!(st.chunks(), vec!["é✓", "ab"]);
    }

    #[test]
    fn a_turn_for_one_agent_answers_only_that_agents_api() {
        let s = Script::parse(
            "[[turn]]\nmatch = \"go\"\nagent = \"codex\"\n[[turn.step]]\ntext = \"codex\"\n\n[[turn]]\nmatch = \"go\"\nagent = \"claude\"\n[[turn.step]]\ntext = \"claude\"\n",
            Path::new("s.toml"),
        )
        .unwrap();
        assert_eq!(s.step_for_agent(&pos("go", 1, 0), "claude").text, "claude");
        assert_eq!(s.step_for_agent(&pos("go", 1, 0), "codex").text, "codex");
        assert_eq!(s.step_for(&pos("go", 1, 0)).text, "codex");
    }

    #[test]
    fn unknown_field_is_a_parse_error_naming_it() {
        let e = Script::parse("[[turn]]\nbogus = 1\n", Path::new("s.toml")).unwrap_err();
        assert!(e.to_string().contains("bogus"), "{e}");
    }
}
