//! Human views: plain aligned tables, no colour, one row per thing.

use super::heartbeat::{self, Freshness};
use super::lease::Lease;
use super::mix::MixReport;
use super::schema::{Agent, Registry};
use crate::statedir::StateDir;
use chrono::{DateTime, Utc};

/// Align rows under headers, two spaces between columns.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut width: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            if let Some(w) = width.get_mut(i) {
                *w = (*w).max(c.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(c);
                s.push_str(&" ".repeat(width[i].saturating_sub(c.chars().count()) + 2));
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(headers.to_vec());
    for r in rows {
        out += &line(r.iter().map(String::as_str).collect());
    }
    out
}

/// `5s`, `12m`, `3h`, `2d`, or `never`.
pub fn human_age(d: Option<chrono::Duration>) -> String {
    let Some(d) = d else { return "never".into() };
    let s = d.num_seconds().max(0);
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86400),
    }
}

fn opt(s: Option<&str>) -> String {
    s.filter(|x| !x.is_empty()).unwrap_or("-").to_string()
}

/// Load the registry and its leases and render them: what `drover registry
/// show` prints (and what `drover demo` can print after [`super::init`]).
pub fn show(state_dir: &StateDir, now: DateTime<Utc>) -> Result<String, super::RegistryError> {
    let reg = super::load_required(state_dir)?;
    let leases = super::lease::list(state_dir, now)?;
    Ok(registry(&reg, &leases, now))
}

/// `drover registry show`: sessions × lanes with status, heartbeat age, lease and gate class.
pub fn registry(reg: &Registry, leases: &[Lease], now: DateTime<Utc>) -> String {
    let m = &reg.agent_mix;
    let mut out = format!(
        "topology {} · gate {} · agent mix {} {} (rolling {} tasks, max skew {} WU)\n\n",
        reg.topology, reg.gate_policy, m.target, m.unit, m.window.size, m.max_allowed_skew_wu
    );
    let rows: Vec<Vec<String>> = reg
        .sessions
        .iter()
        .map(|s| {
            let fresh =
                heartbeat::freshness(s.last_heartbeat.as_deref(), heartbeat::ttl_of(s), now);
            let status = match fresh {
                Freshness::Stale => format!("stale ({})", s.status),
                _ => s.status.clone(),
            };
            let lane = |a: Agent| {
                let l = s.lanes.get(a);
                if l.wu_spent_rolling > 0 {
                    format!("{} {}wu", l.status, l.wu_spent_rolling)
                } else {
                    l.status.clone()
                }
            };
            let held: Vec<String> = leases
                .iter()
                .filter(|l| l.owner_session == s.session_id)
                .map(|l| {
                    let who = l.active_agent.map(|a| format!(", {a}")).unwrap_or_default();
                    format!("{} {}{who}", opt(l.task_id.as_deref()), l.state.as_str())
                })
                .collect();
            vec![
                s.session_id.clone(),
                s.role.clone(),
                s.ship_gate.as_str().to_string(),
                status,
                opt(s.task.as_deref()),
                human_age(heartbeat::age(s.last_heartbeat.as_deref(), now)),
                lane(Agent::Claude),
                lane(Agent::Codex),
                if held.is_empty() {
                    "-".into()
                } else {
                    held.join("; ")
                },
            ]
        })
        .collect();
    out += &table(
        &[
            "SESSION",
            "ROLE",
            "GATE",
            "STATUS",
            "TASK",
            "HEARTBEAT",
            "CLAUDE",
            "CODEX",
            "LEASE",
        ],
        &rows,
    );
    out
}

/// `drover lease ls`.
pub fn leases(leases: &[Lease], now: DateTime<Utc>) -> String {
    if leases.is_empty() {
        return "no leases\n".into();
    }
    let rows: Vec<Vec<String>> = leases
        .iter()
        .map(|l| {
            let expires = match l.expires_at.time() {
                Some(t) if t > now => format!("in {}", human_age(Some(t - now))),
                Some(t) => format!("{} ago", human_age(Some(now - t))),
                None => "unparseable".into(),
            };
            let task = match &l.task_id {
                Some(t) => t.clone(),
                None => "(none: ineligible)".into(),
            };
            let state = match &l.recovery_reason {
                Some(r) => format!("{}: {r}", l.state.as_str()),
                None => l.state.as_str().to_string(),
            };
            vec![
                task,
                l.lease_id.clone(),
                l.owner_session.clone(),
                l.active_agent.map_or("-".into(), |a| a.to_string()),
                opt(l.branch.as_deref()),
                expires,
                if l.claimed_files.is_empty() {
                    "(any)".into()
                } else {
                    l.claimed_files.join(",")
                },
                state,
            ]
        })
        .collect();
    table(
        &[
            "TASK", "LEASE", "OWNER", "AGENT", "BRANCH", "EXPIRES", "FILES", "STATE",
        ],
        &rows,
    )
}

/// `drover mix`.
pub fn mix(r: &MixReport, reg: Option<&Registry>) -> String {
    let mut out = table(
        &["AGENT", "TARGET", "SPENT"],
        &Agent::ALL
            .iter()
            .map(|a| {
                let spent = match a {
                    Agent::Claude => r.spent.claude,
                    Agent::Codex => r.spent.codex,
                };
                vec![
                    a.to_string(),
                    r.target.get(*a).to_string(),
                    spent.to_string(),
                ]
            })
            .collect::<Vec<_>>(),
    );
    let lean = match r.skew_wu {
        s if s > 0.0 => " (claude ahead)",
        s if s < 0.0 => " (codex ahead)",
        _ => "",
    };
    out += &format!(
        "\nwindow: {} of {} tasks · skew {:+.1} WU{lean} · max allowed {} WU{}\nnext lane: {}\n",
        r.tasks_in_window,
        r.window_tasks,
        r.skew_wu,
        r.max_allowed_skew_wu,
        if r.over_skew { " · OVER" } else { "" },
        r.next_agent
    );
    if let Some(reg) = reg {
        let rows: Vec<Vec<String>> = reg
            .sessions
            .iter()
            .map(|s| {
                let spent = super::mix::Spent {
                    claude: s.lanes.claude.wu_spent_rolling,
                    codex: s.lanes.codex.wu_spent_rolling,
                };
                vec![
                    s.session_id.clone(),
                    spent.claude.to_string(),
                    spent.codex.to_string(),
                    super::mix::next_agent(r.target, r.skew_wu, Some(spent)).to_string(),
                ]
            })
            .collect();
        out += "\n";
        out += &table(&["SESSION", "CLAUDE WU", "CODEX WU", "NEXT LANE"], &rows);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_aligns() {
        let t = table(&["A", "BB"], &[vec!["xxx".into(), "y".into()]]);
        assert_eq!(t, "A    BB\nxxx  y\n");
    }

    #[test]
    fn ages_are_short() {
        assert_eq!(human_age(Some(chrono::Duration::seconds(125))), "2m");
        assert_eq!(human_age(None), "never");
    }
}
