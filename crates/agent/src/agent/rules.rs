//! Screen rules as data: the embedded `rules.toml`, an optional override in the
//! state dir, and their compiled form.

use super::AgentError;
use super::state::{AgentKind, BlockedKind, State};
use super::wrap;
use crate::statedir::StateDir;
use regex::Regex;
use serde::Deserialize;
use std::borrow::Cow;

/// The rules shipped in the binary.
pub const BUILTIN_RULES: &str = include_str!("rules.toml");
/// Default height of the `bottom` region and of the anchor search, in non-blank rows.
pub const BOTTOM_ROWS: usize = 12;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    rule: Vec<RawRule>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    name: String,
    agents: Vec<AgentKind>,
    state: State,
    kind: Option<BlockedKind>,
    when: Vec<RawCond>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCond {
    region: RegionName,
    regex: String,
    rows: Option<usize>,
    anchor: Option<String>,
    anchor_rows: Option<usize>,
    skip: Option<String>,
    #[serde(default)]
    absent: bool,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum RegionName {
    Bottom,
    Last,
    Above,
    Below,
    Screen,
}

/// Where on the screen a condition looks.
#[derive(Debug, Clone)]
pub enum Region {
    /// The last `rows` non-blank rows.
    Bottom { rows: usize },
    /// The `rows` non-blank, non-rule rows just above the anchor row (the last
    /// row matching `anchor` within the bottom `anchor_rows` non-blank rows).
    Above {
        anchor: Regex,
        anchor_rows: usize,
        rows: usize,
        /// Rows that are skipped like rules (right-aligned hint rows).
        skip: Option<Regex>,
    },
    /// The `rows` non-blank, non-rule rows just below the anchor row.
    Below {
        anchor: Regex,
        anchor_rows: usize,
        rows: usize,
    },
    /// Every row.
    Screen,
}

/// One condition of a rule.
#[derive(Debug, Clone)]
pub struct Cond {
    /// Where to look.
    pub region: Region,
    /// What a row must match.
    pub regex: Regex,
    /// True when no row of the region may match.
    pub absent: bool,
}

/// A compiled, named rule.
#[derive(Debug, Clone)]
pub struct Rule {
    /// Shown in evidence as `rule:<name>`.
    pub name: String,
    /// The agent kinds the rule applies to.
    pub agents: Vec<AgentKind>,
    /// The state the rule gives.
    pub state: State,
    /// The blocked kind, for `blocked` rules.
    pub kind: Option<BlockedKind>,
    /// All must hold.
    pub when: Vec<Cond>,
}

/// Compile a rules document; `origin` names it in errors.
pub fn compile(text: &str, origin: &str) -> Result<Vec<Rule>, AgentError> {
    let bad = |message: String| AgentError::Rules {
        origin: origin.to_string(),
        message,
    };
    let raw: RawFile = toml::from_str(text).map_err(|e| bad(e.to_string().trim().to_string()))?;
    if raw.rule.is_empty() {
        return Err(bad("no [[rule]] entries".to_string()));
    }
    let mut out = Vec::with_capacity(raw.rule.len());
    for (i, r) in raw.rule.into_iter().enumerate() {
        let at = format!("rule #{} ({:?})", i + 1, r.name);
        if r.name.trim().is_empty() {
            return Err(bad(format!("{at}: empty name")));
        }
        if out.iter().any(|o: &Rule| o.name == r.name) {
            return Err(bad(format!("{at}: duplicate name")));
        }
        if r.agents.is_empty() {
            return Err(bad(format!("{at}: `agents` is empty")));
        }
        if r.when.is_empty() {
            return Err(bad(format!("{at}: `when` is empty")));
        }
        match (r.state, r.kind) {
            (State::Blocked, None) => {
                return Err(bad(format!("{at}: a blocked rule needs `kind`")));
            }
            (s, Some(_)) if s != State::Blocked => {
                return Err(bad(format!("{at}: `kind` is only for state = \"blocked\"")));
            }
            (State::Exited | State::Unknown | State::Starting, _) => {
                return Err(bad(format!(
                    "{at}: state {} comes from process signals, not from a screen rule",
                    r.state
                )));
            }
            _ => {}
        }
        let mut when = Vec::with_capacity(r.when.len());
        for (j, c) in r.when.into_iter().enumerate() {
            let cat = format!("{at} condition #{}", j + 1);
            let regex = Regex::new(&c.regex).map_err(|e| bad(format!("{cat}: bad regex: {e}")))?;
            let region = match c.region {
                RegionName::Bottom | RegionName::Last => {
                    let default = if c.region == RegionName::Last {
                        1
                    } else {
                        BOTTOM_ROWS
                    };
                    if c.anchor.is_some() || c.skip.is_some() {
                        return Err(bad(format!(
                            "{cat}: `anchor` and `skip` are only for region = \"above\" or \"below\""
                        )));
                    }
                    Region::Bottom {
                        rows: c.rows.unwrap_or(default).max(1),
                    }
                }
                RegionName::Above | RegionName::Below => {
                    let Some(a) = c.anchor else {
                        return Err(bad(format!(
                            "{cat}: region \"above\"/\"below\" needs `anchor`"
                        )));
                    };
                    let anchor =
                        Regex::new(&a).map_err(|e| bad(format!("{cat}: bad anchor regex: {e}")))?;
                    let anchor_rows = c.anchor_rows.unwrap_or(BOTTOM_ROWS).max(1);
                    let rows = c.rows.unwrap_or(1).max(1);
                    if c.region == RegionName::Below {
                        if c.skip.is_some() {
                            return Err(bad(format!(
                                "{cat}: `skip` is only for region = \"above\""
                            )));
                        }
                        Region::Below {
                            anchor,
                            anchor_rows,
                            rows,
                        }
                    } else {
                        let skip = match c.skip {
                            Some(s) => Some(
                                Regex::new(&s)
                                    .map_err(|e| bad(format!("{cat}: bad skip regex: {e}")))?,
                            ),
                            None => None,
                        };
                        Region::Above {
                            anchor,
                            anchor_rows,
                            rows,
                            skip,
                        }
                    }
                }
                RegionName::Screen => Region::Screen,
            };
            when.push(Cond {
                region,
                regex,
                absent: c.absent,
            });
        }
        out.push(Rule {
            name: r.name,
            agents: r.agents,
            state: r.state,
            kind: r.kind,
            when,
        });
    }
    Ok(out)
}

/// Load `<state_dir>/rules.toml` when it exists, else the embedded rules.
pub fn load(state_dir: &StateDir) -> Result<Vec<Rule>, AgentError> {
    let path = state_dir.rules_file();
    match std::fs::read_to_string(&path) {
        Ok(text) => compile(&text, &path.display().to_string()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => compile(BUILTIN_RULES, "builtin"),
        Err(e) => Err(AgentError::Io { path, source: e }),
    }
}

/// The lines of a screen: its rows, trailing spaces trimmed (whatever the
/// caller did), with the rows an agent word-wrapped joined again
/// ([`super::wrap`]); and the indices of its non-blank lines.
pub struct ScreenView<'a> {
    rows: Vec<Cow<'a, str>>,
    nonblank: Vec<usize>,
}

fn is_blank(row: &str) -> bool {
    row.chars().all(char::is_whitespace)
}

impl<'a> ScreenView<'a> {
    /// Index the non-blank lines of an agent's screen `cols` wide (0: unknown, the
    /// rows are its lines).
    pub fn new(rows: &'a [String], cols: usize) -> Self {
        let rows: Vec<&'a str> = rows.iter().map(|r| r.trim_end_matches(' ')).collect();
        Self::index(wrap::logical_lines(&rows, cols))
    }

    /// Index the rows as they are: a shell's lines are its rows (the
    /// terminal wraps them, not the program, and a prompt is a row).
    pub fn rows(rows: &'a [String]) -> Self {
        Self::index(
            rows.iter()
                .map(|r| Cow::Borrowed(r.trim_end_matches(' ')))
                .collect(),
        )
    }

    fn index(rows: Vec<Cow<'a, str>>) -> Self {
        let nonblank = rows
            .iter()
            .enumerate()
            .filter(|(_, r)| !is_blank(r))
            .map(|(i, _)| i)
            .collect();
        ScreenView { rows, nonblank }
    }

    /// True when the screen shows nothing at all.
    pub fn is_empty(&self) -> bool {
        self.nonblank.is_empty()
    }

    fn bottom(&self, n: usize) -> impl Iterator<Item = &str> + '_ {
        self.nonblank.iter().rev().take(n).map(|&i| &*self.rows[i])
    }

    /// Index into `nonblank` of the last row matching `anchor` among the bottom `anchor_rows`.
    fn anchor_at(&self, anchor: &Regex, anchor_rows: usize) -> Option<usize> {
        let pos = self
            .nonblank
            .iter()
            .rev()
            .take(anchor_rows)
            .position(|&i| anchor.is_match(&self.rows[i]))?;
        Some(self.nonblank.len() - 1 - pos)
    }

    fn above(
        &self,
        anchor: &Regex,
        anchor_rows: usize,
        n: usize,
        skip: Option<&Regex>,
    ) -> Option<Vec<&str>> {
        let k = self.anchor_at(anchor, anchor_rows)?;
        Some(
            self.nonblank[..k]
                .iter()
                .rev()
                .map(|&i| &*self.rows[i])
                .filter(|r| !wrap::is_rule(r) && !skip.is_some_and(|s| s.is_match(r)))
                .take(n)
                .collect(),
        )
    }

    fn below(&self, anchor: &Regex, anchor_rows: usize, n: usize) -> Option<Vec<&str>> {
        let k = self.anchor_at(anchor, anchor_rows)?;
        Some(
            self.nonblank[k + 1..]
                .iter()
                .map(|&i| &*self.rows[i])
                .filter(|r| !wrap::is_rule(r))
                .take(n)
                .collect(),
        )
    }

    /// The bottom `n` non-blank lines, top to bottom.
    pub fn bottom_rows(&self, n: usize) -> Vec<&str> {
        let mut v: Vec<&str> = self.bottom(n).collect();
        v.reverse();
        v
    }

    /// Does the condition hold on this screen?
    pub fn holds(&self, c: &Cond) -> bool {
        let any = match &c.region {
            Region::Bottom { rows } => self.bottom(*rows).any(|r| c.regex.is_match(r)),
            Region::Screen => self.rows.iter().any(|r| c.regex.is_match(r)),
            Region::Above {
                anchor,
                anchor_rows,
                rows,
                skip,
            } => match self.above(anchor, *anchor_rows, *rows, skip.as_ref()) {
                // Without its anchor a condition fails, negated or not.
                None => return false,
                Some(v) => v.iter().any(|r| c.regex.is_match(r)),
            },
            Region::Below {
                anchor,
                anchor_rows,
                rows,
            } => match self.below(anchor, *anchor_rows, *rows) {
                None => return false,
                Some(v) => v.iter().any(|r| c.regex.is_match(r)),
            },
        };
        any != c.absent
    }

    /// The first rule for `kind` whose conditions all hold.
    pub fn first_match<'r>(&self, rules: &'r [Rule], kind: AgentKind) -> Option<&'r Rule> {
        rules
            .iter()
            .filter(|r| r.agents.contains(&kind))
            .find(|r| r.when.iter().all(|c| self.holds(c)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_rules_compile() {
        let rules = compile(BUILTIN_RULES, "builtin").unwrap();
        assert!(rules.len() > 10);
    }

    #[test]
    fn bad_documents_are_named() {
        let e = compile("[[rule]]\nname='x'\n", "f.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("f.toml"), "{e}");
        let e = compile(
            "[[rule]]\nname='x'\nagents=['claude']\nstate='idle'\nwhen=[{region='bottom',regex='('}]\n",
            "f.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("bad regex") && e.contains("\"x\""), "{e}");
        let e = compile(
            "[[rule]]\nname='x'\nagents=['claude']\nstate='blocked'\nwhen=[{region='bottom',regex='a'}]\n",
            "f.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("needs `kind`"), "{e}");
    }

    #[test]
    fn above_skips_rules_and_needs_anchor() {
        let rows: Vec<String> = [
            "✻ Worked for 1s",
            "",
            "──────────",
            "❯\u{a0}",
            "──────────",
            "  ? for shortcuts",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let v = ScreenView::new(&rows, 0);
        let c = Cond {
            region: Region::Above {
                anchor: Regex::new("^❯").unwrap(),
                anchor_rows: 12,
                rows: 1,
                skip: None,
            },
            regex: Regex::new("Worked").unwrap(),
            absent: false,
        };
        assert!(v.holds(&c));
        let c2 = Cond {
            region: Region::Above {
                anchor: Regex::new("^›").unwrap(),
                anchor_rows: 12,
                rows: 1,
                skip: None,
            },
            regex: Regex::new(".").unwrap(),
            absent: true,
        };
        assert!(
            !v.holds(&c2),
            "a missing anchor fails even a negated condition"
        );
    }
}
