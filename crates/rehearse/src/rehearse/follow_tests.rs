use super::*;

const BRIEF: &str = "Lane: l1-impl-task-2 · Task: TASK-2 (Add two) · Tier: routine\nWhy: Create the file TASK-2.txt containing the line `two`.\nDone when: #1 TASK-2.txt contains the line `two`; #2 TASK-2.txt contains the line `reviewed: yes`\nScope: TASK-2.txt. Other live lanes are in: none.\nRules: Edit only the files in Scope, in this worktree; do not commit or push. When finished, run `/bin/drover report done` (or `/bin/drover report failed --reason \"<why>\"` if you cannot finish).\n\n[drover] job=J attempt=A1 nonce=n report=/lane/report-i1.json\nWhen finished, run `/bin/drover report done` (or …). If you cannot run commands, write /lane/report-i1.json as this one JSON object, one side_effects entry per file you changed: {\"attempt_id\":\"A1\",\"session_id\":\"implementer\",\"state\":\"finalized\",\"side_effects\":[{\"kind\":\"file\",\"path\":\"TASK-2.txt\"}]}";

fn at(prompt: &str, results: &[&str]) -> Position {
    Position {
        prompt: prompt.into(),
        prompts: 1,
        tool_results: results.len(),
        results: results.iter().map(|s| s.to_string()).collect(),
    }
}

fn tool(s: &Step) -> (&str, &Value) {
    let t = s.tool.as_ref().expect("a tool call");
    (t.name.as_str(), &t.input)
}

#[test]
fn an_implementer_writes_what_the_why_asks_then_runs_the_named_command() {
    let s0 = step(&at(BRIEF, &[]), "claude", Reports::Command);
    assert_eq!(tool(&s0), ("Read", &json!({"file_path": "TASK-2.txt"})));
    let s1 = step(&at(BRIEF, &["missing"]), "claude", Reports::Command);
    assert_eq!(
        tool(&s1),
        (
            "Write",
            &json!({"file_path": "TASK-2.txt", "content": "two\n"})
        )
    );
    let s2 = step(&at(BRIEF, &["", ""]), "claude", Reports::Command);
    assert_eq!(tool(&s2).1["command"], "/bin/drover report done");
    assert_eq!(
        step(&at(BRIEF, &["", "", ""]), "claude", Reports::Command).text,
        "Done."
    );
    let c0 = step(&at(BRIEF, &[]), "codex", Reports::Command);
    assert_eq!(
        tool(&c0),
        (
            "exec_command",
            &json!({"cmd": "printf '%s' 'two\n' > TASK-2.txt"})
        )
    );
    assert_eq!(
        tool(&step(&at(BRIEF, &[""]), "codex", Reports::Command)).1["cmd"],
        "/bin/drover report done"
    );
}

#[test]
fn a_repair_adds_the_line_the_review_named() {
    let repair = format!(
        "{BRIEF}\nRepair: the review failed: TASK-2.txt must hold the line `reviewed: yes`"
    );
    let s = step(&at(&repair, &[""]), "claude", Reports::Command);
    assert_eq!(tool(&s).1["content"], "two\nreviewed: yes\n");
}

#[test]
fn reporting_by_hand_copies_the_trailers_example() {
    let s = step(&at(BRIEF, &[""]), "codex", Reports::Json);
    let cmd = tool(&s).1["cmd"].as_str().unwrap().to_string();
    assert!(
        cmd.starts_with("mkdir -p /lane && printf '%s' '{\"attempt_id\":\"A1\""),
        "{cmd}"
    );
    assert!(cmd.ends_with("> /lane/report-i1.json"), "{cmd}");
}

#[test]
fn a_guess_first_then_what_drover_answers() {
    let s = step(&at(BRIEF, &[""]), "codex", Reports::Guess);
    let cmd = tool(&s).1["cmd"].as_str().unwrap().to_string();
    assert!(cmd.contains("\"state\":\"completed\""), "{cmd}");
    let answer = "[drover] job=J: the report /lane/r.json does not count yet: add `x`. Write /lane/r.json again as this one JSON object, one side_effects entry per file you changed: {\"state\":\"finalized\"} (or run `drover report done`).";
    let s = step(&at(answer, &[]), "claude", Reports::Guess);
    assert_eq!(
        tool(&s),
        (
            "Write",
            &json!({"file_path": "/lane/r.json", "content": "{\"state\":\"finalized\"}"})
        )
    );
}

