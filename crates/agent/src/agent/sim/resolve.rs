//! The sim's `resolve` step: the conflict markers git left in a file
//! replaced by one side, or both in order (pure), as an agent resolving a
//! rebase round would.

/// Which side of each conflict a `resolve` step keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Keep {
    /// The lines between `<<<<<<<` and `=======` (the task's own).
    Ours,
    /// The lines between `=======` and `>>>>>>>` (what was merged in).
    Theirs,
    /// Ours, then theirs.
    Both,
}

/// `text` with every conflict resolved as `keep` says; a `|||||||` base
/// section (diff3 style) is dropped. Lines outside conflicts are kept as
/// they are, byte for byte.
pub fn resolve(text: &[u8], keep: Keep) -> Vec<u8> {
    #[derive(PartialEq)]
    enum At {
        Outside,
        Ours,
        Base,
        Theirs,
    }
    let mut at = At::Outside;
    let mut out = Vec::with_capacity(text.len());
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for line in text.split_inclusive(|b| *b == b'\n') {
        let marker = |m: &[u8]| line.starts_with(m);
        match at {
            At::Outside if marker(b"<<<<<<<") => at = At::Ours,
            At::Outside => out.extend_from_slice(line),
            At::Ours | At::Base if marker(b"=======") => at = At::Theirs,
            At::Ours if marker(b"|||||||") => at = At::Base,
            At::Ours => ours.extend_from_slice(line),
            At::Base => {}
            At::Theirs if marker(b">>>>>>>") => {
                if keep != Keep::Theirs {
                    out.append(&mut ours);
                }
                if keep != Keep::Ours {
                    out.append(&mut theirs);
                }
                ours.clear();
                theirs.clear();
                at = At::Outside;
            }
            At::Theirs => theirs.extend_from_slice(line),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_side_or_both_and_the_rest_byte_for_byte() {
        let t = b"top\n<<<<<<< HEAD\nmine\n||||||| base\nold\n=======\nyours\n>>>>>>> drover/integration/loop1\ncaf\xe9\n";
        assert_eq!(resolve(t, Keep::Ours), b"top\nmine\ncaf\xe9\n");
        assert_eq!(resolve(t, Keep::Theirs), b"top\nyours\ncaf\xe9\n");
        assert_eq!(resolve(t, Keep::Both), b"top\nmine\nyours\ncaf\xe9\n");
        assert_eq!(resolve(b"no conflict\n", Keep::Both), b"no conflict\n");
    }
}
