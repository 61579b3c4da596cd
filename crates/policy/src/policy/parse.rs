//! Reading and validating scenario files. Every error names the field (`now_ms`,
//! `dispatch.attempt_id`, `timeline[3].state`) so a broken fixture is fixed in one look.
//!
//! Unknown fields are refused rather than ignored: a misspelled `sesion_id` would
//! otherwise drop an identifier from attribution and let a scenario pass that should hold.

use super::decision::DecisionKind;
use super::scenario::{
    AgentState, Dispatch, Event, EventBody, ExpectedPolicy, Ids, MAX_STALENESS_MS, ReportState,
    Scenario, TransportResult, TurnFailure, TurnHow, TurnSource,
};
use serde_json::{Map, Value};

/// Why a scenario file was refused. Every variant but `Json` names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScenarioError {
    /// The text is not JSON.
    #[error("not valid JSON: {message}")]
    Json {
        /// serde_json's message, with line and column.
        message: String,
    },
    /// A required field is absent.
    #[error("{field}: missing")]
    Missing {
        /// The field's path.
        field: String,
    },
    /// A field has the wrong JSON type.
    #[error("{field}: expected {expected}, found {found}")]
    WrongType {
        /// The field's path.
        field: String,
        /// What was expected.
        expected: &'static str,
        /// What was found (a JSON type name).
        found: &'static str,
    },
    /// A field that this object may not carry.
    #[error("{field}: unknown field (allowed here: {allowed})")]
    UnknownField {
        /// The field's path.
        field: String,
        /// The fields allowed in that object.
        allowed: String,
    },
    /// A name outside its closed set (an event kind, a state, a result, a decision).
    #[error("{field}: unknown {what} {value:?} (expected one of: {allowed})")]
    UnknownValue {
        /// The field's path.
        field: String,
        /// What the name is (`event kind`, `agent state`, …).
        what: &'static str,
        /// The name found.
        value: String,
        /// The names allowed.
        allowed: String,
    },
    /// The timeline has no `dispatch` event.
    #[error("timeline: no event of kind \"dispatch\"")]
    NoDispatchEvent,
    /// An event lies after the moment of the decision.
    #[error("{field}: {t_ms} is after now_ms {now_ms}")]
    AfterNow {
        /// The field's path (`timeline[i].t_ms`).
        field: String,
        /// The event's time.
        t_ms: u64,
        /// The scenario's `now_ms`.
        now_ms: u64,
    },
    /// A value of the right type that the format still forbids.
    #[error("{field}: {reason}")]
    Invalid {
        /// The field's path.
        field: String,
        /// What is wrong with it.
        reason: String,
    },
}

impl ScenarioError {
    /// The path of the field at fault (`timeline[3].state`), or `""` for a JSON syntax error.
    pub fn field(&self) -> &str {
        match self {
            ScenarioError::Json { .. } => "",
            ScenarioError::NoDispatchEvent => "timeline",
            ScenarioError::Missing { field }
            | ScenarioError::WrongType { field, .. }
            | ScenarioError::UnknownField { field, .. }
            | ScenarioError::UnknownValue { field, .. }
            | ScenarioError::AfterNow { field, .. }
            | ScenarioError::Invalid { field, .. } => field,
        }
    }
}

/// Parse and validate a scenario file's text.
pub fn parse_scenario(text: &str) -> Result<Scenario, ScenarioError> {
    let value: Value = serde_json::from_str(text).map_err(|e| ScenarioError::Json {
        message: e.to_string(),
    })?;
    scenario_from_value(&value)
}

/// Read a scenario from parsed JSON and validate it.
pub fn scenario_from_value(value: &Value) -> Result<Scenario, ScenarioError> {
    let top = Obj::new(value, String::new())?;
    top.allow_only(&[
        "name",
        "note",
        "now_ms",
        "staleness_ms",
        "dispatch",
        "timeline",
        "expected_policy",
    ])?;
    let dispatch = read_dispatch(top.req("dispatch")?, top.path("dispatch"))?;
    let timeline = top.req("timeline")?;
    let items = timeline
        .as_array()
        .ok_or_else(|| ScenarioError::WrongType {
            field: top.path("timeline"),
            expected: "an array",
            found: type_name(timeline),
        })?;
    let timeline = items
        .iter()
        .enumerate()
        .map(|(i, v)| read_event(v, format!("timeline[{i}]")))
        .collect::<Result<Vec<_>, _>>()?;
    let expected_policy = match top.opt("expected_policy") {
        None => None,
        Some(v) => Some(read_expected(v, top.path("expected_policy"))?),
    };
    let scenario = Scenario {
        name: top.req_str("name")?,
        note: top.opt_str("note")?,
        now_ms: top.req_u64("now_ms")?,
        staleness_ms: top.req_u64("staleness_ms")?,
        dispatch,
        timeline,
        expected_policy,
    };
    validate(&scenario)?;
    Ok(scenario)
}

