//! Names on the bus: every subject, stream and bucket of a fleet is scoped
//! `drover.<fleet>.…` (docs/fleet.md), and the permissions a host's NATS user needs
//! are derived here, from the same names, so the server config an operator
//! writes and the subjects drover uses cannot drift apart.

use super::FleetError;

/// Longest fleet or host id: a subject token, a stream name part and a KV key.
pub const MAX_ID_LEN: usize = 64;

/// A fleet or host id is `[A-Za-z0-9_-]{1,64}`: one subject token, valid in
/// stream and bucket names, never a wildcard.
pub fn check_id(what: &'static str, id: &str) -> Result<(), FleetError> {
    let ok = !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(FleetError::BadId {
            what,
            id: id.to_string(),
        })
    }
}

/// A hostname made into a host id: every byte outside `[A-Za-z0-9_-]` becomes
/// `-` (`box.example.org` → `box-example-org`), cut at [`MAX_ID_LEN`].
pub fn host_id_from(hostname: &str) -> String {
    let s: String = hostname
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .take(MAX_ID_LEN)
        .collect();
    if s.is_empty() { "host".into() } else { s }
}

/// The names of one fleet, and how many copies its streams are made with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    pub fleet: String,
    /// Replicas of each stream, bucket and object store this host makes.
    pub replicas: usize,
}

impl Names {
    /// The names of `fleet` (checked), its streams made with one copy.
    pub fn new(fleet: &str) -> Result<Self, FleetError> {
        check_id("fleet", fleet)?;
        Ok(Names {
            fleet: fleet.to_string(),
            replicas: 1,
        })
    }

    /// The names of a joined host's fleet, with the replicas it joined with.
    pub fn of(cfg: &super::FleetConfig) -> Result<Self, FleetError> {
        Ok(Names {
            replicas: cfg.replicas.max(1),
            ..Names::new(&cfg.fleet)?
        })
    }

    /// Where host `host` publishes its events.
    pub fn events_subject(&self, host: &str) -> String {
        format!("drover.{}.events.{host}", self.fleet)
    }

    /// Every host's events.
    pub fn events_wildcard(&self) -> String {
        format!("drover.{}.events.>", self.fleet)
    }

    /// The host an events subject names, if it is one of this fleet's.
    pub fn host_of<'a>(&self, subject: &'a str) -> Option<&'a str> {
        let rest = subject
            .strip_prefix("drover.")?
            .strip_prefix(self.fleet.as_str())?
            .strip_prefix(".events.")?;
        (!rest.is_empty() && !rest.contains('.')).then_some(rest)
    }

    /// The fleet's event stream.
    pub fn events_stream(&self) -> String {
        format!("drover-{}-events", self.fleet)
    }

    /// The fleet's presence bucket (one key per host).
    pub fn hosts_bucket(&self) -> String {
        format!("drover-{}-hosts", self.fleet)
    }

    /// The stream under the presence bucket.
    pub fn hosts_stream(&self) -> String {
        format!("KV_{}", self.hosts_bucket())
    }

    /// The subject a host's presence key is written on.
    pub fn presence_subject(&self, host: &str) -> String {
        format!("$KV.{}.{host}", self.hosts_bucket())
    }

    /// The inbox prefix of host `host`'s connections: replies to it come
    /// there, so no other host's user needs to subscribe to them.
    pub fn inbox_prefix(&self, host: &str) -> String {
        format!("_INBOX_drover_{}_{host}", self.fleet)
    }

    /// What host `host`'s NATS user may publish and subscribe to: its own
    /// event subject and presence key, the JetStream API calls drover makes
    /// on this fleet's two streams (info, create, ephemeral consumers, direct
    /// reads), and replies on its own inbox. Never another host's subjects,
    /// and no stream delete, purge or message delete.
    pub fn host_permissions(&self, host: &str) -> Permissions {
        let ev = self.events_stream();
        let kv = self.hosts_stream();
        let mut publish = vec![self.events_subject(host), self.presence_subject(host)];
        for s in [&ev, &kv] {
            publish.push(format!("$JS.API.STREAM.INFO.{s}"));
            publish.push(format!("$JS.API.STREAM.CREATE.{s}"));
        }
        publish.push(format!("$JS.API.STREAM.MSG.GET.{kv}"));
        publish.push(format!("$JS.API.DIRECT.GET.{kv}.>"));
        publish.push(format!("$JS.API.CONSUMER.CREATE.{ev}"));
        publish.push(format!("$JS.API.CONSUMER.CREATE.{ev}.>"));
        publish.push(format!("$JS.API.CONSUMER.DELETE.{ev}.>"));
        publish.push(format!("$JS.API.CONSUMER.INFO.{ev}.>"));
        publish.push(format!("$JS.FC.{ev}.>"));
        Permissions {
            publish,
            subscribe: vec![format!("{}.>", self.inbox_prefix(host))],
        }
    }
}

/// A NATS user's allow lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Permissions {
    pub publish: Vec<String>,
    pub subscribe: Vec<String>,
}

impl Permissions {
    /// The `permissions` block of a user in nats-server's config syntax.
    pub fn to_server_config(&self) -> String {
        let list = |v: &[String]| {
            v.iter()
                .map(|s| format!("\"{s}\""))
                .collect::<Vec<_>>()
                .join(", ")
        };
        format!(
            "permissions: {{ publish: {{ allow: [{}] }}, subscribe: {{ allow: [{}] }} }}",
            list(&self.publish),
            list(&self.subscribe)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_single_plain_subject_tokens() {
        for good in ["a", "lab-1", "Host_2", &"x".repeat(64)] {
            assert!(check_id("host", good).is_ok(), "{good}");
        }
        for bad in ["", "a.b", "a*", ">", "a b", "ä", &"x".repeat(65), "$KV"] {
            assert!(check_id("host", bad).is_err(), "{bad:?}");
        }
        assert_eq!(host_id_from("box.example.org"), "box-example-org");
        assert!(check_id("host", &host_id_from(&"é.".repeat(80))).is_ok());
    }

    #[test]
    fn subjects_are_scoped_per_fleet_and_host() {
        let n = Names::new("lab").unwrap();
        assert_eq!(n.events_subject("h1"), "drover.lab.events.h1");
        assert_eq!(n.host_of("drover.lab.events.h1"), Some("h1"));
        assert_eq!(n.host_of("drover.other.events.h1"), None);
        assert_eq!(n.host_of("drover.lab.events.h1.x"), None);
        assert_eq!(n.host_of("drover.labx.events.h1"), None);
        let p = n.host_permissions("h1");
        assert!(p.publish.contains(&"drover.lab.events.h1".to_string()));
        assert!(p.publish.iter().all(|s| !s.contains("h2")));
        // Nothing that deletes, purges or writes another host's subjects.
        assert!(
            p.publish
                .iter()
                .all(|s| !s.contains("DELETE.drover-lab-events")
                    || s.starts_with("$JS.API.CONSUMER.DELETE"))
        );
        assert!(p.publish.iter().all(|s| !s.contains("PURGE")));
        assert!(p.publish.iter().all(|s| s != "drover.lab.events.>"));
    }
}
