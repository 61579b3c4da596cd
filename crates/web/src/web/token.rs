//! `drover web`'s token: 32 random bytes as hex in `<state>/web/token`
//! (dir 0700, file 0600, written atomically), kept across restarts until
//! `--new-token` replaces it. Its id in the audit log is the first 8 hex
//! digits of its SHA-256; the token itself is never logged.

use crate::statedir::StateDir;
use crate::store::StoreError;
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::Path;

/// The token's length in hex digits.
const HEX_LEN: usize = 64;

/// A web token. Its `Debug` shows only its id.
#[derive(Clone)]
pub struct Token {
    hex: String,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Token({})", self.id())
    }
}

fn random_hex() -> Result<String, StoreError> {
    let path = Path::new("/dev/urandom");
    let mut buf = [0u8; 32];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut buf))
        .map_err(|e| StoreError::io("read", path, e))?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

fn well_formed(s: &str) -> bool {
    s.len() == HEX_LEN && s.bytes().all(|b| b.is_ascii_hexdigit())
}

impl Token {
    /// The token of `state_dir`, made (or replaced, with `new`) when needed.
    pub fn load_or_create(state_dir: &StateDir, new: bool) -> Result<Token, StoreError> {
        let sd = state_dir;
        let dir = sd.web_dir();
        crate::store::create_private_dir(&dir)?;
        crate::store::tighten_dir(&dir)?;
        let path = sd.web_token();
        if !new {
            match std::fs::read_to_string(&path) {
                Ok(s) if well_formed(s.trim()) => {
                    // A file left wider than 0600 is narrowed.
                    crate::store::open_private(&path, std::fs::OpenOptions::new().read(true))?;
                    return Ok(Token {
                        hex: s.trim().to_string(),
                    });
                }
                // Never replaced silently: a token someone edited by hand
                // (or a disk that lost it) is the operator's to look at.
                Ok(_) => {
                    return Err(StoreError::Corrupt {
                        path,
                        line: None,
                        message:
                            "not a token of 64 hex digits (`drover web --new-token` replaces it)"
                                .into(),
                    });
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(StoreError::io("read", &path, e)),
            }
        }
        let hex = random_hex()?;
        crate::store::write_bytes_atomic(&path, format!("{hex}\n").as_bytes())?;
        Ok(Token { hex })
    }

    /// The secret itself: for the URL printed once at start, nowhere else.
    pub fn secret(&self) -> &str {
        &self.hex
    }

    /// The token's id for the audit log: 8 hex digits of its SHA-256.
    pub fn id(&self) -> String {
        let d = Sha256::digest(self.hex.as_bytes());
        d.iter().take(4).map(|b| format!("{b:02x}")).collect()
    }

    /// Whether `given` is this token, in time that does not depend on where
    /// they differ.
    pub fn matches(&self, given: &str) -> bool {
        let (a, b) = (self.hex.as_bytes(), given.as_bytes());
        if a.len() != b.len() {
            return false;
        }
        a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_kept_until_replaced_and_compared_whole() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let t1 = Token::load_or_create(StateDir::new(tmp.path()), false)
            .unwrap_or_else(|e| panic!("{e}"));
        let t2 = Token::load_or_create(StateDir::new(tmp.path()), false)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(t1.secret(), t2.secret());
        assert!(well_formed(t1.secret()));
        assert_eq!(t1.id().len(), 8);
        assert!(t1.matches(t2.secret()));
        assert!(!t1.matches(&t1.secret()[1..]));
        let t3 = Token::load_or_create(StateDir::new(tmp.path()), true)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(!t3.matches(t1.secret()));
        assert!(!format!("{t3:?}").contains(t3.secret()));
    }

    /// Guards a malformed token file being replaced without a word: it is
    /// reported and kept; `--new-token` replaces it.
    #[test]
    fn a_malformed_token_is_reported_and_kept() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        Token::load_or_create(StateDir::new(tmp.path()), false).unwrap_or_else(|e| panic!("{e}"));
        let path = StateDir::new(tmp.path()).web_token();
        std::fs::write(&path, "not-a-token\n").unwrap_or_else(|e| panic!("{e}"));
        let e =
            Token::load_or_create(StateDir::new(tmp.path()), false).expect_err("a malformed token");
        let msg = e.to_string();
        assert!(
            msg.contains("corrupt") && msg.contains("--new-token"),
            "{msg}"
        );
        assert_eq!(
            std::fs::read_to_string(&path).unwrap_or_default(),
            "not-a-token\n"
        );
        let t = Token::load_or_create(StateDir::new(tmp.path()), true)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(well_formed(t.secret()));
    }
}
