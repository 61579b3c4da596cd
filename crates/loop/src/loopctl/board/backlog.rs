//! The board: a Backlog.md directory (`backlog/tasks/<id> - <Title>.md`), the
//! format the `backlog` CLI writes. Each task file has YAML front matter (`id`,
//! `title`, `status`, `labels`, `dependencies`, `priority`, `modified_files`,
//! `ordinal`, …) and sections `## Description` and `## Acceptance Criteria`
//! with `- [ ] #1 …` items.
//!
//! The front matter is read as YAML (serde-saphyr: block scalars, comments,
//! quoted keys, anchors and aliases under an expansion budget), as people and
//! other tools write it; keys drover does not use are left alone. A scalar is
//! taken as its text (`id: 0012` is `0012`), and a list key given one scalar
//! is a list of one. [`mark_done`] is a pure text edit that changes the
//! `status:` value and the criteria boxes and nothing else, byte for byte.

use crate::loopctl::LoopError;
use std::path::{Path, PathBuf};

/// Largest task file read.
const MAX_TASK_BYTES: u64 = 1 << 20;
/// The status a landed task gets.
pub const DONE: &str = "Done";
/// The label that keeps a task out of Ready.
pub const NEEDS_OWNER: &str = "needs-owner";

/// One acceptance criterion.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Criterion {
    pub number: u32,
    pub checked: bool,
    pub text: String,
}

/// One task of the board.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Task {
    pub id: String,
    pub title: String,
    pub status: String,
    pub labels: Vec<String>,
    pub dependencies: Vec<String>,
    pub priority: Option<String>,
    /// The files the task may touch (`modified_files`): the lease's claim.
    pub files: Vec<String>,
    pub ordinal: Option<f64>,
    pub description: String,
    pub criteria: Vec<Criterion>,
    pub path: PathBuf,
}

#[derive(PartialEq, PartialOrd)]
pub(super) struct OrdKey(u8, f64, u64, String);

impl Task {
    /// Whether the task is Done.
    pub fn is_done(&self) -> bool {
        self.status.trim().eq_ignore_ascii_case(DONE)
    }

    /// Whether it carries a label (case-insensitive).
    pub fn has_label(&self, label: &str) -> bool {
        self.labels.iter().any(|l| l.eq_ignore_ascii_case(label))
    }

    pub(super) fn order_key(&self) -> OrdKey {
        let pri = match self
            .priority
            .as_deref()
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            Some("high") => 0,
            Some("medium") => 1,
            Some("low") => 2,
            _ => 3,
        };
        let num = self
            .id
            .rsplit(['-', '_'])
            .next()
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(u64::MAX);
        OrdKey(pri, self.ordinal.unwrap_or(f64::MAX), num, self.id.clone())
    }
}

/// Read and parse one task file.
pub fn read_task(path: &Path) -> Result<Task, LoopError> {
    let meta = std::fs::metadata(path).map_err(|e| LoopError::io(path, e))?;
    if meta.len() > MAX_TASK_BYTES {
        return Err(LoopError::parse(path, "larger than 1 MiB"));
    }
    let text = std::fs::read_to_string(path).map_err(|e| LoopError::io(path, e))?;
    parse_task(&text, path)
}

/// The front matter's lines and the body after it.
fn split_front(text: &str) -> Option<(Vec<&str>, &str)> {
    let rest = text.strip_prefix("---")?;
    let rest = rest
        .strip_prefix("\r\n")
        .or_else(|| rest.strip_prefix('\n'))?;
    let mut lines = Vec::new();
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        offset += line.len();
        let l = line.trim_end_matches(['\n', '\r']);
        if l == "---" {
            return Some((lines, &rest[offset..]));
        }
        lines.push(l);
    }
    None
}

/// The front matter keys drover reads; any other key is left alone.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct Front {
    id: Option<String>,
    title: Option<String>,
    status: Option<String>,
    priority: Option<String>,
    ordinal: Option<String>,
    #[serde(deserialize_with = "list")]
    labels: Vec<String>,
    #[serde(deserialize_with = "list")]
    dependencies: Vec<String>,
    #[serde(deserialize_with = "list")]
    modified_files: Vec<String>,
}

