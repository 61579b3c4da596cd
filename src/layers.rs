//! The layering of the library's top-level modules, kept by a test until
//! crates make the compiler keep it: the table under `## Layers` in
//! docs/architecture.md says which layer each module is in, and every
//! `crate::X` in a module's code (its tests included; comments are not
//! code) must name a module in a lower layer.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The layer of each module, from the `## Layers` table of `doc`.
fn layers(doc: &str) -> Result<BTreeMap<String, usize>, String> {
    let start = doc
        .find("\n## Layers\n")
        .ok_or("docs/architecture.md has no `## Layers` section")?;
    let section = &doc[start + 1..];
    let end = section[3..].find("\n## ").map_or(section.len(), |i| i + 3);
    let mut out = BTreeMap::new();
    for row in section[..end].lines().filter(|l| l.starts_with("| ")) {
        let mut cells = row.split('|').map(str::trim).filter(|c| !c.is_empty());
        let Some(Ok(layer)) = cells.next().map(str::parse::<usize>) else {
            continue;
        };
        for name in cells.flat_map(|c| c.split(',')) {
            let name = name.trim().trim_matches('`');
            if !name.is_empty() && out.insert(name.to_string(), layer).is_some() {
                return Err(format!("`{name}` is in the layers table twice"));
            }
        }
    }
    Ok(out)
}

/// The library's top-level modules under `src`, each with its files.
fn modules(src: &Path) -> std::io::Result<BTreeMap<String, Vec<PathBuf>>> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(src)? {
        let path = e?.path();
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        // The binary, the crate root and this check are not layered.
        if matches!(stem, "main" | "lib" | "cli" | "layers") {
            continue;
        }
        if path.is_dir() {
            let mut files = Vec::new();
            rs_files(&path, &mut files)?;
            out.insert(stem.to_string(), files);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.insert(stem.to_string(), vec![path.clone()]);
        }
    }
    Ok(out)
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let path = e?.path();
        if path.is_dir() {
            rs_files(&path, out)?;
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// The top-level modules `text` names as `crate::X` (or in
/// `crate::{X, Y}`), with the line of each, comments left out.
fn uses(text: &str) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    let code: Vec<&str> = text
        .lines()
        .map(|l| l.find("//").map_or(l, |i| &l[..i]))
        .collect();
    for (n, line) in code.iter().enumerate() {
        let mut rest = *line;
        while let Some(i) = rest.find("crate::") {
            // `crate::` only, not `some_crate::`.
            let before = rest[..i].chars().next_back();
            rest = &rest[i + "crate::".len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            if let Some(group) = rest.strip_prefix('{') {
                // A group may span lines: read up to its closing brace.
                let inner = std::iter::once(group)
                    .chain(code[n + 1..].iter().copied())
                    .collect::<Vec<_>>()
                    .join(" ");
                let mut depth = 0usize;
                let mut head = true;
                let mut word = String::new();
                for c in inner.chars() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => break,
                        '}' => depth -= 1,
                        ',' if depth == 0 => head = true,
                        c if head && (c.is_alphanumeric() || c == '_') => word.push(c),
                        _ if !word.is_empty() => {
                            out.push((std::mem::take(&mut word), n + 1));
                            head = false;
                        }
                        _ => {}
                    }
                }
                if !word.is_empty() {
                    out.push((word, n + 1));
                }
                continue;
            }
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.push((name, n + 1));
            }
        }
    }
    out
}

/// Every use that runs sideways or up a layer, and every module the table
/// leaves out, as one line each.
fn violations(root: &Path) -> Result<Vec<String>, String> {
    let doc = std::fs::read_to_string(root.join("docs/architecture.md"))
        .map_err(|e| format!("docs/architecture.md: {e}"))?;
    let layers = layers(&doc)?;
    let modules = modules(&root.join("src")).map_err(|e| format!("src: {e}"))?;
    let mut out = Vec::new();
    for (m, files) in &modules {
        let Some(&own) = layers.get(m) else {
            out.push(format!("`{m}` is in no layer of docs/architecture.md"));
            continue;
        };
        for f in files {
            let text = std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?;
            for (used, line) in uses(&text) {
                if used == *m || !modules.contains_key(&used) {
                    continue;
                }
                match layers.get(&used) {
                    Some(&l) if l < own => {}
                    Some(&l) => out.push(format!(
                        "{}:{line}: `{m}` (layer {own}) uses `{used}` (layer {l})",
                        f.strip_prefix(root).unwrap_or(f).display()
                    )),
                    None => {}
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_module_uses_one_beside_or_above_it() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let bad = violations(root).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            bad.is_empty(),
            "imports against the layers of docs/architecture.md:\n{}",
            bad.join("\n")
        );
    }

    #[test]
    fn uses_are_read_from_code_only() {
        let text = "use crate::store::x;\n// crate::daemon is a comment\n\
                    let a = crate::{paths::y,\n  engine::{A, B}};\nmy_crate::top::z();\n\
                    /// [`crate::loopctl`]\nf(crate::git::Git::new(p));\n";
        let got: Vec<String> = uses(text).into_iter().map(|(m, _)| m).collect();
        assert_eq!(got, ["store", "paths", "engine", "git"]);
    }

    #[test]
    fn the_table_is_read_and_a_module_twice_is_refused() {
        let doc = "x\n## Layers\n\n| layer | modules |\n|---|---|\n| 0 | `a`, `b` |\n\
                   | 1 | `c` |\n\n## Next\n| 2 | `d` |\n";
        let l = layers(doc).unwrap();
        assert_eq!(l.len(), 3);
        assert_eq!((l["a"], l["b"], l["c"]), (0, 0, 1));
        let twice = "## Layers\n| 0 | `a` |\n| 1 | `a` |\n";
        assert!(layers(&format!("\n{twice}")).is_err());
    }
}
