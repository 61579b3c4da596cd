//! The board as a whole: the tasks directory of a Backlog.md dir, every
//! task file in it read (each through [`super::read_task`]) and put in
//! order, the files it cannot use left out and named ([`Problem`]: a file
//! that cannot be read or parsed, ids that collide), and board text
//! sanitized before anything passes it on ([`sanitize`]).

use super::{Task, read_task};
use crate::loopctl::LoopError;
use std::path::{Path, PathBuf};

/// The tasks of a board, in priority order (priority, ordinal, id).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Board {
    pub dir: PathBuf,
    pub tasks: Vec<Task>,
    /// Files left out of `tasks`, and why (unreadable, malformed, an id
    /// another file has too).
    pub problems: Vec<Problem>,
}

/// A task file the board leaves out.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Problem {
    pub path: PathBuf,
    /// The id it says, when it could be read.
    pub id: Option<String>,
    pub reason: String,
}

impl Problem {
    /// `<file name>: <reason>` (one line, [`sanitize`]d: a file name is
    /// board text too).
    pub fn describe(&self) -> String {
        sanitize(&format!(
            "{}: {}",
            file_name(&self.path),
            self.reason.replace('\n', " ")
        ))
    }
}

/// A path's last component, for messages.
fn file_name(p: &Path) -> String {
    p.file_name().map_or_else(
        || p.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

impl Board {
    /// A task by id (case-insensitive, as the CLI accepts `task-1`).
    pub fn task(&self, id: &str) -> Option<&Task> {
        self.tasks.iter().find(|t| t.id.eq_ignore_ascii_case(id))
    }
}

/// The tasks directory of a board given as the Backlog.md dir or the repo.
pub fn tasks_dir(dir: &Path) -> PathBuf {
    let nested = dir.join("backlog").join("tasks");
    if !dir.join("tasks").is_dir() && nested.is_dir() {
        return nested;
    }
    dir.join("tasks")
}

/// The name a task id gives its lane, worktree, branch and jobs: lowercase
/// `[a-z0-9-]`. Two ids with the same key would share them.
pub fn id_key(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect()
}

/// Load every `*.md` under `tasks/`. A file that cannot be read or parsed
/// is left out and named in `problems`, as is every file whose id another
/// file has too, or that collides with another's once made a name
/// ([`id_key`]: `TASK-1`, `task_1`, `Task.1`): the rest of the board is
/// worked. Only a tasks dir that cannot be listed is an error.
pub fn load(dir: &Path) -> Result<Board, LoopError> {
    let tdir = tasks_dir(dir);
    let rd = std::fs::read_dir(&tdir).map_err(|e| LoopError::io(&tdir, e))?;
    let mut paths = Vec::new();
    for entry in rd {
        let entry = entry.map_err(|e| LoopError::io(&tdir, e))?;
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("md") || !path.is_file() {
            continue;
        }
        paths.push(path);
    }
    // Listing order is the filesystem's; problems are reported in name order.
    paths.sort();
    let mut tasks = Vec::new();
    let mut problems = Vec::new();
    for path in paths {
        match read_task(&path) {
            Ok(t) => tasks.push(sanitized(t)),
            Err(e) => problems.push(Problem {
                path: path.clone(),
                id: None,
                reason: match e {
                    LoopError::Parse { message, .. } => message,
                    LoopError::Io { source, .. } => format!("cannot be read: {source}"),
                    other => other.to_string(),
                },
            }),
        }
    }
    let (tasks, colliding) = without_collisions(tasks);
    problems.extend(colliding);
    problems.sort_by(|a, b| a.path.cmp(&b.path));
    let mut tasks = tasks;
    tasks.sort_by(|a, b| {
        a.order_key()
            .partial_cmp(&b.order_key())
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    Ok(Board {
        dir: tdir,
        tasks,
        problems,
    })
}

/// Board text as drover passes it on — to a terminal, a commit message, a
/// report, a brief: every control character (C0 but newline and tab, DEL,
/// C1: the start of every escape sequence) and every bidirectional override
/// replaced by U+FFFD, so a hostile title cannot drive a terminal (`ESC]52`
/// to the clipboard, `ESC[2J`) or hide what a line says (pure).
pub fn sanitize(text: &str) -> String {
    text.chars()
        .map(|c| {
            let bidi = matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}');
            if (c.is_control() && c != '\n' && c != '\t') || bidi {
                '\u{FFFD}'
            } else {
                c
            }
        })
        .collect()
}

/// A task with every text field [`sanitize`]d (one-line fields lose their
/// newlines too).
fn sanitized(mut t: Task) -> Task {
    let line = |s: &str| sanitize(s).replace(['\n', '\t'], " ");
    t.id = line(&t.id);
    t.title = line(&t.title);
    t.status = line(&t.status);
    t.labels = t.labels.iter().map(|l| line(l)).collect();
    t.dependencies = t.dependencies.iter().map(|l| line(l)).collect();
    t.priority = t.priority.as_deref().map(line);
    t.files = t.files.iter().map(|l| line(l)).collect();
    t.description = sanitize(&t.description);
    for c in &mut t.criteria {
        c.text = line(&c.text);
    }
    t
}

/// The tasks whose [`id_key`] no other task shares, and a problem for each
/// of the others naming the files it collides with (pure). Neither of two
/// colliding tasks is worked: which one is meant is the owner's call.
fn without_collisions(tasks: Vec<Task>) -> (Vec<Task>, Vec<Problem>) {
    let mut by_key: std::collections::BTreeMap<String, Vec<usize>> = Default::default();
    for (i, t) in tasks.iter().enumerate() {
        by_key.entry(id_key(&t.id)).or_default().push(i);
    }
    let name = |t: &Task| file_name(&t.path);
    let mut problems = Vec::new();
    let mut keep = Vec::new();
    for (i, t) in tasks.iter().enumerate() {
        let group = &by_key[&id_key(&t.id)];
        if group.len() == 1 {
            keep.push(t.clone());
            continue;
        }
        let others: Vec<String> = group
            .iter()
            .filter(|j| **j != i)
            .map(|j| format!("{} ({})", name(&tasks[*j]), tasks[*j].id))
            .collect();
        let same = group.iter().all(|j| tasks[*j].id == t.id);
        problems.push(Problem {
            path: t.path.clone(),
            id: Some(t.id.clone()),
            reason: format!(
                "id {} {} {}; none of them is worked until each task has its own id",
                t.id,
                if same {
                    "is also the id of"
                } else {
                    "collides (same lane, worktree and job names) with"
                },
                others.join(", ")
            ),
        });
    }
    (keep, problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLI_TASK: &str = "---\nid: TASK-1\ntitle: Add greeting\nstatus: To Do\nmodified_files:\n  - hello.txt\n---\n\n## Description\n\nSay hello.\n\n## Acceptance Criteria\n- [ ] #1 hello.txt exists\n";

    /// Guards issue 24 item 1: duplicate and colliding ids are left out of
    /// the board, each named with the files it collides with; a malformed
    /// file is reported, not fatal; the rest is read.
    #[test]
    fn colliding_ids_and_bad_files_are_problems_not_tasks() {
        let tmp = tempfile::tempdir().unwrap();
        let tasks = tmp.path().join("tasks");
        std::fs::create_dir_all(&tasks).unwrap();
        let t = |id: &str| CLI_TASK.replace("id: TASK-1", &format!("id: {id}"));
        std::fs::write(tasks.join("a.md"), t("TASK-1")).unwrap();
        std::fs::write(tasks.join("b.md"), t("TASK-1")).unwrap();
        std::fs::write(tasks.join("c.md"), t("Task.1")).unwrap();
        std::fs::write(tasks.join("d.md"), t("TASK-2")).unwrap();
        std::fs::write(tasks.join("e.md"), "not a task\n").unwrap();
        let b = load(tmp.path()).unwrap();
        let ids: Vec<&str> = b.tasks.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids, ["TASK-2"]);
        let p: Vec<String> = b.problems.iter().map(Problem::describe).collect();
        assert_eq!(p.len(), 4, "{p:?}");
        assert!(
            p[0].starts_with("a.md: id TASK-1 collides")
                && p[0].contains("b.md (TASK-1)")
                && p[0].contains("c.md (Task.1)"),
            "{p:?}"
        );
        assert!(
            p[2].starts_with("c.md: id Task.1 collides") && p[2].contains("a.md"),
            "{p:?}"
        );
        assert!(
            p[3].starts_with("e.md: ") && p[3].contains("front matter"),
            "{p:?}"
        );
        assert_eq!(id_key("task_1"), id_key("TASK-1"));
    }

    /// Guards issue 24 item 8: hostile board text (an OSC 52 clipboard
    /// write, a screen clear, a bidi override) never leaves the board as is.
    #[test]
    fn hostile_board_text_is_sanitized_when_read() {
        let tmp = tempfile::tempdir().unwrap();
        let tasks = tmp.path().join("tasks");
        std::fs::create_dir_all(&tasks).unwrap();
        // In front matter as YAML writes control characters: escaped in a
        // double-quoted scalar (a raw one is not YAML and is a problem).
        let hostile = r#""Add \e]52;c;ZXZpbA==\a\e[2Jgreeting \u202Etxt.exe""#;
        let text = CLI_TASK
            .replace("title: Add greeting", &format!("title: {hostile}"))
            .replace("Say hello.", "Say \u{1b}[31mhello\u{9b}.");
        std::fs::write(tasks.join("t.md"), text).unwrap();
        let b = load(tmp.path()).unwrap();
        let t = &b.tasks[0];
        for s in [&t.title, &t.description] {
            assert!(
                !s.chars()
                    .any(|c| c.is_control() && c != '\n' || c == '\u{202E}'),
                "{s:?}"
            );
        }
        assert!(
            t.title
                .starts_with("Add \u{fffd}]52;c;ZXZpbA==\u{fffd}\u{fffd}[2Jgreeting"),
            "{:?}",
            t.title
        );
        assert_eq!(sanitize("line\nnext\ttab"), "line\nnext\ttab");
    }
}