/// Check what types alone cannot: a named scenario with a usable dispatch record, a
/// staleness window in range, a dispatch event on the timeline, times that never go
/// backwards and never pass `now_ms`.
pub fn validate(s: &Scenario) -> Result<(), ScenarioError> {
    let nonempty = |field: &str, value: &str| {
        if value.trim().is_empty() {
            Err(ScenarioError::Invalid {
                field: field.to_string(),
                reason: "must not be empty".to_string(),
            })
        } else {
            Ok(())
        }
    };
    nonempty("name", &s.name)?;
    nonempty("dispatch.job_id", &s.dispatch.job_id)?;
    nonempty("dispatch.attempt_id", &s.dispatch.attempt_id)?;
    nonempty("dispatch.session_id", &s.dispatch.session_id)?;
    if s.staleness_ms == 0 || s.staleness_ms > MAX_STALENESS_MS {
        return Err(ScenarioError::Invalid {
            field: "staleness_ms".to_string(),
            reason: format!(
                "{} is out of range (1..={MAX_STALENESS_MS})",
                s.staleness_ms
            ),
        });
    }
    // Events need not be in time order: several writers append to one
    // evidence file; the policy reads "newest" as the greatest t_ms.
    for (i, e) in s.timeline.iter().enumerate() {
        let field = format!("timeline[{i}].t_ms");
        if e.t_ms > s.now_ms {
            return Err(ScenarioError::AfterNow {
                field,
                t_ms: e.t_ms,
                now_ms: s.now_ms,
            });
        }
    }
    if !s.timeline.iter().any(|e| e.body == EventBody::Dispatch) {
        return Err(ScenarioError::NoDispatchEvent);
    }
    Ok(())
}

const ID_FIELDS: [&str; 4] = [
    "attempt_id",
    "session_id",
    "pane_generation",
    "manifest_attempt_id",
];

fn read_dispatch(v: &Value, path: String) -> Result<Dispatch, ScenarioError> {
    let o = Obj::new(v, path)?;
    o.allow_only(&["job_id", "attempt_id", "session_id", "pane_generation"])?;
    Ok(Dispatch {
        job_id: o.req_str("job_id")?,
        attempt_id: o.req_str("attempt_id")?,
        session_id: o.req_str("session_id")?,
        pane_generation: o.req_u64("pane_generation")?,
    })
}

fn read_expected(v: &Value, path: String) -> Result<ExpectedPolicy, ScenarioError> {
    let o = Obj::new(v, path)?;
    o.allow_only(&["decision", "reason_contains"])?;
    let name = o.req_str("decision")?;
    let decision = DecisionKind::from_name(&name).ok_or_else(|| ScenarioError::UnknownValue {
        field: o.path("decision"),
        what: "decision",
        value: name,
        allowed: names(DecisionKind::ORDER.iter().map(|d| d.name())),
    })?;
    Ok(ExpectedPolicy {
        decision,
        reason_contains: o.opt_str("reason_contains")?,
    })
}

