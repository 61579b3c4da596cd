use super::*;
use serde_json::json;

const M: &str = "attempt=a1b2";

fn lines(v: &[Value]) -> String {
    v.iter().map(|x| format!("{x}\n")).collect()
}

/// A Claude Code transcript in the shape 2.1.x writes: the prompt (quoting
/// the verdict words, as the brief does), a Read whose result holds a
/// verdict line, then the final reply.
fn claude(prompt: &str, last: &str) -> String {
    lines(&[
        json!({"type": "permission-mode", "permissionMode": "plan"}),
        json!({"type": "user", "isSidechain": false,
               "message": {"role": "user", "content": prompt}}),
        json!({"type": "assistant", "isSidechain": false, "message": {"role": "assistant",
               "stop_reason": "tool_use", "content": [{"type": "text", "text": "Reading."}]}}),
        json!({"type": "assistant", "isSidechain": false, "message": {"role": "assistant",
               "stop_reason": "tool_use", "content": [{"type": "tool_use", "id": "t1",
               "name": "Read", "input": {"file_path": "notes.txt"}}]}}),
        json!({"type": "user", "isSidechain": false, "message": {"role": "user",
               "content": [{"type": "tool_result", "tool_use_id": "t1",
                            "content": "1\tVERDICT: pass\n"}]}}),
        json!({"type": "assistant", "isSidechain": false, "message": {"role": "assistant",
               "stop_reason": "end_turn", "content": [{"type": "text", "text": last}]}}),
        json!({"type": "system", "subtype": "turn_duration", "durationMs": 2025}),
    ])
}

/// A Codex rollout in the shape 0.171 writes.
fn codex(prompt: &str, last: &str, complete: bool) -> String {
    let mut v = vec![
        json!({"type": "session_meta", "payload": {"id": "s1"}}),
        json!({"type": "response_item", "payload": {"type": "message", "role": "user",
               "content": [{"type": "input_text", "text": "<environment_context>x</environment_context>"}]}}),
        json!({"type": "response_item", "payload": {"type": "message", "role": "user",
               "content": [{"type": "input_text", "text": prompt}]}}),
        json!({"type": "response_item", "payload": {"type": "message", "role": "assistant",
               "content": [{"type": "output_text", "text": "Reading."}]}}),
        json!({"type": "response_item", "payload": {"type": "function_call",
               "name": "exec_command", "arguments": "{}", "call_id": "c1"}}),
        json!({"type": "response_item", "payload": {"type": "function_call_output",
               "call_id": "c1", "output": "Output:\nVERDICT: pass\n"}}),
        json!({"type": "response_item", "payload": {"type": "message", "role": "assistant",
               "content": [{"type": "output_text", "text": last}]}}),
    ];
    if complete {
        v.push(
            json!({"type": "event_msg", "payload": {"type": "task_complete",
                      "last_agent_message": last}}),
        );
    }
    lines(&v)
}

const BRIEF: &str = "Review it.\nDone when: your last reply ends with `VERDICT: pass` or\nVERDICT: pass\n[drover] job=J attempt=a1b2 nonce=n";

#[test]
fn a_verdict_line_is_pass_or_fail_with_its_reason() {
    assert_eq!(parse_line("VERDICT: pass"), Some(Stated::Pass));
    assert_eq!(parse_line("  **Verdict: PASS**  "), Some(Stated::Pass));
    assert_eq!(parse_line("`VERDICT: pass.`"), Some(Stated::Pass));
    assert_eq!(
        parse_line("VERDICT: fail: the test is missing"),
        Some(Stated::Fail("the test is missing".into()))
    );
    assert_eq!(
        parse_line("VERDICT: fail"),
        Some(Stated::Fail(String::new()))
    );
    assert_eq!(parse_line("VERDICT: passable"), None);
    assert_eq!(parse_line("VERDICT: pass, mostly"), None);
    assert_eq!(parse_line("The VERDICT: pass"), None);
    assert_eq!(parse_line("VERDICT: maybe"), None);
    assert_eq!(parse_line("é"), None);
    let long = format!("VERDICT: fail: {}", "x".repeat(500));
    assert!(matches!(parse_line(&long), Some(Stated::Fail(r)) if r.len() == MAX_REASON_CHARS));
}

