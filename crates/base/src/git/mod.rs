//! The one way drover runs git. Every call goes through [`Git`], which:
//!
//! - scrubs the environment of every `GIT_*` variable but the few that say
//!   where the user's own configuration and git's programs live
//!   ([`KEPT_ENV`]): a hook's `GIT_DIR`, `GIT_INDEX_FILE`,
//!   `GIT_CONFIG_PARAMETERS`, `GIT_EXTERNAL_DIFF` … never reach drover's git;
//! - sets `LC_ALL=C`, stdin to null, `GIT_TERMINAL_PROMPT=0` and an editor
//!   that accepts (`true`), so git never asks;
//! - pins what a user's or a repository's configuration could change in what
//!   drover parses, applies or commits ([`PINNED`]), and switches off what
//!   would run a program from a repository an agent can write: the file
//!   system monitor, hooks (`core.hooksPath=/dev/null`, a path nothing can
//!   be put in), external diffs and textconv (`--no-ext-diff --no-textconv`
//!   on every diff, log and show), and the filters, merge drivers and
//!   signing programs a repository's own configuration defines
//!   (`untrusted`). Those the user's global or system configuration
//!   defines keep working (git-lfs).
//!
//! drover's own commits never sign unless asked ([`Git::sign`]).

mod untrusted;

#[cfg(any(test, feature = "test-support"))]
pub mod hostile;
#[cfg(test)]
pub(crate) mod tests;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A git command that could not run or failed.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("git not found on PATH: drover needs git; install it or fix PATH")]
    NotFound,
    #[error("cannot run git {args}: {source}")]
    Spawn {
        args: String,
        #[source]
        source: std::io::Error,
    },
    /// A non-zero exit; `message` is the first non-empty line of stderr.
    #[error("git {args} failed in {dir}: {message}")]
    Failed {
        args: String,
        dir: String,
        message: String,
    },
}

impl GitError {
    /// git's own message (the first line of its stderr), or this error's.
    pub fn message(&self) -> String {
        match self {
            GitError::Failed { message, .. } => message.clone(),
            other => other.to_string(),
        }
    }
}

/// The `GIT_*` variables a call keeps: where the user's own configuration
/// is and where git's programs are. Everything else `GIT_*` is removed.
pub const KEPT_ENV: [&str; 4] = [
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
    "GIT_CONFIG_NOSYSTEM",
    "GIT_EXEC_PATH",
];

/// What every call pins with `-c`: nothing here runs a program or changes
/// what drover reads from git's output.
pub const PINNED: &[&str] = &[
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.quotePath=true",
    "core.safecrlf=false",
    "core.pager=cat",
    "color.ui=never",
    "color.diff=never",
    "color.status=never",
    "color.branch=never",
    "color.decorate=never",
    "color.showBranch=never",
    "color.grep=never",
    "color.interactive=never",
    "color.advice=never",
    "diff.noprefix=false",
    "diff.mnemonicPrefix=false",
    "diff.relative=false",
    "diff.renames=true",
    "diff.algorithm=myers",
    "diff.context=3",
    "diff.interHunkContext=0",
    "diff.submodule=short",
    "diff.suppressBlankEmpty=false",
    "diff.ignoreSubmodules=none",
    "log.showSignature=false",
    "log.showRoot=true",
    "status.showUntrackedFiles=all",
    "status.relativePaths=false",
    "status.renames=false",
    "submodule.recurse=false",
    "commit.cleanup=default",
    "commit.verbose=false",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "merge.ff=true",
    "merge.verifySignatures=false",
    "merge.autoStash=false",
    "rebase.autoStash=false",
    "pull.rebase=false",
    "advice.detachedHead=false",
    "init.templateDir=",
    "apply.whitespace=nowarn",
];

/// The subcommands whose output is a diff drover may read: each gets
/// [`DIFF_FLAGS`] right after its name.
const DIFF_COMMANDS: [&str; 4] = ["diff", "log", "show", "format-patch"];

/// Subcommands that read refs and objects only: no filter, merge driver or
/// signing program can run in them, so the repository's own configuration
/// is not read for overrides (one `git config` call fewer each).
const READS_REFS_ONLY: [&str; 8] = [
    "rev-parse",
    "cat-file",
    "merge-base",
    "rev-list",
    "symbolic-ref",
    "for-each-ref",
    "update-ref",
    "--version",
];

