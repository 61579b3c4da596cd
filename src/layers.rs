//! The layering of the library's modules: the table under `## Layers` in
//! docs/architecture.md says which layer and which crate each module is in.
//! Between crates the compiler keeps the order (a crate names only the
//! crates it depends on); this test keeps it inside a crate that holds
//! modules of several layers, and across the re-exports a crate's root makes
//! (`pub use drover_base::store;` lets `crate::store` reach down): every
//! `crate::X` in a module's code (its tests included; comments are not code)
//! must name a module in a lower layer, and every module sits in the crate
//! the table names.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where the table puts a module: its layer and its crate.
#[derive(Debug, Clone, PartialEq)]
struct Place {
    layer: usize,
    krate: String,
}

/// The layer and crate of each module, from the `## Layers` table of `doc`
/// (rows `| layer | crate | modules |`).
fn layers(doc: &str) -> Result<BTreeMap<String, Place>, String> {
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
        let krate = cells
            .next()
            .unwrap_or_default()
            .trim_matches('`')
            .to_string();
        for name in cells.flat_map(|c| c.split(',')) {
            let name = name.trim().trim_matches('`');
            let place = Place {
                layer,
                krate: krate.clone(),
            };
            if !name.is_empty() && out.insert(name.to_string(), place).is_some() {
                return Err(format!("`{name}` is in the layers table twice"));
            }
        }
    }
    Ok(out)
}

/// The library's modules: those of each crate under `crates/` and any still
/// in the `drover` package's `src`, each with its crate and files.
fn modules(root: &Path) -> Result<BTreeMap<String, (String, Vec<PathBuf>)>, String> {
    let mut dirs = vec![("drover".to_string(), root.join("src"))];
    let crates = root.join("crates");
    let entries = std::fs::read_dir(&crates).map_err(|e| format!("crates: {e}"))?;
    for e in entries {
        let dir = e.map_err(|e| format!("crates: {e}"))?.path();
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml"))
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        let name = manifest
            .lines()
            .find_map(|l| l.strip_prefix("name = "))
            .map(|n| n.trim().trim_matches('"').to_string())
            .ok_or_else(|| format!("{}/Cargo.toml names no package", dir.display()))?;
        dirs.push((name, dir.join("src")));
    }
    let mut out = BTreeMap::new();
    for (krate, src) in dirs {
        let found = modules_in(&src).map_err(|e| format!("{}: {e}", src.display()))?;
        for (m, files) in found {
            if let Some((other, _)) = out.insert(m.clone(), (krate.clone(), files)) {
                return Err(format!("`{m}` is a module of both {other} and {krate}"));
            }
        }
    }
    Ok(out)
}

/// The top-level modules under one `src`, each with its files.
fn modules_in(src: &Path) -> std::io::Result<BTreeMap<String, Vec<PathBuf>>> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(src)? {
        let path = e?.path();
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        // The binary, the crate roots and this check are not layered.
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

/// Every use that runs sideways or up a layer, every module the table
/// leaves out or puts in another crate, as one line each.
fn violations(root: &Path) -> Result<Vec<String>, String> {
    let doc = std::fs::read_to_string(root.join("docs/architecture.md"))
        .map_err(|e| format!("docs/architecture.md: {e}"))?;
    let layers = layers(&doc)?;
    let modules = modules(root)?;
    let mut out = Vec::new();
    for (m, (krate, files)) in &modules {
        let Some(place) = layers.get(m) else {
            out.push(format!("`{m}` is in no layer of docs/architecture.md"));
            continue;
        };
        if place.krate != *krate {
            out.push(format!(
                "`{m}` is in {krate}, the layers table says {}",
                place.krate
            ));
        }
        let own = place.layer;
        for f in files {
            let text = std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?;
            for (used, line) in uses(&text) {
                if used == *m || !modules.contains_key(&used) {
                    continue;
                }
                match layers.get(&used) {
                    Some(p) if p.layer < own => {}
                    Some(p) => out.push(format!(
                        "{}:{line}: `{m}` (layer {own}) uses `{used}` (layer {})",
                        f.strip_prefix(root).unwrap_or(f).display(),
                        p.layer
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
        let doc = "x\n## Layers\n\n| layer | crate | modules |\n|---|---|---|\n\
                   | 0 | `k-a` | `a`, `b` |\n| 1 | `k-c` | `c` |\n\n## Next\n| 2 | `k` | `d` |\n";
        let l = layers(doc).unwrap();
        assert_eq!(l.len(), 3);
        let at = |m: &str| (l[m].layer, l[m].krate.as_str());
        assert_eq!(
            (at("a"), at("b"), at("c")),
            ((0, "k-a"), (0, "k-a"), (1, "k-c"))
        );
        let twice = "## Layers\n| 0 | `k` | `a` |\n| 1 | `k` | `a` |\n";
        assert!(layers(&format!("\n{twice}")).is_err());
    }

    /// A module in another crate than the table says, one the table leaves
    /// out, and a use up a layer inside a crate are each reported.
    #[test]
    fn a_misplaced_module_and_an_upward_use_are_reported() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        let w = |p: &str, s: &str| {
            let p = r.join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, s).unwrap();
        };
        w(
            "docs/architecture.md",
            "\n## Layers\n| 0 | `k-low` | `low` |\n| 1 | `k-up` | `up` |\n| 2 | `k-x` | `moved` |\n",
        );
        w("src/lib.rs", "");
        w("crates/a/Cargo.toml", "[package]\nname = \"k-low\"\n");
        w("crates/a/src/lib.rs", "pub mod low;\npub mod up;\n");
        w("crates/a/src/low.rs", "use crate::up::X; // crate::moved\n");
        w("crates/a/src/up.rs", "use crate::low::Y;\n");
        w("crates/a/src/stray.rs", "");
        w("crates/b/Cargo.toml", "[package]\nname = \"k-b\"\n");
        w("crates/b/src/moved/mod.rs", "");
        let mut got = violations(r).unwrap();
        got.sort();
        assert_eq!(
            got,
            [
                "`moved` is in k-b, the layers table says k-x",
                "`stray` is in no layer of docs/architecture.md",
                "`up` is in k-low, the layers table says k-up",
                "crates/a/src/low.rs:1: `low` (layer 0) uses `up` (layer 1)",
            ]
        );
    }
}
