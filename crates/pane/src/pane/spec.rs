use super::{PANE_MARKER_ENV, PaneError};
use std::path::{Path, PathBuf};

/// Default pane size: wide enough for every agent footer.
pub const DEFAULT_COLS: u16 = 120;
/// Default pane height.
pub const DEFAULT_ROWS: u16 = 40;
const MAX_DIM: u16 = 1000;

/// Everything needed to (re)start a pane: the protocol's spec, which
/// `pane.new` carries as it is.
pub use crate::proto::PaneSpec;

/// What the pane layer knows about a [`PaneSpec`] (the type is the
/// protocol crate's, so its checks live in this extension trait).
pub trait PaneSpecExt {
    /// The `PATH` the pane's command is looked up in: the spec's own (the
    /// last one given), else the supervisor's.
    fn path_var(&self) -> String;
    /// Check everything that can be checked before spawning.
    fn validate(&self) -> Result<(), PaneError>;
    /// The env names declared for the child (never the values).
    fn env_names(&self) -> Vec<String>;
}

impl PaneSpecExt for PaneSpec {
    /// The `PATH` the pane's command is looked up in: the spec's own (the
    /// last one given), else the supervisor's.
    fn path_var(&self) -> String {
        self.env
            .iter()
            .rev()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.clone())
            .or_else(|| std::env::var("PATH").ok())
            .unwrap_or_default()
    }

    /// Check everything that can be checked before spawning.
    fn validate(&self) -> Result<(), PaneError> {
        validate_pane_name(&self.name)?;
        for (k, v) in &self.env {
            validate_env_name(k)?;
            if k == PANE_MARKER_ENV {
                return Err(PaneError::ReservedEnv(k.clone()));
            }
            if v.contains('\0') {
                return Err(PaneError::InvalidEnvValue(k.clone()));
            }
        }
        if self.cols == 0 || self.rows == 0 || self.cols > MAX_DIM || self.rows > MAX_DIM {
            return Err(PaneError::InvalidSize(format!(
                "{}x{}",
                self.cols, self.rows
            )));
        }
        if self.agent != "shell" && (self.cols < 80 || self.rows < 24) {
            return Err(PaneError::TooSmallForAgent {
                cols: self.cols,
                rows: self.rows,
            });
        }
        let Some(cmd) = self.argv.first() else {
            return Err(PaneError::NoCommand);
        };
        if let Some(cwd) = &self.cwd
            && !cwd.is_dir()
        {
            return Err(PaneError::MissingCwd(cwd.clone()));
        }
        if find_executable(cmd, &self.path_var(), self.cwd.as_deref()).is_none() {
            return Err(PaneError::CommandNotFound(cmd.clone()));
        }
        Ok(())
    }

    /// The env names declared for the child (never the values).
    fn env_names(&self) -> Vec<String> {
        self.env.iter().map(|(k, _)| k.clone()).collect()
    }
}

/// Parse `COLSxROWS`.
pub fn parse_size(s: &str) -> Result<(u16, u16), PaneError> {
    let bad = || PaneError::InvalidSize(s.to_string());
    let (c, r) = s.split_once(['x', 'X']).ok_or_else(bad)?;
    let cols: u16 = c.trim().parse().map_err(|_| bad())?;
    let rows: u16 = r.trim().parse().map_err(|_| bad())?;
    if cols == 0 || rows == 0 || cols > MAX_DIM || rows > MAX_DIM {
        return Err(bad());
    }
    Ok((cols, rows))
}

/// A pane name: `[A-Za-z0-9._-]{1,64}`, and not `.` or `..`.
pub fn validate_pane_name(name: &str) -> Result<(), PaneError> {
    let ok = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        && name != "."
        && name != "..";
    if ok {
        Ok(())
    } else {
        Err(PaneError::InvalidName(name.to_string()))
    }
}

/// An env name: `[A-Za-z_][A-Za-z0-9_]*`.
pub fn validate_env_name(name: &str) -> Result<(), PaneError> {
    let mut bytes = name.bytes();
    let ok = matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(PaneError::InvalidEnvName(name.to_string()))
    }
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Find `cmd` the way exec would: as a path when it has a slash, else on PATH.
pub fn find_executable(cmd: &str, path_var: &str, cwd: Option<&Path>) -> Option<PathBuf> {
    if cmd.is_empty() || cmd.contains('\0') {
        return None;
    }
    if cmd.contains('/') {
        let p = Path::new(cmd);
        let p = match (p.is_relative(), cwd) {
            (true, Some(c)) => c.join(p),
            _ => p.to_path_buf(),
        };
        return is_executable(&p).then_some(p);
    }
    path_var
        .split(':')
        .filter(|d| !d.is_empty())
        .map(|d| Path::new(d).join(cmd))
        .find(|p| is_executable(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> PaneSpec {
        PaneSpec {
            name: "p1".into(),
            argv: vec!["sh".into()],
            env: vec![],
            cwd: None,
            cols: 120,
            rows: 40,
            agent: "shell".into(),
        }
    }

    #[test]
    fn names() {
        for ok in ["a", "lane-1.claude_x", &"x".repeat(64)] {
            validate_pane_name(ok).unwrap();
        }
        for bad in ["", "..", ".", "a b", "a/b", "ä", &"x".repeat(65), "a\nb"] {
            assert!(validate_pane_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn env_names() {
        validate_env_name("_A1").unwrap();
        for bad in ["1X", "", "A-B", "A=B", "=V"] {
            assert!(validate_env_name(bad).is_err(), "{bad:?}");
        }
    }

    /// Regression: a declared `DROVER_PANE` (an environment copied from a
    /// pane's process to resume it) overrode the marker on native panes, so
    /// kill no longer found the pane's strays, and failed the env check on
    /// tmux, where the marker is set last.
    #[test]
    fn the_pane_marker_cannot_be_declared() {
        let mut s = spec();
        s.env = vec![(PANE_MARKER_ENV.into(), "p1:1:0".into())];
        let e = s.validate().unwrap_err();
        assert!(matches!(e, PaneError::ReservedEnv(ref k) if k == PANE_MARKER_ENV));
        assert!(!e.to_string().contains("p1:1:0"), "{e}");
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("80x24").unwrap(), (80, 24));
        for bad in ["0x0", "80", "x24", "80x0", "-1x5", "99999x5"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn validation_errors_are_specific() {
        let mut s = spec();
        s.argv = vec!["definitely-not-a-command-xyz".into()];
        assert!(matches!(s.validate(), Err(PaneError::CommandNotFound(_))));
        let mut s = spec();
        s.cwd = Some("/nonexistent/dir".into());
        assert!(matches!(s.validate(), Err(PaneError::MissingCwd(_))));
        let mut s = spec();
        s.agent = "claude".into();
        s.cols = 40;
        assert!(matches!(
            s.validate(),
            Err(PaneError::TooSmallForAgent { .. })
        ));
        let mut s = spec();
        s.argv.clear();
        assert!(matches!(s.validate(), Err(PaneError::NoCommand)));
        spec().validate().unwrap();
    }
}
