//! The programs a repository's own configuration could make git run.
//!
//! An agent can write its worktree's repository configuration (`.git/config`,
//! a worktree's `config.worktree`, anything they include). Filters
//! (`filter.<x>.clean`, `smudge`, `process`), merge drivers
//! (`merge.<x>.driver`) and signing programs (`gpg.program`,
//! `gpg.<format>.program`) set there would run on drover's `git add`,
//! `git apply --3way`, `git merge` or commit. For each such key set in the
//! repository's scope, drover's call overrides it with the value the
//! user's global or system configuration gives it (so a filter the user
//! installed, such as git-lfs's, keeps working), or, when they give none,
//! with a value that runs nothing of the repository's: an empty filter
//! (not required), git's own text merge, the default signing program.
//! Diff drivers need no override: every diff drover reads is
//! `--no-ext-diff --no-textconv`.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Stdio};

/// git's own three-way text merge, as a merge driver: the result in `%A`,
/// a non-zero exit on a conflict.
const TEXT_MERGE: &str = "git merge-file --marker-size=%L %A %O %B";

/// The replacement for a repository-defined `key` none of the user's
/// configuration sets, or `None` for a key left alone.
fn neutral(key: &str) -> Option<&'static str> {
    let lower = key.to_ascii_lowercase();
    let (section, rest) = lower.split_once('.')?;
    let var = rest.rsplit('.').next().unwrap_or(rest);
    let sub = rest.contains('.');
    match (section, sub, var) {
        ("filter", true, "clean" | "smudge" | "process") => Some(""),
        ("filter", true, "required") => Some("false"),
        ("merge", true, "driver") => Some(TEXT_MERGE),
        ("gpg", false, "program") => Some("gpg"),
        ("gpg", true, "program") => Some(match rest.split('.').next() {
            Some("x509") => "gpgsm",
            Some("ssh") => "ssh-keygen",
            _ => "gpg",
        }),
        _ => None,
    }
}

/// The keys (as git prints them) each scope sets, from
/// `git config --show-scope -z --get-regexp`.
fn read(dir: &Path, env: &[(String, OsString)]) -> Vec<(String, String, String)> {
    let mut c = Command::new("git");
    c.arg("-C").arg(dir).args([
        "config",
        "--show-scope",
        "-z",
        "--get-regexp",
        r"^(filter\..*\.(clean|smudge|process|required)|merge\..*\.driver|gpg\.(.*\.)?program)$",
    ]);
    for (k, _) in std::env::vars_os() {
        if let Some(k) = k.to_str()
            && k.starts_with("GIT_")
            && !super::KEPT_ENV.contains(&k)
        {
            c.env_remove(k);
        }
    }
    for (k, v) in env {
        c.env(k, v);
    }
    let Ok(out) = c
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .env("LC_ALL", "C")
        .output()
    else {
        return Vec::new();
    };
    // Exit 1: none set; any other failure (not a repository): nothing to drop.
    let text = String::from_utf8_lossy(&out.stdout);
    let mut fields = text.split('\0');
    let mut rows = Vec::new();
    while let (Some(scope), Some(kv)) = (fields.next(), fields.next()) {
        let (k, v) = kv.split_once('\n').unwrap_or((kv, ""));
        rows.push((scope.to_string(), k.to_string(), v.to_string()));
    }
    rows
}

/// The `key=value` overrides for `dir`'s repository-defined programs.
/// `env`: the call's own variables (a `GIT_CONFIG_GLOBAL` it sets).
pub fn overrides(dir: &Path, env: &[(String, OsString)]) -> Vec<String> {
    let rows = read(dir, env);
    let trusted = |scope: &str| scope == "global" || scope == "system";
    // The user's own value per key: the last one git reads wins.
    let mut user: BTreeMap<String, String> = BTreeMap::new();
    for (scope, k, v) in &rows {
        if trusted(scope) {
            user.insert(k.clone(), v.clone());
        }
    }
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    for (scope, k, _) in &rows {
        if trusted(scope) {
            continue;
        }
        let Some(neutral) = neutral(k) else { continue };
        let v = user.get(k).map(String::as_str).unwrap_or(neutral);
        out.insert(k.clone(), v.to_string());
    }
    out.into_iter().map(|(k, v)| format!("{k}={v}")).collect()
}

#[cfg(test)]
mod tests {
    use super::neutral;

    #[test]
    fn neutral_values_run_nothing_of_the_repository() {
        assert_eq!(neutral("filter.lfs.clean"), Some(""));
        assert_eq!(neutral("filter.a.b.process"), Some(""));
        assert_eq!(neutral("filter.x.required"), Some("false"));
        assert_eq!(neutral("merge.evil.driver"), Some(super::TEXT_MERGE));
        assert_eq!(neutral("gpg.program"), Some("gpg"));
        assert_eq!(neutral("gpg.ssh.program"), Some("ssh-keygen"));
        assert_eq!(neutral("gpg.x509.program"), Some("gpgsm"));
        assert_eq!(neutral("filter.clean"), None);
        assert_eq!(neutral("core.editor"), None);
    }
}
