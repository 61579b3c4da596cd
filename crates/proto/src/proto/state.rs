//! The vocabulary of agent state (docs/agents.md): states, blocked kinds,
//! wait targets, and the observation the classifier produces. Shared by the
//! supervisor, its clients and the classifier (`agent` re-exports it).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The state of the agent in a pane.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Spawned, not yet ready for a prompt.
    Starting,
    /// Ready for a prompt, with no finished turn since the last prompt.
    Idle,
    /// Busy with a turn.
    Working,
    /// Waiting for a human (see [`BlockedKind`]).
    Blocked,
    /// Ready again after a finished turn.
    Done,
    /// The process has exited.
    Exited,
    /// Signals disagree or nothing matches.
    Unknown,
}

impl State {
    /// Every state, in declaration order.
    pub const ALL: [State; 7] = [
        State::Starting,
        State::Idle,
        State::Working,
        State::Blocked,
        State::Done,
        State::Exited,
        State::Unknown,
    ];

    /// The snake_case name used on the CLI and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Starting => "starting",
            State::Idle => "idle",
            State::Working => "working",
            State::Blocked => "blocked",
            State::Done => "done",
            State::Exited => "exited",
            State::Unknown => "unknown",
        }
    }

    /// Parse a comma-separated list (`"idle,done"`), as `--until` takes it.
    /// Duplicates are dropped; an empty list is an error.
    pub fn parse_list(s: &str) -> Result<Vec<State>, ParseStateError> {
        let mut out = Vec::new();
        for part in s.split(',') {
            let st: State = part.parse()?;
            if !out.contains(&st) {
                out.push(st);
            }
        }
        Ok(out)
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for State {
    type Err = ParseStateError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        State::ALL
            .into_iter()
            .find(|st| st.as_str() == t)
            .ok_or_else(|| ParseStateError {
                what: "state",
                value: t.to_string(),
                expected: "starting, idle, working, blocked, done, exited, unknown",
            })
    }
}

/// A comma-separated list of states (`--until idle,done`), parsed by clap
/// through `FromStr`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateList(pub Vec<State>);

impl FromStr for StateList {
    type Err = ParseStateError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        State::parse_list(s).map(StateList)
    }
}

impl fmt::Display for StateList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.0.iter().map(|s| s.as_str()).collect();
        f.write_str(&names.join(","))
    }
}

/// Why a blocked agent waits for a human.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockedKind {
    /// A tool call needs approval.
    Permission,
    /// The agent asked the user a question with options.
    Question,
    /// Login, trust, API-key or model-migration dialog: the environment is wrong.
    Setup,
    /// The account's usage limit was reached.
    UsageLimit,
}

impl BlockedKind {
    /// The snake_case name used in rules files and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            BlockedKind::Permission => "permission",
            BlockedKind::Question => "question",
            BlockedKind::Setup => "setup",
            BlockedKind::UsageLimit => "usage_limit",
        }
    }
}

impl fmt::Display for BlockedKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for BlockedKind {
    type Err = ParseStateError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "permission" => Ok(BlockedKind::Permission),
            "question" => Ok(BlockedKind::Question),
            "setup" => Ok(BlockedKind::Setup),
            "usage_limit" => Ok(BlockedKind::UsageLimit),
            other => Err(ParseStateError {
                what: "blocked kind",
                value: other.to_string(),
                expected: "permission, question, setup, usage_limit",
            }),
        }
    }
}

/// One `wait --until` target: a state, or `blocked:<kind>` (only `blocked`
/// has kinds). The CLI and the supervisor parse targets with this one rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Until {
    /// The state to wait for.
    pub state: State,
    /// With `blocked`, the kind it must be (any kind when absent).
    pub kind: Option<BlockedKind>,
}

/// What a wait target may be, for error messages.
const UNTIL_EXPECTED: &str = "starting, idle, working, blocked, done, exited, unknown, \
     or blocked:KIND with KIND one of permission, question, setup, usage_limit";

impl Until {
    /// Whether an observed state (and its kind) meets this target.
    pub fn matches(&self, state: State, kind: Option<BlockedKind>) -> bool {
        state == self.state && self.kind.is_none_or(|k| kind == Some(k))
    }
}

impl FromStr for Until {
    type Err = ParseStateError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || ParseStateError {
            what: "wait target",
            value: s.to_string(),
            expected: UNTIL_EXPECTED,
        };
        // `blocked:permission`, or `blocked{permission}` as the docs write it.
        let (state, kind) = match s.split_once(':') {
            Some((st, k)) => (st, Some(k)),
            None => match s.strip_suffix('}').and_then(|x| x.split_once('{')) {
                Some((st, k)) => (st, Some(k)),
                None => (s, None),
            },
        };
        // Exact names only: `Idle` or ` idle` is a typo, not a state.
        let state = State::ALL
            .into_iter()
            .find(|x| x.as_str() == state)
            .ok_or_else(bad)?;
        let kind = match kind {
            None => None,
            Some(_) if state != State::Blocked => return Err(bad()),
            Some(k) => Some(
                [
                    BlockedKind::Permission,
                    BlockedKind::Question,
                    BlockedKind::Setup,
                    BlockedKind::UsageLimit,
                ]
                .into_iter()
                .find(|x| x.as_str() == k)
                .ok_or_else(bad)?,
            ),
        };
        Ok(Until { state, kind })
    }
}