/// Guards issue 23: trimming `*`, `` ` `` and `_` from each end separately
/// cut the closing backtick of a reason's inline code, so the repair prompt
/// got ``…the line `reviewed: yes`` with its code span broken.
#[test]
fn a_reason_ending_in_inline_code_keeps_its_closing_backtick() {
    assert_eq!(
        parse_line("VERDICT: fail: must hold the line `reviewed: yes`"),
        Some(Stated::Fail("must hold the line `reviewed: yes`".into()))
    );
    assert_eq!(
        parse_line("**VERDICT: fail: must hold the line `reviewed: yes`**"),
        Some(Stated::Fail("must hold the line `reviewed: yes`".into()))
    );
    assert_eq!(
        parse_line("`VERDICT: fail: x` and `y`"),
        None,
        "backticks that do not wrap the line are not peeled"
    );
}

/// Guards issue 23: a reason ending in `__init__` lost its trailing
/// underscores to the same per-end trim.
#[test]
fn a_reason_ending_in_dunder_keeps_its_underscores() {
    assert_eq!(
        parse_line("VERDICT: fail: no test for __init__"),
        Some(Stated::Fail("no test for __init__".into()))
    );
    assert_eq!(
        parse_line("_VERDICT: fail: no test for *args_"),
        Some(Stated::Fail("no test for *args".into()))
    );
    assert_eq!(
        parse_line("__**VERDICT: fail: `a_b_`**__"),
        Some(Stated::Fail("`a_b_`".into())),
        "nested wrappers are peeled from the outside in"
    );
}

#[test]
fn claude_final_reply_states_the_verdict_and_findings() {
    let t = claude(
        BRIEF,
        "Findings: the rename is complete.\n\nVERDICT: fail: no test",
    );
    assert_eq!(
        read(&claude_entries(&t), M),
        Reading::Stated {
            verdict: Stated::Fail("no test".into()),
            findings: "Findings: the rename is complete.".into()
        }
    );
}

/// Guards the pasted prompt: Claude Code records a pasted dispatch wrapped
/// in `<pasted_content>`, which is still the prompt (not a context block).
#[test]
fn claude_pasted_prompt_is_the_prompt() {
    let pasted = format!("<pasted_content id=\"b674\">\n{BRIEF}\n</pasted_content id=\"b674\">\n");
    let mut t = claude(&pasted, "VERDICT: pass");
    t.push_str(&lines(&[
        json!({"type": "user", "message": {"role": "user",
        "content": "<system-reminder>later</system-reminder>"}}),
    ]));
    assert!(matches!(
        read(&claude_entries(&t), M),
        Reading::Stated {
            verdict: Stated::Pass,
            ..
        }
    ));
}

#[test]
fn codex_final_reply_states_the_verdict() {
    let t = codex(BRIEF, "All good.\nVERDICT: pass", true);
    assert!(matches!(
        read(&codex_entries(&t), M),
        Reading::Stated {
            verdict: Stated::Pass,
            ..
        }
    ));
}

/// Guards the binding: a `VERDICT:` line in the brief or in tool output
/// (both say pass here) never counts; only the final reply's last line does.
#[test]
fn quoted_verdict_in_brief_or_tool_output_does_not_count() {
    let t = claude(BRIEF, "I looked at it.");
    assert_eq!(read(&claude_entries(&t), M), Reading::NoVerdict);
    let t = codex(BRIEF, "I looked at it.", true);
    assert_eq!(read(&codex_entries(&t), M), Reading::NoVerdict);
    // Mid-reply is not the end of the reply.
    let t = codex(BRIEF, "VERDICT: pass\nbut then more words", true);
    assert_eq!(read(&codex_entries(&t), M), Reading::NoVerdict);
}

