//! The shadow policy: decide, purely, whether an attempt is finished (docs/policy.md).
//!
//! A [`Scenario`] is everything drover saw about one attempt — the dispatch record and a
//! timeline of dispatch events, execution anchors, observations, transport events,
//! reports, side-effect checks and the agent's own word that a turn ended. [`decide`] turns it into a [`Decision`]: one of nine
//! verdicts, checked in a fixed order, each with a reason naming what was seen.
//!
//! This module is pure on purpose. It imports nothing else from the crate, never reads a
//! file or a clock (the scenario carries `now_ms`), and has no route to the engine: the
//! shadow runner builds scenarios from the evidence store and records what `decide` says;
//! only auto-completion, elsewhere, may act on a `complete`. `docs/policy.md` explains the
//! order of the checks and why each sits where it does.
//!
//! Scenario files (the input of `drover policy eval` and the fixtures under
//! `tests/fixtures/scenarios/`) are read by [`parse_scenario`], which rejects anything
//! malformed with a [`ScenarioError`] naming the field, so the fixture set stays honest.

mod attribution;
mod decide;
mod decision;
mod parse;
mod scenario;
#[cfg(test)]
mod testkit;

pub use decide::decide;
pub use decision::{Decision, DecisionKind};
pub use parse::{ScenarioError, parse_scenario, scenario_from_value, validate};
pub use scenario::{
    AgentState, DEFAULT_STALENESS_MS, Dispatch, Event, EventBody, ExpectedPolicy, Ids,
    MAX_STALENESS_MS, ReportState, Scenario, TransportResult, TurnFailure, TurnHow, TurnSource,
};