/// Flags for every diff drover reads: no external diff, no textconv, no
/// colour, the prefixes `git apply` expects.
pub const DIFF_FLAGS: [&str; 5] = [
    "--no-ext-diff",
    "--no-textconv",
    "--no-color",
    "--src-prefix=a/",
    "--dst-prefix=b/",
];

/// The identity of drover's own commits when a caller gives none.
pub const IDENTITY_NAME: &str = "drover loop";
/// Its e-mail.
pub const IDENTITY_EMAIL: &str = "loop@drover.invalid";

/// One git command, built then run.
#[derive(Debug, Clone)]
pub struct Git {
    dir: PathBuf,
    args: Vec<OsString>,
    env: Vec<(String, OsString)>,
    config: Vec<String>,
    sign: bool,
}

impl Git {
    /// git in `dir` (`git -C dir`), hardened.
    pub fn new(dir: &Path) -> Git {
        Git {
            dir: dir.to_path_buf(),
            args: Vec::new(),
            env: Vec::new(),
            config: Vec::new(),
            sign: false,
        }
    }

    pub fn arg(mut self, a: impl Into<OsString>) -> Git {
        self.args.push(a.into());
        self
    }

    pub fn args<I, S>(mut self, args: I) -> Git
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// One more `-c key=value` (after the pinned ones, so it wins).
    pub fn config(mut self, kv: impl Into<String>) -> Git {
        self.config.push(kv.into());
        self
    }

    /// Commit as `name <email>` (author and committer).
    pub fn identity(self, name: &str, email: &str) -> Git {
        self.config(format!("user.name={name}"))
            .config(format!("user.email={email}"))
    }

    /// Commit as drover ([`IDENTITY_NAME`], [`IDENTITY_EMAIL`]).
    pub fn drover_identity(self) -> Git {
        self.identity(IDENTITY_NAME, IDENTITY_EMAIL)
    }

    /// Use `index` as the index (`GIT_INDEX_FILE`).
    pub fn index(mut self, index: &Path) -> Git {
        self.env
            .push(("GIT_INDEX_FILE".into(), index.as_os_str().to_owned()));
        self
    }

    /// Never take optional locks or write the index's refresh (a read an
    /// agent's sandbox can make).
    pub fn read_only(mut self) -> Git {
        self.env.push(("GIT_OPTIONAL_LOCKS".into(), "0".into()));
        self
    }

    /// Sign commits (and tags) with the user's own signing setup; never
    /// prompts (no terminal for a pinentry).
    pub fn sign(mut self, sign: bool) -> Git {
        self.sign = sign;
        self
    }

