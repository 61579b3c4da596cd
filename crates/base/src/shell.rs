//! Quoting for a POSIX shell: the one way drover writes a word into a
//! command line that `sh` (or a user's interactive shell) will read.

/// Bytes that stand for themselves in every shell drover's lines reach
/// (`sh`, bash, zsh, fish) at any place in a word. Left out on purpose:
/// `=` (an assignment in command position, `=cmd` expansion in zsh), `~`
/// (home expansion), `%` (a job spec), `!`, globs, braces and every
/// quoting or expansion character.
fn plain(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"_-./:@+,".contains(&b)
}

/// `s` as one shell word: as is when every byte is plain, otherwise in
/// single quotes with each `'` written as `'\''`. The empty string is `''`,
/// so it stays a word.
pub fn quote(s: &str) -> String {
    if !s.is_empty() && s.bytes().all(plain) {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    out.push_str(&s.replace('\'', r"'\''"));
    out.push('\'');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::process::Command;

    fn through_sh(s: &str) -> Vec<u8> {
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("printf %s {}", quote(s)))
            .output()
            .unwrap();
        assert!(out.status.success(), "sh failed on {s:?}");
        out.stdout
    }

    #[test]
    fn plain_words_stay_bare_and_the_rest_is_single_quoted() {
        assert_eq!(quote("/srv/wt/T-1"), "/srv/wt/T-1");
        assert_eq!(quote("a+b@c:d,e_f.g"), "a+b@c:d,e_f.g");
        assert_eq!(quote("/srv/my wt/it's"), r"'/srv/my wt/it'\''s'");
        assert_eq!(quote("FOO=bar"), "'FOO=bar'");
        assert_eq!(quote("~"), "'~'");
        assert_eq!(quote("$HOME"), "'$HOME'");
        assert_eq!(quote("a*"), "'a*'");
    }

    #[test]
    fn the_empty_string_is_a_word() {
        assert_eq!(quote(""), "''");
        assert_eq!(through_sh(""), b"");
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("set -- {}; echo $#", quote("")))
            .output()
            .unwrap();
        assert_eq!(out.stdout, b"1\n");
    }

    #[test]
    fn hostile_words_come_back_as_given() {
        for s in [
            "'", "''", "a'b", "\n", "\\", "$(id)", "`id`", "-n", "%s", "é ü",
        ] {
            assert_eq!(through_sh(s), s.as_bytes(), "{s:?}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Whatever the string (no NUL: an argv cannot carry one), the
        /// shell reads back exactly it.
        #[test]
        fn sh_reads_back_what_was_quoted(s in "[^\u{0}]{0,40}") {
            prop_assert_eq!(through_sh(&s), s.as_bytes().to_vec());
        }
    }
}
