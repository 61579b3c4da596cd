use super::*;
use crate::agent::rows_from_text;

fn screen(path: &str) -> Vec<String> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/screens")
        .join(path);
    rows_from_text(&std::fs::read_to_string(&p).unwrap())
}

fn dialog(agent: AgentKind, path: &str) -> Dialog {
    parse(agent, &screen(path), 0).unwrap_or_else(|| panic!("{path}: no dialog"))
}

fn keys(p: &Plan) -> Vec<&str> {
    p.nav.iter().chain(&p.confirm).map(String::as_str).collect()
}

#[test]
fn claude_numbered_permission_approves_with_its_number() {
    for f in [
        "claude/blocked-write-1.txt",
        "claude/blocked-bash-1.txt",
        "claude-2.1.332/blocked-write-1.txt",
        "claude-2.1.332/blocked-bash-1.txt",
    ] {
        let d = dialog(AgentKind::Claude, f);
        assert_eq!(d.kind, DialogKind::ClaudePermission, "{f}");
        assert_eq!(keys(&plan(&d, &Action::Approve).unwrap()), ["1"], "{f}");
        assert_eq!(keys(&plan(&d, &Action::Deny).unwrap()), ["Esc"], "{f}");
    }
}

#[test]
fn claude_unnumbered_no_yes_navigates_to_yes() {
    let d = dialog(AgentKind::Claude, "claude-2.1.332/blocked-noyes-bash-1.txt");
    assert_eq!(d.choices.len(), 2);
    assert_eq!(selected(&d), Some("No"));
    let p = plan(&d, &Action::Approve).unwrap();
    assert_eq!(keys(&p), ["Down", "Enter"]);
    assert_eq!(p.target.as_deref(), Some("Yes"));
    // With the cursor already on Yes, Enter alone.
    let d = dialog(
        AgentKind::Claude,
        "claude-2.1.332/blocked-noyes-bash-down-1.txt",
    );
    assert_eq!(keys(&plan(&d, &Action::Approve).unwrap()), ["Enter"]);
    // By label, the other way.
    assert_eq!(
        keys(&plan(&d, &Action::Label("no".into())).unwrap()),
        ["Up", "Enter"]
    );
    let d = dialog(
        AgentKind::Claude,
        "claude-2.1.332/blocked-noyes-write-1.txt",
    );
    assert_eq!(d.title, "Do you want to create outside.txt?");
}

#[test]
fn auto_mode_dialog_stays_or_cancels() {
    let d = dialog(AgentKind::Claude, "claude-2.1.332/auto-mode-dialog-1.txt");
    assert_eq!(d.kind, DialogKind::ClaudeAutoMode);
    assert_eq!(keys(&plan(&d, &Action::Approve).unwrap()), ["Enter"]);
    assert_eq!(keys(&plan(&d, &Action::Deny).unwrap()), ["Esc"]);
}

#[test]
fn question_answers_by_number_or_label() {
    for f in [
        "claude/blocked-question-1.txt",
        "claude-2.1.332/blocked-question-1.txt",
    ] {
        let d = dialog(AgentKind::Claude, f);
        assert_eq!(d.kind, DialogKind::ClaudeQuestion, "{f}");
        assert_eq!(keys(&plan(&d, &Action::Number(2)).unwrap()), ["2"]);
        assert_eq!(
            keys(&plan(&d, &Action::Label("blue".into())).unwrap()),
            ["2"]
        );
        assert!(
            plan(&d, &Action::Approve).is_err(),
            "approve does not answer a question"
        );
        assert!(plan(&d, &Action::Label("green".into())).is_err());
    }
}

#[test]
fn limit_menu_is_answered_by_label_never_by_number() {
    // 2.1.197 lists two rows, 2.1.332 three, in another order.
    for f in ["claude/limit-menu-1.txt", "claude-2.1.332/limit-menu-1.txt"] {
        let d = dialog(AgentKind::Claude, f);
        assert_eq!(d.kind, DialogKind::ClaudeLimitMenu, "{f}");
        let p = plan(&d, &Action::Label("Stop and wait".into())).unwrap();
        assert_eq!(keys(&p), ["1"], "{f}");
        let up = plan(&d, &Action::Label("upgrade your plan".into())).unwrap();
        let want = if f.starts_with("claude/") { "2" } else { "3" };
        assert_eq!(keys(&up), [want], "{f}");
        assert!(
            plan(&d, &Action::Number(1)).is_err(),
            "{f}: a number is refused"
        );
    }
}

#[test]
fn codex_approval_and_limit_popup() {
    let d = dialog(AgentKind::Codex, "codex/blocked-escalate-1.txt");
    assert_eq!(d.kind, DialogKind::CodexApproval);
    assert_eq!(keys(&plan(&d, &Action::Approve).unwrap()), ["y"]);
    assert_eq!(keys(&plan(&d, &Action::Deny).unwrap()), ["Esc"]);
    assert_eq!(d.choices.len(), 3);
    let d = dialog(AgentKind::Codex, "codex/limit-popup-1.txt");
    assert_eq!(d.kind, DialogKind::CodexLimitPopup);
    assert_eq!(
        keys(&plan(&d, &Action::Label("Keep current model".into())).unwrap()),
        ["2"]
    );
}

#[test]
fn no_dialog_on_ready_screens_or_quoted_prose() {
    for (agent, f) in [
        (AgentKind::Claude, "claude/idle-after-reply-1.txt"),
        (AgentKind::Claude, "claude-2.1.332/done-1.txt"),
        (AgentKind::Claude, "claude-2.1.332/limit-stopped-1.txt"),
        (AgentKind::Codex, "codex/idle-after-reply-1.txt"),
        (AgentKind::Codex, "codex/limit-1.txt"),
    ] {
        assert_eq!(parse(agent, &screen(f), 0), None, "{f}");
    }
}