fn read_event(v: &Value, path: String) -> Result<Event, ScenarioError> {
    let o = Obj::new(v, path)?;
    let kind = o.req_str("kind")?;
    let (body, extra): (EventBody, &[&str]) = match kind.as_str() {
        "dispatch" => (EventBody::Dispatch, &[]),
        "execution_anchor" => (EventBody::ExecutionAnchor, &[]),
        "observation" => {
            let state = o.req_enum("state", "agent state", &AgentState::ALL, |s| s.name())?;
            let state_kind = o.opt_str("state_kind")?;
            (
                EventBody::Observation { state, state_kind },
                &["state_kind"],
            )
        }
        "transport" => {
            let result = o.req_enum("result", "transport result", &TransportResult::ALL, |r| {
                r.name()
            })?;
            (EventBody::Transport { result }, &["result"])
        }
        "report" => {
            let state = o.req_enum("state", "report state", &ReportState::ALL, |s| s.name())?;
            (EventBody::Report { state }, &["state"])
        }
        "side_effect" => (
            EventBody::SideEffect {
                proven: o.req_bool("proven")?,
            },
            &["proven"],
        ),
        "turn_end" => (
            read_turn_end(&o)?,
            &["how", "source", "error", "message_sha256"],
        ),
        other => {
            return Err(ScenarioError::UnknownValue {
                field: o.path("kind"),
                what: "event kind",
                value: other.to_string(),
                allowed: "dispatch, execution_anchor, observation, transport, report, \
                          side_effect, turn_end"
                    .to_string(),
            });
        }
    };
    let mut allowed: Vec<&str> = vec!["t_ms", "kind", "note"];
    allowed.extend(ID_FIELDS);
    allowed.extend(extra);
    if matches!(body, EventBody::Observation { .. }) {
        allowed.push("state");
    }
    o.allow_only(&allowed)?;
    Ok(Event {
        t_ms: o.req_u64("t_ms")?,
        ids: Ids {
            attempt_id: o.opt_str("attempt_id")?,
            session_id: o.opt_str("session_id")?,
            pane_generation: o.opt_u64("pane_generation")?,
            manifest_attempt_id: o.opt_str("manifest_attempt_id")?,
        },
        body,
        note: o.opt_str("note")?,
    })
}

/// A `turn_end` event's body: an `error` only on a failed turn, a message
/// hash only as a sha256 (64 lowercase hex digits: never a body).
fn read_turn_end(o: &Obj) -> Result<EventBody, ScenarioError> {
    let how = o.req_enum("how", "turn end", &TurnHow::ALL, |h| h.name())?;
    let source = o.req_enum("source", "turn end source", &TurnSource::ALL, |s| s.name())?;
    let error = match o.opt("error") {
        None => None,
        Some(_) => Some(o.req_enum("error", "turn failure", &TurnFailure::ALL, |f| f.name())?),
    };
    if error.is_some() && how != TurnHow::Failed {
        return Err(ScenarioError::Invalid {
            field: o.path("error"),
            reason: format!(
                "only a failed turn has an error (this one is {})",
                how.name()
            ),
        });
    }
    let message_sha256 = o.opt_str("message_sha256")?;
    if let Some(h) = &message_sha256
        && !(h.len() == 64
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
    {
        return Err(ScenarioError::Invalid {
            field: o.path("message_sha256"),
            reason: "must be a sha256 in 64 lowercase hex digits".to_string(),
        });
    }
    Ok(EventBody::TurnEnd {
        how,
        source,
        error,
        message_sha256,
    })
}

/// A JSON object being read, with the path that names its fields in errors.
struct Obj<'a> {
    map: &'a Map<String, Value>,
    path: String,
}

impl<'a> Obj<'a> {
    fn new(v: &'a Value, path: String) -> Result<Self, ScenarioError> {
        match v.as_object() {
            Some(map) => Ok(Obj { map, path }),
            None => Err(ScenarioError::WrongType {
                field: if path.is_empty() {
                    "(top level)".to_string()
                } else {
                    path
                },
                expected: "an object",
                found: type_name(v),
            }),
        }
    }

