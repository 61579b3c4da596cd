//! A candidate from another host is applied with the checks a local one
//! gets (`git apply` refuses `../`, `.git/` and writes through a symlink)
//! plus one: no symlink it makes may point outside the tree. Pure checks:
//! the paths a patch touches (from `git apply --numstat -z`), and the
//! tree after it was applied.

use std::path::{Component, Path, PathBuf};

/// The paths a patch touches, from `git apply --numstat -z` output
/// (`added\tdeleted\tpath\0`, or for a rename or copy
/// `added\tdeleted\t\0from\0to\0`).
pub fn patch_paths(numstat_z: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let mut fields = numstat_z.split(|b| *b == 0);
    while let Some(f) = fields.next() {
        if f.is_empty() {
            continue;
        }
        let text = String::from_utf8_lossy(f);
        let mut cols = text.splitn(3, '\t');
        let (_, _, path) = (cols.next(), cols.next(), cols.next());
        match path {
            Some("") => {
                // A rename or copy: the two paths follow.
                for _ in 0..2 {
                    if let Some(p) = fields.next() {
                        out.push(String::from_utf8_lossy(p).into_owned());
                    }
                }
            }
            Some(p) => out.push(p.to_string()),
            None => {}
        }
    }
    out
}

/// Whether a symlink at `link` (relative to the tree's root) pointing at
/// `target` leads outside the tree: an absolute target, or one whose `..`
/// climb above the root (read as written, not through other links).
pub fn escapes(link: &Path, target: &Path) -> bool {
    if target.is_absolute() {
        return true;
    }
    let mut depth: i64 = link.components().count() as i64 - 1;
    for c in target.components() {
        match c {
            Component::ParentDir => {
                depth -= 1;
                if depth < 0 {
                    return true;
                }
            }
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => return true,
        }
    }
    false
}

/// The symlinks among `paths` in the tree at `root` that point outside it,
/// with their targets. Each path and every directory above it in the tree
/// is looked at, so a link made as a parent of another path is seen too.
pub fn escaping_symlinks(root: &Path, paths: &[String]) -> Vec<(String, PathBuf)> {
    let mut out: Vec<(String, PathBuf)> = Vec::new();
    for p in paths {
        let rel = Path::new(p);
        let mut at = PathBuf::new();
        for c in rel.components() {
            at.push(c);
            let full = root.join(&at);
            let Ok(meta) = std::fs::symlink_metadata(&full) else {
                break;
            };
            if !meta.file_type().is_symlink() {
                continue;
            }
            let target = std::fs::read_link(&full).unwrap_or_default();
            let shown = at.to_string_lossy().into_owned();
            if escapes(&at, &target) && !out.iter().any(|(s, _)| *s == shown) {
                out.push((shown, target));
            }
            break;
        }
    }
    out
}

/// One sentence naming the escaping links (for a refusal).
pub fn describe(bad: &[(String, PathBuf)]) -> String {
    let list: Vec<String> = bad
        .iter()
        .map(|(p, t)| format!("{p} -> {}", t.display()))
        .collect();
    format!(
        "the candidate makes a symlink that points outside the tree: {}",
        list.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_escapes_by_an_absolute_target_or_too_many_dotdots() {
        assert!(escapes(Path::new("a"), Path::new("/etc/passwd")));
        assert!(escapes(Path::new("a"), Path::new("../x")));
        assert!(escapes(Path::new("d/a"), Path::new("../../x")));
        assert!(escapes(Path::new("d/a"), Path::new("x/../../../y")));
        assert!(!escapes(Path::new("d/a"), Path::new("../x")));
        assert!(!escapes(Path::new("a"), Path::new("b/c")));
        assert!(!escapes(Path::new("a"), Path::new("./b")));
    }

    #[test]
    fn numstat_paths_are_read_with_renames() {
        let out = b"1\t0\tTASK-1.txt\0-\t-\tbin.dat\x000\t0\t\0old\0new\0";
        assert_eq!(patch_paths(out), ["TASK-1.txt", "bin.dat", "old", "new"]);
    }

    #[test]
    fn escaping_links_in_the_tree_are_found_and_inner_ones_pass() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", d.path().join("out")).unwrap();
        std::os::unix::fs::symlink("../../x", d.path().join("sub/up")).unwrap();
        std::os::unix::fs::symlink("../README", d.path().join("sub/in")).unwrap();
        std::fs::write(d.path().join("plain"), "x").unwrap();
        let bad = escaping_symlinks(
            d.path(),
            &[
                "out".into(),
                "sub/up".into(),
                "sub/in".into(),
                "plain".into(),
                "gone".into(),
            ],
        );
        let names: Vec<&str> = bad.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(names, ["out", "sub/up"]);
        assert!(describe(&bad).contains("out -> /etc/hostname"));
    }
}
