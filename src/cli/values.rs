//! Value parsers that know every value a flag takes, so `--help`, the error
//! for a typo and the shell completions all name them. Most hand the flag's
//! text on unchanged: the commands parse it as they always have.

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::error::{ContextKind, ContextValue};
use drover::agent::Until;
use drover::pane::Backend;

/// `--backend`: where a pane lives, as the typed [`Backend`]; a typo is
/// refused by the listed values, so the parse after them cannot fail.
pub fn backend() -> impl TypedValueParser<Value = Backend> {
    PossibleValuesParser::new(["native", "tmux", "herdr"]).try_map(|s| s.parse::<Backend>())
}

/// `pane new --agent`: how the screen is read.
pub fn pane_agent() -> PossibleValuesParser {
    PossibleValuesParser::new(["shell", "claude", "codex", "sim"])
}

/// One `wait --until` target: a state, or `blocked:KIND`. The docs' spelling
/// `blocked{permission}` is accepted too but not offered.
#[derive(Clone, Copy, Debug)]
pub struct UntilParser;

/// Every target offered; a test checks it against the states and kinds.
const UNTIL_TARGETS: &[&str] = &[
    "starting",
    "idle",
    "working",
    "blocked",
    "done",
    "exited",
    "unknown",
    "blocked:permission",
    "blocked:question",
    "blocked:setup",
    "blocked:usage_limit",
];

impl TypedValueParser for UntilParser {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        let s = clap::builder::StringValueParser::new().parse_ref(cmd, arg, value)?;
        match s.parse::<Until>() {
            Ok(_) => Ok(s),
            Err(_) => {
                let mut err = clap::Error::new(clap::error::ErrorKind::InvalidValue).with_cmd(cmd);
                let name = arg.map_or_else(|| "--until".into(), |a| a.to_string());
                err.insert(ContextKind::InvalidArg, ContextValue::String(name));
                err.insert(ContextKind::InvalidValue, ContextValue::String(s));
                err.insert(
                    ContextKind::ValidValue,
                    ContextValue::Strings(UNTIL_TARGETS.iter().map(|t| t.to_string()).collect()),
                );
                Err(err)
            }
        }
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(
            UNTIL_TARGETS.iter().map(|t| PossibleValue::new(*t)),
        ))
    }
}

/// A value a flag does not take is a usage error of one line, as every other
/// usage error is: the value, the flag, what it takes. Every other parse
/// error (and `--help`, `--version`) is clap's own.
pub fn report_parse_error(e: clap::Error) -> std::process::ExitCode {
    use clap::error::ErrorKind;
    if e.kind() == ErrorKind::InvalidSubcommand
        && e.get(ContextKind::SuggestedSubcommand).is_none()
        && let Some(ContextValue::String(bad)) = e.get(ContextKind::InvalidSubcommand)
        && let Some((parent, meant)) = near_subcommand(std::env::args().skip(1), bad)
    {
        // clap's own suggestion misses short words (`loop rn`).
        eprintln!(
            "drover: unrecognized subcommand {bad:?} for `{parent}` (did you mean `{parent} {meant}`?)"
        );
        return std::process::ExitCode::from(drover::exit::USAGE);
    }
    if e.kind() != ErrorKind::InvalidValue {
        e.exit();
    }
    let get = |k| match e.get(k) {
        Some(ContextValue::String(s)) => Some(s.clone()),
        _ => None,
    };
    let (Some(arg), Some(value)) = (get(ContextKind::InvalidArg), get(ContextKind::InvalidValue))
    else {
        e.exit();
    };
    // `--until <STATE,…>` → `--until`
    let flag = arg.split(' ').next().unwrap_or(&arg);
    let mut line = format!("drover: invalid value {value:?} for {flag}");
    if let Some(ContextValue::Strings(valid)) = e.get(ContextKind::ValidValue) {
        line.push_str(&format!(": one of {}", valid.join(", ")));
    }
    if let Some(ContextValue::String(tip)) = e.get(ContextKind::SuggestedValue) {
        line.push_str(&format!(" (did you mean {tip}?)"));
    }
    eprintln!("{line}");
    std::process::ExitCode::from(drover::exit::USAGE)
}

/// For a mistyped subcommand `bad` in `args`: the command it was given to
/// (`drover loop`) and the subcommand one edit away from it (`run`).
fn near_subcommand(args: impl Iterator<Item = String>, bad: &str) -> Option<(String, String)> {
    let top = <super::Cli as clap::CommandFactory>::command();
    let mut at = &top;
    let mut path = vec!["drover".to_string()];
    for a in args {
        if a == bad {
            break;
        }
        if let Some(sub) = at.find_subcommand(&a) {
            path.push(sub.get_name().to_string());
            at = sub;
        }
    }
    let names: Vec<&str> = at
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .map(|s| s.get_name())
        .collect();
    let meant = names
        .iter()
        .find(|n| strsim::levenshtein(bad, n) <= 1)
        .copied()
        .or_else(|| super::fmt::did_you_mean(bad, &names))?;
    Some((path.join(" "), meant.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover::agent::{BlockedKind, State};

    /// The offered list is every state and every `blocked:KIND`, no more.
    #[test]
    fn the_offered_until_targets_are_every_state_and_blocked_kind() {
        let kinds = [
            BlockedKind::Permission,
            BlockedKind::Question,
            BlockedKind::Setup,
            BlockedKind::UsageLimit,
        ];
        let want: Vec<String> = State::ALL
            .into_iter()
            .map(|s| s.as_str().to_string())
            .chain(kinds.into_iter().map(|k| format!("blocked:{}", k.as_str())))
            .collect();
        assert_eq!(UNTIL_TARGETS, want);
        for t in UNTIL_TARGETS {
            assert!(t.parse::<Until>().is_ok(), "{t}");
        }
    }
}
