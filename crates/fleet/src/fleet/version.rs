//! The NATS server's version, from the INFO the client received when it
//! connected: the oldest one the fleet works on, and the refusal of an
//! older one (docs/fleet.md, "Which nats-server").

use super::FleetError;

/// The oldest nats-server the fleet works on. Its presence bucket and
/// object stores are made with direct get (`allow_direct`), which 2.9.0
/// added; every flow (join, `ls`, `fleet work`, `events --follow --fleet`,
/// `loop run --fleet`) was run on 2.9.10, Debian bookworm's package.
pub const OLDEST: (u32, u32, u32) = (2, 9, 0);

/// What an older server lacks, said when one is refused.
pub const WHY: &str =
    "the fleet's presence bucket and object stores are read with direct get, which 2.9.0 added";

/// `major.minor.patch` of a server's version string (`2.9.10`,
/// `2.11.0-RC.1`); None when it is not one.
pub fn parse(version: &str) -> Option<(u32, u32, u32)> {
    let core = version.trim().trim_start_matches('v');
    let core = core.split(['-', '+']).next()?;
    let mut parts = core.split('.').map(|p| p.parse::<u32>().ok());
    let major = parts.next()??;
    let minor = parts.next()??;
    let patch = parts.next().flatten().unwrap_or(0);
    Some((major, minor, patch))
}

/// Refuse a server older than [`OLDEST`]. A version that cannot be read is
/// let through: the server is asked nothing more on its word.
pub fn check(url: &str, version: &str) -> Result<(), FleetError> {
    match parse(version) {
        Some(v) if v < OLDEST => Err(FleetError::OldServer {
            url: url.to_string(),
            version: version.trim().to_string(),
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_as_the_server_sends_them() {
        assert_eq!(parse("2.9.10"), Some((2, 9, 10)));
        assert_eq!(parse("2.11.0-RC.1"), Some((2, 11, 0)));
        assert_eq!(parse("v2.10.25"), Some((2, 10, 25)));
        assert_eq!(parse("2.12"), Some((2, 12, 0)));
        assert_eq!(parse("dev"), None);
        assert_eq!(parse(""), None);
    }

    #[test]
    fn a_server_older_than_2_9_is_refused_saying_what_it_lacks() {
        for ok in ["2.9.0", "2.9.10", "2.10.25", "2.15.1", "3.0.0", "unknown"] {
            assert!(check("nats://h:4222", ok).is_ok(), "{ok}");
        }
        for old in ["2.8.4", "2.2.0", "1.4.1"] {
            let e = check("nats://h:4222", old).unwrap_err();
            let text = e.to_string();
            assert!(text.contains(old) && text.contains("2.9.0"), "{text}");
            assert!(text.contains("direct get"), "{text}");
            assert_eq!(e.exit_code(), crate::exit::REFUSED);
        }
    }
}