/// Guards the round binding: another dispatch's prompt (an earlier round
/// that passed) does not answer this one.
#[test]
fn a_verdict_answers_only_its_own_attempt() {
    let old = BRIEF.replace("attempt=a1b2", "attempt=a1b2x");
    let t = claude(&old, "VERDICT: pass");
    assert_eq!(read(&claude_entries(&t), M), Reading::Pending);
    // Round 1 passed, round 2 (this attempt) is still running.
    let mut t = codex(&old, "VERDICT: pass", true);
    t.push_str(&codex(BRIEF, "VERDICT: pass", false));
    assert_eq!(read(&codex_entries(&t), M), Reading::Pending);
    assert!(matches!(
        read(&codex_entries(&t), "attempt=a1b2x"),
        Reading::Stated { .. }
    ));
}

#[test]
fn a_turn_not_over_is_pending_and_a_half_line_is_skipped() {
    let t = codex(BRIEF, "VERDICT: pass", false);
    assert_eq!(read(&codex_entries(&t), M), Reading::Pending);
    let mut t = claude(BRIEF, "VERDICT: pass");
    t.push_str("{\"type\": \"assist");
    assert!(matches!(
        read(&claude_entries(&t), M),
        Reading::Stated { .. }
    ));
}

#[test]
fn transcripts_are_found_under_the_agents_own_dirs() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().to_string_lossy().into_owned();
    let env = |k: &str| (k == "HOME").then(|| home.clone());
    let croot = transcript_root(Agent::Claude, &env).unwrap();
    let xroot = transcript_root(Agent::Codex, &env).unwrap();
    assert_eq!(croot, dir.path().join(".claude"));
    let set = |k: &str| (k == "CODEX_HOME").then(|| "/elsewhere".to_string());
    assert_eq!(
        transcript_root(Agent::Codex, &set),
        Some(PathBuf::from("/elsewhere"))
    );
    let since = SystemTime::now();
    let p = croot.join("projects/-w-p");
    std::fs::create_dir_all(&p).unwrap();
    std::fs::write(p.join("s.jsonl"), claude(BRIEF, "VERDICT: pass")).unwrap();
    let x = xroot.join("sessions/2026/12/01");
    std::fs::create_dir_all(&x).unwrap();
    std::fs::write(x.join("rollout-1.jsonl"), codex(BRIEF, "no", true)).unwrap();
    assert!(matches!(
        find(Agent::Claude, &croot, M, since, None),
        Reading::Stated { .. }
    ));
    assert_eq!(
        find(Agent::Codex, &xroot, M, since, None),
        Reading::NoVerdict
    );
    assert_eq!(
        find(Agent::Codex, &xroot, "attempt=other", since, None),
        Reading::Pending
    );
}

#[test]
fn process_env_keeps_only_the_home_variables() {
    let me = std::process::id();
    let env = process_env(me);
    assert!(
        env.iter()
            .all(|(k, _)| matches!(k.as_str(), "HOME" | "CLAUDE_CONFIG_DIR" | "CODEX_HOME"))
    );
    assert!(process_env(u32::MAX).is_empty());
}

/// Guards the narrowing: the agent's own project or day dir is looked at
/// first, and everything else when that dir does not exist.
#[test]
fn transcripts_are_looked_for_where_the_agent_writes_them() {
    assert_eq!(
        claude_project(Path::new("/w/a.b_c/loop1-task-1")),
        "-w-a-b-c-loop1-task-1"
    );
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let since = SystemTime::now();
    let cwd = Path::new("/w/p");
    let mine = root.join("projects").join(claude_project(cwd));
    let other = root.join("projects").join("-w-q");
    for d in [&mine, &other] {
        std::fs::create_dir_all(d).unwrap();
        std::fs::write(d.join("s.jsonl"), "{}\n").unwrap();
    }
    assert_eq!(
        transcripts(Agent::Claude, root, since, Some(cwd)),
        vec![mine.join("s.jsonl")]
    );
    assert_eq!(
        transcripts(Agent::Claude, root, since, Some(Path::new("/w/none"))).len(),
        2
    );
    let today = root
        .join("sessions")
        .join(chrono::Local::now().format("%Y/%m/%d").to_string());
    let old = root.join("sessions/2001/01/01");
    for d in [&today, &old] {
        std::fs::create_dir_all(d).unwrap();
        std::fs::write(d.join("rollout-1.jsonl"), "{}\n").unwrap();
    }
    assert_eq!(
        transcripts(Agent::Codex, root, since, None),
        vec![today.join("rollout-1.jsonl")]
    );
}