#[test]
fn a_forgetful_model_reports_only_when_reminded() {
    assert_eq!(
        step(&at(BRIEF, &[""]), "codex", Reports::Forget).text,
        "Done."
    );
    let reminder = "[drover] job=J: your turn ended with no report. When finished, run `drover report done` (or …).";
    let s = step(&at(reminder, &[]), "codex", Reports::Forget);
    assert_eq!(tool(&s).1["cmd"], "drover report done");
}

const REVIEW: &str = "Lane: l1-rev-task-2 · Task: TASK-2 (Add two) · Tier: routine\nWhy: review the candidate of TASK-2 before it lands (round 1). The task asks: #1 TASK-2.txt contains the line `two`; #2 TASK-2.txt contains the line `reviewed: yes`\nDone when: your last reply ends with one line `VERDICT: pass` or `VERDICT: fail: <one-line reason>`, your findings above it.\nScope: read-only; the candidate is /lane/candidate-v1.patch.\nRules: change nothing.\n[loop] task=TASK-2 round=1 role=reviewer patch=/lane/candidate-v1.patch";

#[test]
fn a_reviewer_reads_the_candidate_and_states_the_verdict_in_the_asked_form() {
    let s = step(&at(REVIEW, &[]), "claude", Reports::Command);
    assert_eq!(
        tool(&s),
        ("Read", &json!({"file_path": "/lane/candidate-v1.patch"}))
    );
    let one =
        "     1\tdiff --git a/TASK-2.txt b/TASK-2.txt\n     2\t+++ b/TASK-2.txt\n     3\t+two\n";
    let v = step(&at(REVIEW, &[one]), "claude", Reports::Command).text;
    assert!(
        v.ends_with("\n\nVERDICT: fail: TASK-2.txt must hold the line `reviewed: yes`"),
        "{v}"
    );
    let both = format!("{one}     4\t+reviewed: yes\n");
    let v = step(&at(REVIEW, &[&both]), "codex", Reports::Command).text;
    assert!(v.ends_with("\n\nVERDICT: pass"), "{v}");
    let other = "+++ b/OTHER.txt\n+two\n+reviewed: yes\n";
    let v = step(&at(REVIEW, &[other]), "codex", Reports::Command).text;
    assert!(
        v.contains("VERDICT: fail: TASK-2.txt must hold the line `two`"),
        "a line in another file does not count: {v}"
    );
}

/// Guards issue 26: a rebase round's brief alone tells the model what to
/// do — resolve the named files (both sides kept, the markers deleted),
/// then run the report command — and the brief's "Create the file" is not
/// done again over the other side's lines.
#[test]
fn a_rebase_round_resolves_the_named_files_then_reports() {
    let prompt = format!(
        "{BRIEF}\nRebase: while you worked, drover/integration/loop1 moved on. drover has merged drover/integration/loop1 (abc) into this worktree; the merge stopped with conflict markers in: TASK-2.txt. The commits that changed them: 1234567 TASK-1: Add one.\nDo this: … do not run `git merge --abort` or `git reset`; …\n[loop] task=TASK-2 round=2 role=implementer rebase"
    );
    let s0 = step(&at(&prompt, &[]), "claude", Reports::Command);
    assert_eq!(tool(&s0), ("Read", &json!({"file_path": "TASK-2.txt"})));
    let read = "     1→<<<<<<< HEAD\n     2→two\n     3→=======\n     4→one\n     5→>>>>>>> drover/integration/loop1\n\n<system-reminder>a note</system-reminder>";
    let s1 = step(&at(&prompt, &[read]), "claude", Reports::Command);
    assert_eq!(
        tool(&s1),
        (
            "Write",
            &json!({"file_path": "TASK-2.txt", "content": "two\none\n"})
        )
    );
    let s2 = step(&at(&prompt, &[read, ""]), "claude", Reports::Command);
    assert_eq!(tool(&s2).1["command"], "/bin/drover report done");
    let c0 = step(&at(&prompt, &[]), "codex", Reports::Command);
    let cmd = tool(&c0).1["cmd"].as_str().unwrap().to_string();
    assert!(
        cmd.starts_with("sed -i ") && cmd.ends_with(" TASK-2.txt"),
        "{cmd}"
    );
    let c1 = step(&at(&prompt, &[""]), "codex", Reports::Command);
    assert_eq!(tool(&c1).1["cmd"], "/bin/drover report done");
    assert_eq!(
        resolved("a\n<<<<<<< x\nb\n=======\nc\n>>>>>>> y\n"),
        "a\nb\nc\n"
    );
}