    fn path(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    fn allow_only(&self, allowed: &[&str]) -> Result<(), ScenarioError> {
        match self.map.keys().find(|k| !allowed.contains(&k.as_str())) {
            Some(k) => Err(ScenarioError::UnknownField {
                field: self.path(k),
                allowed: allowed.join(", "),
            }),
            None => Ok(()),
        }
    }

    /// A present, non-null value.
    fn opt(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    fn req(&self, key: &str) -> Result<&'a Value, ScenarioError> {
        self.map.get(key).ok_or_else(|| ScenarioError::Missing {
            field: self.path(key),
        })
    }

    fn wrong(&self, key: &str, expected: &'static str, v: &Value) -> ScenarioError {
        ScenarioError::WrongType {
            field: self.path(key),
            expected,
            found: type_name(v),
        }
    }

    fn req_str(&self, key: &str) -> Result<String, ScenarioError> {
        let v = self.req(key)?;
        v.as_str()
            .map(str::to_string)
            .ok_or_else(|| self.wrong(key, "a string", v))
    }

    fn opt_str(&self, key: &str) -> Result<Option<String>, ScenarioError> {
        match self.opt(key) {
            None => Ok(None),
            Some(v) => v
                .as_str()
                .map(|s| Some(s.to_string()))
                .ok_or_else(|| self.wrong(key, "a string", v)),
        }
    }

    fn req_u64(&self, key: &str) -> Result<u64, ScenarioError> {
        let v = self.req(key)?;
        v.as_u64()
            .ok_or_else(|| self.wrong(key, "a non-negative integer", v))
    }

    fn opt_u64(&self, key: &str) -> Result<Option<u64>, ScenarioError> {
        match self.opt(key) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| self.wrong(key, "a non-negative integer", v)),
        }
    }

    fn req_bool(&self, key: &str) -> Result<bool, ScenarioError> {
        let v = self.req(key)?;
        v.as_bool()
            .ok_or_else(|| self.wrong(key, "true or false", v))
    }

    fn req_enum<T: Copy>(
        &self,
        key: &str,
        what: &'static str,
        all: &[T],
        name: impl Fn(T) -> &'static str,
    ) -> Result<T, ScenarioError> {
        let found = self.req_str(key)?;
        all.iter()
            .copied()
            .find(|&t| name(t) == found)
            .ok_or_else(|| ScenarioError::UnknownValue {
                field: self.path(key),
                what,
                value: found,
                allowed: names(all.iter().map(|&t| name(t))),
            })
    }
}