/// A list of scalars, one scalar (a list of one), or null (empty).
fn list<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    struct Items;
    impl<'de> serde::de::Visitor<'de> for Items {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a list of scalars or one scalar")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Vec<String>, A::Error> {
            let mut out = Vec::new();
            while let Some(item) = seq.next_element::<Option<String>>()? {
                out.extend(item);
            }
            Ok(out)
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Vec<String>, E> {
            Ok(vec![v.to_string()])
        }
        fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Vec<String>, E> {
            Ok(vec![v.to_string()])
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Vec<String>, E> {
            Ok(vec![v.to_string()])
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Vec<String>, E> {
            Ok(vec![v.to_string()])
        }
        fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Vec<String>, E> {
            Ok(vec![v.to_string()])
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Vec<String>, E> {
            Ok(Vec::new())
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Vec<String>, E> {
            Ok(Vec::new())
        }
    }
    d.deserialize_any(Items)
}

/// Parse the front matter's YAML (an empty one is a mapping with no keys).
fn parse_front(lines: &[&str], path: &Path) -> Result<Front, LoopError> {
    let yaml = lines.join("\n");
    if yaml.trim().is_empty() {
        return Ok(Front::default());
    }
    serde_saphyr::from_str::<Option<Front>>(&yaml)
        .map(Option::unwrap_or_default)
        .map_err(|e| {
            let why = e.to_string();
            let first = why.lines().next().unwrap_or("invalid");
            LoopError::parse(path, format!("front matter is not valid YAML: {first}"))
        })
}

/// The text of a `## Name` section: up to the next `## ` heading, without the
/// Backlog.md marker comments.
fn section<'a>(body: &'a str, name: &str) -> Vec<&'a str> {
    let mut inside = false;
    let mut out = Vec::new();
    for line in body.lines() {
        if let Some(h) = line.strip_prefix("## ") {
            inside = h.trim().eq_ignore_ascii_case(name);
            continue;
        }
        if inside && !(line.trim_start().starts_with("<!--") && line.trim_end().ends_with("-->")) {
            out.push(line);
        }
    }
    out
}

/// A criterion line: `- [ ] #1 text` or `- [x] #1 text`.
fn criterion(line: &str) -> Option<Criterion> {
    let rest = line.trim_start().strip_prefix("- [")?;
    let (mark, rest) = rest.split_at_checked(1)?;
    let rest = rest.strip_prefix("] ")?;
    let checked = match mark {
        " " => false,
        "x" | "X" => true,
        _ => return None,
    };
    let rest = rest.strip_prefix('#')?;
    let (num, text) = rest.split_once(' ').unwrap_or((rest, ""));
    Some(Criterion {
        number: num.parse().ok()?,
        checked,
        text: text.trim().to_string(),
    })
}

/// Parse a task file's text (pure apart from naming `path` in errors).
pub fn parse_task(text: &str, path: &Path) -> Result<Task, LoopError> {
    let (front, body) =
        split_front(text).ok_or_else(|| LoopError::parse(path, "no `---` front matter"))?;
    let f = parse_front(&front, path)?;
    let required = |v: Option<String>, key: &str| {
        v.filter(|s| !s.trim().is_empty())
            .ok_or_else(|| LoopError::parse(path, format!("front matter has no `{key}`")))
    };
    let id = required(f.id, "id")?;
    let title = required(f.title, "title")?;
    let status = required(f.status, "status")?;
    Ok(Task {
        id,
        title,
        status,
        labels: f.labels,
        dependencies: f.dependencies,
        priority: f.priority,
        files: f.modified_files,
        ordinal: f.ordinal.and_then(|o| o.trim().parse().ok()),
        description: section(body, "Description").join("\n").trim().to_string(),
        criteria: section(body, "Acceptance Criteria")
            .into_iter()
            .filter_map(criterion)
            .collect(),
        path: path.to_path_buf(),
    })
}

/// The text with the task marked Done and its criteria checked; every other
/// byte unchanged (pure). `None` when there is no `status:` line to change.
pub fn mark_done(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len() + 8);
    let mut fences = 0;
    let mut changed_status = false;
    let mut in_ac = false;
    for line in text.split_inclusive('\n') {
        let bare = line.trim_end_matches(['\n', '\r']);
        let eol = &line[bare.len()..];
        if bare == "---" && fences < 2 {
            fences += 1;
            out.push_str(line);
            continue;
        }
        if fences == 1 && !changed_status && bare.starts_with("status:") {
            out.push_str("status: ");
            out.push_str(DONE);
            out.push_str(eol);
            changed_status = true;
            continue;
        }
        if fences >= 2 {
            if let Some(h) = bare.strip_prefix("## ") {
                in_ac = h.trim().eq_ignore_ascii_case("Acceptance Criteria");
            } else if in_ac && criterion(bare).is_some_and(|c| !c.checked) {
                let at = line.find("- [ ]").unwrap_or(0);
                out.push_str(&line[..at]);
                out.push_str("- [x]");
                out.push_str(&line[at + 5..]);
                continue;
            }
        }
        out.push_str(line);
    }
    changed_status.then_some(out)
}

