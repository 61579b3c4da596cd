//! A lease's expiry as `leases.json` holds it (see [`Expiry`]).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// When a lease runs out, as `leases.json` holds it: RFC 3339 to the
/// second (`2026-12-06T10:00:00Z`, [`crate::time::secs`]). Any RFC 3339
/// time reads. Text that is no time is kept as it was read, so writing the
/// file back loses nothing, and it reads as already past: a lease whose
/// expiry cannot be read is expired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expiry {
    At(DateTime<Utc>),
    Unreadable(String),
}

impl Expiry {
    /// `t`, to the second (as it is written).
    pub fn at(t: DateTime<Utc>) -> Expiry {
        Expiry::At(crate::time::to_secs(t))
    }

    /// The time, when it reads.
    pub fn time(&self) -> Option<DateTime<Utc>> {
        match self {
            Expiry::At(t) => Some(*t),
            Expiry::Unreadable(_) => None,
        }
    }

    /// Whether `now` is at or past it (always, when it does not read).
    pub fn is_past(&self, now: DateTime<Utc>) -> bool {
        self.time().is_none_or(|t| now >= t)
    }
}

impl std::fmt::Display for Expiry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Expiry::At(t) => f.write_str(&crate::time::format_secs(*t)),
            Expiry::Unreadable(text) => f.write_str(text),
        }
    }
}

impl Serialize for Expiry {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Expiry {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Expiry, D::Error> {
        let text = String::deserialize(d)?;
        Ok(match crate::time::parse(&text) {
            Ok(t) => Expiry::At(t),
            Err(_) => Expiry::Unreadable(text),
        })
    }
}