impl fmt::Display for Until {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            Some(k) => write!(f, "{}:{}", self.state, k),
            None => f.write_str(self.state.as_str()),
        }
    }
}

/// On the wire a target is its text (`idle`, `blocked:permission`); a bad
/// one is refused with the same message the CLI gives.
impl Serialize for Until {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Until {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// A state that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {value:?} (expected one of: {expected})")]
pub struct ParseStateError {
    /// What was being parsed ("state", "blocked kind", …).
    pub what: &'static str,
    /// The offending value.
    pub value: String,
    /// The accepted values.
    pub expected: &'static str,
}

/// An agent state plus the evidence behind it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    /// The classified state.
    pub state: State,
    /// Set when `state` is [`State::Blocked`].
    pub kind: Option<BlockedKind>,
    /// Set when `state` is [`State::Exited`] and the process exited with a code.
    pub exit_code: Option<i32>,
    /// Rule names and signals that produced the state, e.g. `rule:claude.permission`,
    /// `osc7501:working`, `title:spinner`, `exit:0`.
    pub evidence: Vec<String>,
    /// For `blocked{usage_limit}`: when the limit resets (RFC 3339, UTC), when
    /// the screen gives a time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resets_at: Option<String>,
    /// Which source decided the state: the screen, unless an agent's own
    /// signal did (docs/agents.md, "The agents' own signals").
    #[serde(default)]
    pub source: super::signal::Source,
}

impl Observation {
    /// An observation without kind or exit code.
    pub fn new(state: State, evidence: Vec<String>) -> Self {
        Observation {
            state,
            kind: None,
            exit_code: None,
            evidence,
            resets_at: None,
            source: super::signal::Source::Screen,
        }
    }

    /// `blocked`, `blocked:permission`, `exited{0}` …: the form humans read
    /// (a blocked kind spelled as `wait --until` takes it).
    pub fn label(&self) -> String {
        match (self.state, self.kind, self.exit_code) {
            (State::Blocked, Some(k), _) => format!("blocked:{k}"),
            (State::Exited, _, Some(c)) => format!("exited{{{c}}}"),
            (s, _, _) => s.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Guards two spellings of one state: `pane ls` printed
    /// `blocked{permission}` while `wait --until` took only
    /// `blocked:permission`. Both are taken; `blocked:permission` is printed.
    #[test]
    fn a_blocked_kind_is_taken_in_both_spellings_and_printed_in_one() {
        for s in ["blocked:permission", "blocked{permission}"] {
            assert_eq!(
                s.parse::<Until>().unwrap(),
                Until {
                    state: State::Blocked,
                    kind: Some(BlockedKind::Permission)
                },
                "{s}"
            );
        }
        assert!("blocked{bogus}".parse::<Until>().is_err());
        assert!("idle{permission}".parse::<Until>().is_err());
        assert_eq!(
            "blocked{usage_limit}".parse::<Until>().unwrap().to_string(),
            "blocked:usage_limit"
        );
    }

    /// Guards `wait --until` targets that can never match (`blocked:bogus`,
    /// `idle:permission`, `blocked:Permission`): they waited and timed out.
    #[test]
    fn wait_targets_that_cannot_match_are_refused() {
        assert_eq!(
            "blocked:permission".parse::<Until>().unwrap(),
            Until {
                state: State::Blocked,
                kind: Some(BlockedKind::Permission)
            }
        );
        assert!("idle".parse::<Until>().unwrap().matches(State::Idle, None));
        assert!(
            "blocked"
                .parse::<Until>()
                .unwrap()
                .matches(State::Blocked, Some(BlockedKind::Setup))
        );
        for bad in [
            "blocked:bogus",
            "idle:permission",
            "blocked:Permission",
            "Idle",
            "",
            "blocked:",
        ] {
            let e = bad.parse::<Until>().unwrap_err().to_string();
            assert!(
                e.contains("usage_limit") && e.contains("exited"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn state_list_parses_and_rejects() {
        assert_eq!(
            State::parse_list("idle, done,idle").unwrap(),
            vec![State::Idle, State::Done]
        );
        let e = State::parse_list("idle,sleeping").unwrap_err();
        assert!(e.to_string().contains("sleeping"), "{e}");
        assert!(State::parse_list("").is_err());
        let l: StateList = "blocked,done".parse().unwrap();
        assert_eq!(l.0, vec![State::Blocked, State::Done]);
        assert_eq!(l.to_string(), "blocked,done");
    }

    #[test]
    fn serde_names_match_display() {
        for s in State::ALL {
            let j = serde_json::to_string(&s).unwrap();
            assert_eq!(j, format!("\"{s}\""));
        }
        assert_eq!(
            serde_json::to_string(&BlockedKind::UsageLimit).unwrap(),
            "\"usage_limit\""
        );
    }

    #[test]
    fn label_shows_kind_and_code() {
        let mut o = Observation::new(State::Blocked, vec![]);
        o.kind = Some(BlockedKind::Permission);
        assert_eq!(o.label(), "blocked:permission");
        let mut o = Observation::new(State::Exited, vec![]);
        o.exit_code = Some(3);
        assert_eq!(o.label(), "exited{3}");
    }
}
