//! The close-out report `closeout.md` (pure rendering): line 1 exactly
//! `# Closeout: <repo> loop<N> · Charter: <sha256>`, then `## Landed` (a
//! bullet per task: ID (title), SHA), `## Parked` (ID, reason, resume
//! condition), `## For ratification` (each ruling or question with a
//! recommendation), `## Notes`, `## Usage` (a line per started task with
//! the tokens and cost its lanes reported, or `not reported`, then the
//! run's total) when any task started, and `## Take the work` (the
//! commands that take what landed and commit the board) when there is any.

/// What the close-out says.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Closeout {
    pub repo: String,
    pub run: u32,
    pub charter_sha256: String,
    /// (id, title, sha)
    pub landed: Vec<(String, String, String)>,
    /// The landed tasks their lane rebased first (a rebase round): their
    /// line says `rebased`.
    pub rebased: Vec<String>,
    /// (id, reason, resume condition)
    pub parked: Vec<(String, String, String)>,
    /// (item, recommendation)
    pub ratify: Vec<(String, String)>,
    pub notes: Vec<String>,
    /// (id, its usage line) per started task; with `usage_total`, the
    /// run's line: `## Usage` when any.
    pub usage: Vec<(String, String)>,
    pub usage_total: Option<String>,
    /// The commands that take the run's work (merge, commit the board,
    /// carry on from it): `## Take the work`, last, when there are any.
    pub take: Vec<String>,
}

/// The first line (pure).
pub fn first_line(repo: &str, run: u32, sha: &str) -> String {
    format!("# Closeout: {repo} loop{run} · Charter: {sha}")
}

fn one(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

/// The text of `closeout.md` (pure).
pub fn render(c: &Closeout) -> String {
    let mut t = first_line(&c.repo, c.run, &c.charter_sha256);
    t.push_str("\n\n## Landed\n");
    if c.landed.is_empty() {
        t.push_str("- none\n");
    }
    for (id, title, sha) in &c.landed {
        let rebased = if c.rebased.contains(id) {
            ", rebased"
        } else {
            ""
        };
        t.push_str(&format!("- {id} ({}), {sha}{rebased}\n", one(title)));
    }
    t.push_str("\n## Parked\n");
    if c.parked.is_empty() {
        t.push_str("- none\n");
    }
    for (id, reason, resume) in &c.parked {
        t.push_str(&format!(
            "- {id}, {}, resume: {}\n",
            one(reason),
            one(resume)
        ));
    }
    t.push_str("\n## For ratification\n");
    if c.ratify.is_empty() {
        t.push_str("- none\n");
    }
    for (item, rec) in &c.ratify {
        t.push_str(&format!("- {} — recommendation: {}\n", one(item), one(rec)));
    }
    t.push_str("\n## Notes\n");
    for n in &c.notes {
        t.push_str(&format!("- {}\n", one(n)));
    }
    if let Some(total) = &c.usage_total {
        t.push_str("\n## Usage\n");
        for (id, line) in &c.usage {
            t.push_str(&format!("- {id}: {}\n", one(line)));
        }
        t.push_str(&format!("- run: {}\n", one(total)));
    }
    if !c.take.is_empty() {
        t.push_str("\n## Take the work\n");
        for n in &c.take {
            t.push_str(&format!("- {}\n", one(n)));
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closeout_has_its_exact_shape() {
        let c = Closeout {
            repo: "greeter".into(),
            run: 3,
            charter_sha256: "ab".repeat(32),
            landed: vec![("TASK-1".into(), "Greet".into(), "f00d".into())],
            rebased: vec!["TASK-1".into()],
            parked: vec![(
                "TASK-2".into(),
                "touches files outside its claim".into(),
                "widen the claim".into(),
            )],
            ratify: vec![],
            notes: vec!["integration branch drover/integration/loop3".into()],
            usage: vec![
                ("TASK-1".into(), "1200 in · 300 out · $0.05".into()),
                ("TASK-2".into(), "not reported".into()),
            ],
            usage_total: Some(
                "1200 in · 300 out · $0.05 (1 of 2 task(s) reported, 1 a cost)".into(),
            ),
            take: vec![],
        };
        let text = render(&c);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            vec![
                format!("# Closeout: greeter loop3 · Charter: {}", "ab".repeat(32)).as_str(),
                "",
                "## Landed",
                "- TASK-1 (Greet), f00d, rebased",
                "",
                "## Parked",
                "- TASK-2, touches files outside its claim, resume: widen the claim",
                "",
                "## For ratification",
                "- none",
                "",
                "## Notes",
                "- integration branch drover/integration/loop3",
                "",
                "## Usage",
                "- TASK-1: 1200 in · 300 out · $0.05",
                "- TASK-2: not reported",
                "- run: 1200 in · 300 out · $0.05 (1 of 2 task(s) reported, 1 a cost)",
            ]
        );
    }
}
