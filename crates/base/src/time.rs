//! Times in drover's files: RFC 3339 in UTC with a `Z`, each file at the
//! precision it has always been written with. A field holds a
//! `DateTime<Utc>` and names its form with `#[serde(with = "…")]`:
//! [`millis`] (`2026-12-05T10:00:00.123Z`: jobs, the mirror) or [`secs`]
//! (`2026-12-05T10:00:00Z`: leases, a loop run's clock). Reading takes any
//! RFC 3339 time, so a file written with another offset or precision loads.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Deserializer, Serializer};

/// A time as [`millis`] writes it.
pub fn format_millis(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// A time as [`secs`] writes it.
pub fn format_secs(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// `t` as a [`millis`] field keeps it: what is written and read back
/// equals what was kept in memory.
pub fn to_millis(t: DateTime<Utc>) -> DateTime<Utc> {
    use chrono::SubsecRound;
    t.trunc_subsecs(3)
}

/// `t` as a [`secs`] field keeps it.
pub fn to_secs(t: DateTime<Utc>) -> DateTime<Utc> {
    use chrono::SubsecRound;
    t.trunc_subsecs(0)
}

/// Parse an RFC 3339 time, in UTC.
pub fn parse(s: &str) -> Result<DateTime<Utc>, chrono::ParseError> {
    DateTime::parse_from_rfc3339(s).map(|t| t.with_timezone(&Utc))
}

fn read<'de, D: Deserializer<'de>>(d: D) -> Result<DateTime<Utc>, D::Error> {
    let s = String::deserialize(d)?;
    parse(&s).map_err(|e| serde::de::Error::custom(format!("{s:?} is not an RFC 3339 time: {e}")))
}

/// RFC 3339 with milliseconds.
pub mod millis {
    use super::*;

    pub fn serialize<S: Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format_millis(*t))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DateTime<Utc>, D::Error> {
        read(d)
    }
}

/// RFC 3339 to the second.
pub mod secs {
    use super::*;

    pub fn serialize<S: Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format_secs(*t))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DateTime<Utc>, D::Error> {
        read(d)
    }
}

/// An optional time to the second (`null` when absent).
pub mod opt_secs {
    use super::*;

    pub fn serialize<S: Serializer>(t: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
        match t {
            Some(t) => s.serialize_some(&format_secs(*t)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<DateTime<Utc>>, D::Error> {
        match Option::<String>::deserialize(d)? {
            Some(s) => parse(&s).map(Some).map_err(|e| {
                serde::de::Error::custom(format!("{s:?} is not an RFC 3339 time: {e}"))
            }),
            None => Ok(None),
        }
    }
}

/// An optional time with milliseconds (`null` when absent) in a field that
/// only says when a file was last written: text that is no time reads as
/// absent, as nothing decides on it (the next write puts the time in).
pub mod opt_millis_note {
    use super::*;

    pub fn serialize<S: Serializer>(t: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
        match t {
            Some(t) => s.serialize_some(&format_millis(*t)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<DateTime<Utc>>, D::Error> {
        Ok(Option::<String>::deserialize(d)?.and_then(|s| parse(&s).ok()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize)]
    struct Both {
        #[serde(with = "millis")]
        ms: DateTime<Utc>,
        #[serde(with = "secs")]
        s: DateTime<Utc>,
        #[serde(with = "opt_secs")]
        o: Option<DateTime<Utc>>,
    }

    /// What today's writers write reads back and is written byte for byte.
    #[test]
    fn written_forms_round_trip_byte_for_byte() {
        for doc in [
            r#"{"ms":"2026-12-05T10:00:00.000Z","s":"2026-12-05T10:00:00Z","o":null}"#,
            r#"{"ms":"2026-12-05T23:59:59.999Z","s":"2026-01-01T00:00:01Z","o":"2026-12-06T00:00:00Z"}"#,
        ] {
            let b: Both = serde_json::from_str(doc).unwrap_or_else(|e| panic!("{doc}: {e}"));
            assert_eq!(serde_json::to_string(&b).unwrap_or_default(), doc);
        }
    }

    /// Another offset reads as the same instant; a non-time is a clear error.
    #[test]
    fn other_offsets_read_and_bad_text_is_refused() {
        let doc =
            r#"{"ms":"2026-12-05T11:00:00.5+01:00","s":"2026-12-05T10:00:00+00:00","o":null}"#;
        let b: Both = serde_json::from_str(doc).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(format_millis(b.ms), "2026-12-05T10:00:00.500Z");
        assert_eq!(format_secs(b.s), "2026-12-05T10:00:00Z");
        let bad = serde_json::from_str::<Both>(r#"{"ms":"","s":"x","o":null}"#);
        let e = bad.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("is not an RFC 3339 time"), "{e}");
    }
}