/// Mark a task Done in its file. The file is the user's: it is edited where
/// it is — through a symlink, the file it points to; its mode and owner
/// kept; a file with hard links written in place (a rename would split
/// them), any other replaced atomically.
pub fn write_done(task: &Task) -> Result<(), LoopError> {
    let text = std::fs::read_to_string(&task.path).map_err(|e| LoopError::io(&task.path, e))?;
    let new = mark_done(&text).ok_or_else(|| LoopError::parse(&task.path, "no `status:` line"))?;
    if new != text {
        write_in_place(&task.path, new.as_bytes())?;
    }
    Ok(())
}

/// Replace the content of the file `path` names, keeping what the user set
/// on it: the symlink stays a symlink, hard links stay one inode, the mode
/// and owner stay.
fn write_in_place(path: &Path, bytes: &[u8]) -> Result<(), LoopError> {
    use std::io::Write;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
    let real = std::fs::canonicalize(path).map_err(|e| LoopError::io(path, e))?;
    let meta = std::fs::metadata(&real).map_err(|e| LoopError::io(&real, e))?;
    let mode = meta.mode() & 0o7777;
    let io = |e| LoopError::io(&real, e);
    if meta.nlink() > 1 {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&real)
            .map_err(io)?;
        f.write_all(bytes).and_then(|()| f.sync_all()).map_err(io)?;
        return Ok(());
    }
    let dir = real.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".{}.drover-{}.tmp",
        real.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default(),
        std::process::id()
    ));
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)?;
        f.write_all(bytes)?;
        // The umask narrowed the mode given above; set it exactly.
        f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        let _ = std::os::unix::fs::fchown(&f, Some(meta.uid()), Some(meta.gid()));
        f.sync_all()?;
        std::fs::rename(&tmp, &real)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLI_TASK: &str = "---\nid: TASK-1\ntitle: Add greeting\nstatus: To Do\nassignee: []\ncreated_date: '2026-12-01 10:42'\nlabels:\n  - loop\ndependencies: []\nmodified_files:\n  - hello.txt\npriority: high\nordinal: 1000\n---\n\n## Description\n\n<!-- SECTION:DESCRIPTION:BEGIN -->\nSay hello.\n<!-- SECTION:DESCRIPTION:END -->\n\n## Acceptance Criteria\n<!-- AC:BEGIN -->\n- [ ] #1 hello.txt exists\n- [x] #2 it says hi\n<!-- AC:END -->\n";

    #[test]
    fn parses_what_the_cli_writes() {
        let t = parse_task(CLI_TASK, Path::new("t.md")).unwrap();
        assert_eq!(t.id, "TASK-1");
        assert_eq!(t.title, "Add greeting");
        assert_eq!(t.status, "To Do");
        assert_eq!(t.labels, vec!["loop"]);
        assert!(t.dependencies.is_empty());
        assert_eq!(t.files, vec!["hello.txt"]);
        assert_eq!(t.priority.as_deref(), Some("high"));
        assert_eq!(t.description, "Say hello.");
        assert_eq!(t.criteria.len(), 2);
        assert!(!t.criteria[0].checked && t.criteria[1].checked);
        assert_eq!(t.criteria[0].text, "hello.txt exists");
    }

    #[test]
    fn mark_done_changes_only_status_and_boxes() {
        let new = mark_done(CLI_TASK).unwrap();
        let expect = CLI_TASK
            .replace("status: To Do", "status: Done")
            .replace("- [ ] #1", "- [x] #1");
        assert_eq!(new, expect);
        assert_eq!(mark_done(&new).unwrap(), new, "idempotent");
        // CRLF files keep their line ends.
        let crlf = CLI_TASK.replace('\n', "\r\n");
        assert_eq!(mark_done(&crlf).unwrap(), expect.replace('\n', "\r\n"));
        // A box outside the criteria section stays as written.
        let other = format!("{CLI_TASK}\n## Notes\n- [ ] #9 not a criterion\n");
        assert!(
            mark_done(&other)
                .unwrap()
                .ends_with("- [ ] #9 not a criterion\n")
        );
        assert!(mark_done("no front matter").is_none());
    }

    #[test]
    fn bad_files_are_named() {
        let e = parse_task("---\ntitle: x\nstatus: To Do\n---\n", Path::new("bad.md"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("bad.md") && e.contains("id"), "{e}");
        let e = parse_task("no front", Path::new("nf.md"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("nf.md"), "{e}");
    }

    /// Guards issue 24 item 13: marking Done edits the user's file where it
    /// is — a symlinked task file's target, a hard-linked file's one inode —
    /// and keeps its mode.
    #[test]
    fn write_done_keeps_symlinks_hard_links_and_mode() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let tmp = tempfile::tempdir().unwrap();
        let (real, link) = (tmp.path().join("real.md"), tmp.path().join("link.md"));
        std::fs::write(&real, CLI_TASK).unwrap();
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::os::unix::fs::symlink(&real, &link).unwrap();
        write_done(&parse_task(CLI_TASK, &link).unwrap()).unwrap();
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert!(
            std::fs::read_to_string(&real)
                .unwrap()
                .contains("status: Done")
        );
        assert_eq!(std::fs::metadata(&real).unwrap().mode() & 0o777, 0o644);

        let (a, b) = (tmp.path().join("a.md"), tmp.path().join("b.md"));
        std::fs::write(&a, CLI_TASK).unwrap();
        std::fs::set_permissions(&a, std::fs::Permissions::from_mode(0o664)).unwrap();
        std::fs::hard_link(&a, &b).unwrap();
        write_done(&parse_task(CLI_TASK, &a).unwrap()).unwrap();
        assert!(
            std::fs::read_to_string(&b)
                .unwrap()
                .contains("status: Done")
        );
        assert_eq!(
            std::fs::metadata(&a).unwrap().ino(),
            std::fs::metadata(&b).unwrap().ino()
        );
        assert_eq!(std::fs::metadata(&a).unwrap().mode() & 0o777, 0o664);
    }

    #[test]
    fn inline_lists_and_quotes() {
        let t = parse_task(
            "---\nid: task-7\ntitle: \"Quoted: yes\"\nstatus: Done\nlabels: [a, 'needs-owner']\ndependencies: [task-1, task-2]\n---\n",
            Path::new("t.md"),
        )
        .unwrap();
        assert_eq!(t.title, "Quoted: yes");
        assert!(t.has_label(NEEDS_OWNER) && t.is_done());
        assert_eq!(t.dependencies, vec!["task-1", "task-2"]);
    }

    /// Guards the YAML reader on what people and other tools write (the old
    /// reader knew only the CLI's subset: a block scalar title read as `|`,
    /// a commented-out key as a key, an aliased list as nothing).
    #[test]
    fn hand_edited_front_matter_is_read_as_yaml() {
        let text = "---\n# edited by hand\nid: TASK-9 # the id\n'title': >-\n  Fold this\n  title\n\"status\": In Progress\nbase: &files\n  - src/a.rs\n  - \"src/b c.rs\"\nmodified_files: *files\nlabels: loop\ndependencies:\n  - task-1 # first\n  # - task-2\npriority: |\n  high\nordinal: 2000\n---\n## Description\nBody.\n";
        let t = parse_task(text, Path::new("t.md")).unwrap();
        assert_eq!(t.id, "TASK-9");
        assert_eq!(t.title, "Fold this title");
        assert_eq!(t.status, "In Progress");
        assert_eq!(t.files, vec!["src/a.rs", "src/b c.rs"]);
        assert_eq!(t.labels, vec!["loop"], "one scalar is a list of one");
        assert_eq!(
            t.dependencies,
            vec!["task-1"],
            "a commented item is not an item"
        );
        assert_eq!(t.priority.as_deref(), Some("high\n"));
        assert_eq!(t.ordinal, Some(2000.0));
        assert_eq!(t.description, "Body.");
    }

    /// Guards scalars taken as their text: `id: 0012` is not the number 12.
    #[test]
    fn scalars_keep_their_text() {
        let t = parse_task(
            "---\nid: 0012\ntitle: 2026\nstatus: yes\nlabels: [1, true]\n---\n",
            Path::new("t.md"),
        )
        .unwrap();
        assert_eq!(
            (t.id.as_str(), t.title.as_str(), t.status.as_str()),
            ("0012", "2026", "yes")
        );
        assert_eq!(t.labels, vec!["1", "true"]);
    }

    /// Guards a hostile board: invalid YAML and an alias bomb are errors
    /// naming the file, never a hang or a huge allocation.
    #[test]
    fn invalid_yaml_and_alias_bombs_are_named_errors() {
        let e = parse_task(
            "---\nid: [unclosed\ntitle: x\nstatus: s\n---\n",
            Path::new("bad.md"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("bad.md") && e.contains("YAML"), "{e}");
        assert!(!e.contains('\n'), "one line: {e}");
        let mut bomb = String::from(
            "---\nid: T-1\ntitle: x\nstatus: s\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n",
        );
        for i in 1..12 {
            let p = i - 1;
            bomb.push_str(&format!("a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"));
        }
        bomb.push_str("labels: *a11\n---\n");
        let started = std::time::Instant::now();
        let e = parse_task(&bomb, Path::new("bomb.md"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("bomb.md"), "{e}");
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }

    /// Guards the CLI's empty values: `labels: []`, an empty `priority:`.
    #[test]
    fn empty_values_are_empty() {
        let t = parse_task(
            "---\nid: T-2\ntitle: t\nstatus: To Do\nlabels: []\npriority:\ndependencies:\n---\n",
            Path::new("t.md"),
        )
        .unwrap();
        assert!(t.labels.is_empty() && t.dependencies.is_empty() && t.priority.is_none());
    }
}