    fn words(&self) -> String {
        self.args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The [`Command`] this call runs (for a caller that needs its own
    /// stdio); prefer [`Git::output`].
    pub fn command(&self) -> Command {
        let mut c = Command::new("git");
        c.arg("--no-pager");
        c.arg("-C").arg(&self.dir);
        for kv in PINNED {
            c.arg("-c").arg(kv);
        }
        if self.sign {
            c.args(["-c", "commit.gpgSign=true", "-c", "tag.gpgSign=true"]);
        }
        let reads_refs_only = self
            .args
            .first()
            .is_some_and(|a| READS_REFS_ONLY.iter().any(|r| a == *r));
        if !reads_refs_only {
            for kv in untrusted::overrides(&self.dir, &self.env) {
                c.arg("-c").arg(kv);
            }
        }
        for kv in &self.config {
            c.arg("-c").arg(kv);
        }
        let mut args = self.args.iter();
        if let Some(sub) = args.next() {
            c.arg(sub);
            if DIFF_COMMANDS.iter().any(|d| sub == *d) {
                c.args(DIFF_FLAGS);
            }
        }
        c.args(args);
        scrub(&mut c);
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c.stdin(Stdio::null());
        c
    }

    /// Run it; a non-zero exit is not an error here.
    pub fn output(&self) -> Result<Output, GitError> {
        self.command().output().map_err(|e| self.spawn_err(e))
    }

    fn spawn_err(&self, e: std::io::Error) -> GitError {
        if e.kind() == std::io::ErrorKind::NotFound {
            GitError::NotFound
        } else {
            GitError::Spawn {
                args: self.words(),
                source: e,
            }
        }
    }

    /// Run it; a non-zero exit is [`GitError::Failed`] with git's first
    /// line of stderr. Returns stdout's bytes exactly.
    pub fn run(&self) -> Result<Vec<u8>, GitError> {
        let out = self.output()?;
        if out.status.success() {
            Ok(out.stdout)
        } else {
            Err(self.failed(&out))
        }
    }

    /// The error for a finished call that failed.
    pub fn failed(&self, out: &Output) -> GitError {
        GitError::Failed {
            args: self.words(),
            dir: self.dir.display().to_string(),
            message: first_line(&out.stderr),
        }
    }

    /// Run it for stdout as text (lossy).
    pub fn text(&self) -> Result<String, GitError> {
        Ok(String::from_utf8_lossy(&self.run()?).into_owned())
    }

    /// Run it for a trimmed one-line answer.
    pub fn line(&self) -> Result<String, GitError> {
        Ok(self.text()?.trim().to_string())
    }

    /// Whether it exits zero (a failure to start it is `false`).
    pub fn succeeds(&self) -> bool {
        self.command()
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    }
}

/// Remove every `GIT_*` variable but [`KEPT_ENV`], and set the ones that
/// keep git from asking or translating.
fn scrub(c: &mut Command) {
    for (k, _) in std::env::vars_os() {
        let Some(k) = k.to_str() else { continue };
        if k.starts_with("GIT_") && !KEPT_ENV.contains(&k) {
            c.env_remove(k);
        }
    }
    // A pinentry on a terminal would wait for a person.
    c.env_remove("GPG_TTY");
    c.env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_EDITOR", "true")
        .env("GIT_SEQUENCE_EDITOR", "true")
        .env("GIT_MERGE_AUTOEDIT", "no")
        .env("LC_ALL", "C")
        .env("LANGUAGE", "C");
}

/// The variables that point git at a repository, an index, objects or
/// configuration other than the directory it runs in.
pub const REPOSITORY_ENV: [&str; 12] = [
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
    "GIT_CONFIG",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_QUARANTINE_PATH",
];

/// For a command that is not drover's git but runs in a worktree (the
/// gate): none of [`REPOSITORY_ENV`] (nor `GIT_CONFIG_KEY_n`/`VALUE_n`)
/// reaches it, so its own git works on the worktree it runs in.
pub fn scrub_repository_env(c: &mut Command) {
    for v in REPOSITORY_ENV {
        c.env_remove(v);
    }
    for (k, _) in std::env::vars_os() {
        if let Some(k) = k.to_str()
            && (k.starts_with("GIT_CONFIG_KEY_") || k.starts_with("GIT_CONFIG_VALUE_"))
        {
            c.env_remove(k);
        }
    }
}

/// The first non-empty line of `bytes`, trimmed.
pub fn first_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .to_string()
}

/// Every non-empty line of `bytes`, joined (at most 400 characters): a
/// signing program's own words follow git's.
fn all_lines(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let joined = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    joined.chars().take(400).collect()
}

/// Whether signing works here: sign a throwaway commit object (the empty
/// tree, no parent, referenced by nothing) in `repo` with the user's own
/// setup, never prompting. `Err` carries the sentence to show.
pub fn check_signing(repo: &Path) -> Result<(), String> {
    let tree = Git::new(repo)
        .args(["hash-object", "-t", "tree", "-w", "--stdin"])
        .command()
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run git: {e}"))?;
    let tree = String::from_utf8_lossy(&tree.stdout).trim().to_string();
    if tree.is_empty() {
        return Err("cannot write an empty tree to test signing".into());
    }
    let g = Git::new(repo).drover_identity().sign(true).args([
        "commit-tree",
        "-S",
        "-m",
        "drover: a dry sign",
        &tree,
    ]);
    match g.output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!(
            "signing does not work here (a dry sign failed: {}); fix the signing key, program or agent, or run without --sign",
            all_lines(&o.stderr)
        )),
        Err(e) => Err(e.to_string()),
    }
}