fn names<'a>(it: impl Iterator<Item = &'a str>) -> String {
    it.collect::<Vec<_>>().join(", ")
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::testkit::clean;
    use serde_json::json;

    fn clean_json() -> Value {
        serde_json::to_value(clean()).unwrap_or_default()
    }

    /// The field named by the error `mutate` provokes.
    fn field_of(mutate: impl FnOnce(&mut Value)) -> String {
        let mut v = clean_json();
        mutate(&mut v);
        match scenario_from_value(&v) {
            Ok(_) => "(accepted)".to_string(),
            Err(e) => e.field().to_string(),
        }
    }

    #[test]
    fn serialized_scenario_round_trips() {
        let s = clean();
        assert_eq!(scenario_from_value(&clean_json()), Ok(s.clone()));
        let text = serde_json::to_string(&s).unwrap_or_default();
        assert_eq!(parse_scenario(&text), Ok(s));
    }

    #[test]
    fn turn_ends_round_trip_and_are_checked() {
        let turn = |v: &mut Value, e: Value| {
            if let Some(t) = v["timeline"].as_array_mut() {
                t.push(e);
            }
        };
        let sha = "0f".repeat(32);
        let mut v = clean_json();
        turn(
            &mut v,
            json!({"t_ms": 57000, "kind": "turn_end", "how": "ended", "source": "hook",
                   "message_sha256": sha, "pane_generation": 1}),
        );
        let s = scenario_from_value(&v).expect("a turn end reads");
        let text = serde_json::to_string(&s).unwrap_or_default();
        assert_eq!(parse_scenario(&text), Ok(s));
        let end = json!({"t_ms": 57000, "kind": "turn_end", "how": "failed", "source": "hook"});
        let with = |k: &str, x: Value| {
            let mut e = end.clone();
            e[k] = x;
            e
        };
        for (e, field) in [
            (with("how", json!("stopped")), "timeline[7].how"),
            (with("source", json!("screen")), "timeline[7].source"),
            (with("error", json!("quota")), "timeline[7].error"),
            (
                with("message_sha256", json!("the reply's text")),
                "timeline[7].message_sha256",
            ),
            (with("body", json!("x")), "timeline[7].body"),
        ] {
            assert_eq!(field_of(|v| turn(v, e.clone())), field, "{e}");
        }
        // An error belongs to a failed turn only.
        let ended_with_error = json!({"t_ms": 57000, "kind": "turn_end", "how": "ended",
                                      "source": "notify", "error": "rate_limit"});
        assert_eq!(
            field_of(|v| turn(v, ended_with_error.clone())),
            "timeline[7].error"
        );
    }

    #[test]
    fn unknown_event_kind_names_the_event() {
        assert_eq!(
            field_of(|v| v["timeline"][3]["kind"] = json!("heartbeat")),
            "timeline[3].kind"
        );
    }

    #[test]
    fn unknown_states_and_results_name_the_field() {
        assert_eq!(
            field_of(|v| v["timeline"][2]["state"] = json!("finished")),
            "timeline[2].state"
        );
        assert_eq!(
            field_of(|v| v["timeline"][3]["result"] = json!("lost")),
            "timeline[3].result"
        );
        assert_eq!(
            field_of(|v| v["timeline"][4]["state"] = json!("done")),
            "timeline[4].state"
        );
        assert_eq!(
            field_of(|v| v["expected_policy"] = json!({"decision": "finish"})),
            "expected_policy.decision"
        );
    }

    #[test]
    fn missing_dispatch_is_refused() {
        assert_eq!(
            field_of(|v| drop(v.as_object_mut().map(|o| o.remove("dispatch")))),
            "dispatch"
        );
        assert_eq!(
            field_of(|v| drop(
                v["dispatch"]
                    .as_object_mut()
                    .map(|o| o.remove("attempt_id"))
            )),
            "dispatch.attempt_id"
        );
        assert_eq!(
            field_of(|v| v["dispatch"]["session_id"] = json!("")),
            "dispatch.session_id"
        );
    }

    #[test]
    fn timeline_without_a_dispatch_event_is_refused() {
        let mut v = clean_json();
        if let Some(a) = v["timeline"].as_array_mut() {
            a.remove(0);
        }
        assert_eq!(scenario_from_value(&v), Err(ScenarioError::NoDispatchEvent));
    }

    /// Guards scenarios out of time order (several writers append to one
    /// evidence file): they were refused; "newest" is the greatest t_ms.
    #[test]
    fn time_going_backwards_is_valid() {
        assert_eq!(
            field_of(|v| v["timeline"][3]["t_ms"] = json!(2_500)),
            "(accepted)"
        );
        // Equal times too: file order breaks the tie.
        assert_eq!(
            field_of(|v| v["timeline"][3]["t_ms"] = json!(3_000)),
            "(accepted)"
        );
    }

    #[test]
    fn events_after_now_are_refused() {
        assert_eq!(
            field_of(|v| v["now_ms"] = json!(50_000)),
            "timeline[5].t_ms"
        );
    }

    #[test]
    fn unknown_fields_are_refused_not_ignored() {
        assert_eq!(
            field_of(|v| v["timeline"][4]["sesion_id"] = json!("x")),
            "timeline[4].sesion_id"
        );
        assert_eq!(
            field_of(|v| v["timeline"][3]["proven"] = json!(true)),
            "timeline[3].proven"
        );
        assert_eq!(field_of(|v| v["extra"] = json!(1)), "extra");
    }

    #[test]
    fn wrong_types_name_the_field() {
        assert_eq!(field_of(|v| v["now_ms"] = json!("60000")), "now_ms");
        assert_eq!(
            field_of(|v| v["timeline"][1]["pane_generation"] = json!(-1)),
            "timeline[1].pane_generation"
        );
        assert_eq!(
            field_of(|v| v["timeline"][6]["proven"] = json!("yes")),
            "timeline[6].proven"
        );
        assert_eq!(field_of(|v| v["timeline"] = json!({})), "timeline");
        assert_eq!(field_of(|v| v["timeline"][0] = json!(7)), "timeline[0]");
    }

    #[test]
    fn null_identifiers_count_as_absent() {
        assert_eq!(
            field_of(|v| v["timeline"][2]["session_id"] = Value::Null),
            "(accepted)"
        );
    }

    #[test]
    fn staleness_window_must_be_in_range() {
        assert_eq!(field_of(|v| v["staleness_ms"] = json!(0)), "staleness_ms");
        assert_eq!(
            field_of(|v| v["staleness_ms"] = json!(MAX_STALENESS_MS + 1)),
            "staleness_ms"
        );
    }

    #[test]
    fn syntax_errors_say_where() {
        let e = parse_scenario("{\"name\": ").err();
        assert!(e.is_some_and(|e| e.to_string().contains("line 1")));
    }
}
