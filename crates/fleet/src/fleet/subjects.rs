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
        // Fleet `a`'s host `x` keeps its patches in `drover-a-objects-x`;
        // with `-objects` barred from fleet names, no other fleet's stream
        // on the same server can have that name.
        if fleet.contains("-objects") {
            return Err(FleetError::ReservedFleetName {
                fleet: fleet.to_string(),
            });
        }
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

    /// What host `host`'s NATS user may publish and subscribe to: exactly
    /// the calls drover makes on a fleet whose streams exist, measured
    /// against a real nats-server (tests/it/fleet_authz.rs). One list; a new
    /// call on the bus adds its subject here.
    ///
    /// - its own events subject and presence key (a KV put, or delete on
    ///   leave), and nothing of another host's;
    /// - stream info on the fleet's two streams (join opens them);
    /// - reads of every host's presence (`fleet ls`: direct gets, and an
    ///   ephemeral consumer that lists the keys, with its flow-control
    ///   replies);
    /// - an ephemeral consumer on the event stream and pulls from it
    ///   (`events --follow --fleet`);
    /// - replies on its own inbox only.
    ///
    /// No stream create, update, purge or delete, no message delete, no
    /// consumer delete: see [`Names::creator_permissions`] for who creates.
    pub fn host_permissions(&self, host: &str) -> Permissions {
        let ev = self.events_stream();
        let kv = self.hosts_stream();
        let publish = vec![
            self.events_subject(host),
            self.presence_subject(host),
            format!("$JS.API.STREAM.INFO.{ev}"),
            format!("$JS.API.STREAM.INFO.{kv}"),
            format!("$JS.API.DIRECT.GET.{kv}.>"),
            format!("$JS.API.CONSUMER.CREATE.{kv}"),
            format!("$JS.FC.{kv}.>"),
            format!("$JS.API.CONSUMER.CREATE.{ev}"),
            format!("$JS.API.CONSUMER.MSG.NEXT.{ev}.>"),
        ];
        let mut p = Permissions {
            publish,
            subscribe: vec![
                format!("{}.>", self.inbox_prefix(host)),
                format!("drover.{}.deliver.{host}.*", self.fleet),
            ],
            allow_responses: false,
        };
        p.publish.extend(self.worker_publish(host));
        p
    }

    /// What `fleet work` does on the bus: pull the loop's steps through the
    /// shared consumer (delivered on its own subject, which the coordinator
    /// sees), read the coordinator's objects (bundles, candidates), write
    /// its patches into its own bucket alone (each object checked by the
    /// sha256 its sender states), and ask a run's coordinator on its own
    /// request subject. No ack: the coordinator acks for the host that
    /// holds a delivery, so no host can ack, nak or term another's. Nothing
    /// that creates, deletes or purges, and no write into another bucket.
    fn worker_publish(&self, host: &str) -> Vec<String> {
        let work = self.work_stream();
        let mut p = vec![format!("$JS.API.STREAM.INFO.{work}")];
        for agent in super::work::AGENTS {
            let c = super::work::consumer_name(agent);
            p.push(format!("$JS.API.CONSUMER.INFO.{work}.{c}"));
            p.push(format!("$JS.API.CONSUMER.MSG.NEXT.{work}.{c}"));
        }
        p.extend(object_reads(&self.objects_stream()));
        p.extend(object_reads(&self.host_objects_stream(host)));
        p.extend([
            format!("$O.{}.>", self.host_objects_bucket(host)),
            format!("drover.{}.coord.*.{host}", self.fleet),
        ]);
        p
    }

    /// The creator host's permissions: [`Names::host_permissions`] and the
    /// creation of the fleet's two streams when they are missing. Whoever
    /// creates a stream chooses its config (a republish rule could copy its
    /// own subject onto another host's), so one trusted host does; once the
    /// streams exist, a create with another config is refused and nobody's
    /// user may update them.
    ///
    /// As the coordinator it writes the fleet's object store (its bundles
    /// and candidates), and makes and reads each of `hosts`' own buckets
    /// (their patches): a host added later needs the config printed again.
    pub fn creator_permissions(&self, host: &str, hosts: &[String]) -> Permissions {
        let mut p = self.host_permissions(host);
        for s in [self.events_stream(), self.hosts_stream()] {
            p.publish.push(format!("$JS.API.STREAM.CREATE.{s}"));
        }
        // It coordinates `loop run --fleet`: it makes the work stream, its
        // consumer and the object store, puts the steps on the queue, and
        // answers the hosts' requests (replies only to a request received).
        let work = self.work_stream();
        p.publish.push(format!("$JS.API.STREAM.CREATE.{work}"));
        for agent in super::work::AGENTS {
            let c = super::work::consumer_name(agent);
            p.publish
                .push(format!("$JS.API.CONSUMER.CREATE.{work}.{c}"));
            p.publish
                .push(format!("$JS.API.CONSUMER.CREATE.{work}.{c}.>"));
            p.publish
                .push(format!("$JS.API.CONSUMER.DURABLE.CREATE.{work}.{c}"));
        }
        p.publish.extend([
            format!("$JS.API.STREAM.CREATE.{}", self.objects_stream()),
            format!("$O.{}.>", self.objects_bucket()),
        ]);
        for h in hosts.iter().filter(|h| *h != host) {
            let s = self.host_objects_stream(h);
            p.publish.push(format!("$JS.API.STREAM.CREATE.{s}"));
            p.publish.extend(object_reads(&s));
        }
        p.publish.push(format!(
            "$JS.API.STREAM.CREATE.{}",
            self.host_objects_stream(host)
        ));
        p.publish.extend([
            format!("drover.{}.work.>", self.fleet),
            // It acks, nacks and terms the items for the hosts.
            format!("$JS.ACK.{work}.>"),
        ]);
        p.subscribe.push(format!("drover.{}.coord.>", self.fleet));
        // It sees every delivery, and to which host it went.
        p.subscribe.push(self.deliver_filter());
        p.allow_responses = true;
        p
    }

    /// nats-server's `authorization` block for `hosts`: one user per host,
    /// named as the host, with exactly [`Names::host_permissions`] (the
    /// `creator` with [`Names::creator_permissions`]), its password a
    /// reference to [`password_var`], never a secret. Each of `includes`
    /// (files defining those variables) is included before the block: the
    /// server resolves a variable from a file included in the same file, or
    /// from its environment.
    pub fn authorization(
        &self,
        hosts: &[String],
        creator: &str,
        includes: &[String],
    ) -> Result<String, FleetError> {
        let mut vars: Vec<(String, &str)> = Vec::new();
        for h in hosts {
            check_id("host", h)?;
            let var = password_var(h);
            if let Some((_, other)) = vars.iter().find(|(v, _)| *v == var) {
                return Err(if *other == h.as_str() {
                    FleetError::HostTwice { host: h.clone() }
                } else {
                    FleetError::PasswordVarClash {
                        a: other.to_string(),
                        b: h.clone(),
                        var,
                    }
                });
            }
            vars.push((var, h));
        }
        if !hosts.iter().any(|h| h == creator) {
            return Err(FleetError::CreatorNotAHost {
                creator: creator.to_string(),
            });
        }
        let mut out = format!(
            "# drover fleet {}: one NATS user per host (drover fleet server-config).\n\
             # Each password is the variable named, from nats-server's environment\n\
             # or from a private file included here (docs/fleet.md, \"Per-host users\").\n",
            self.fleet
        );
        for f in includes {
            if f.is_empty() || f.starts_with('/') || f.contains(['"', '\n', '\r']) {
                return Err(FleetError::BadInclude { path: f.clone() });
            }
            out.push_str(&format!("include \"{f}\"\n"));
        }
        out.push_str("authorization {\n  users: [\n");
        for (var, h) in &vars {
            let (perms, note) = if *h == creator {
                (
                    self.creator_permissions(h, hosts),
                    "      # creates the fleet's streams: join this host first\n",
                )
            } else {
                (self.host_permissions(h), "")
            };
            out.push_str(&format!(
                "    {{\n      user: \"{h}\"\n      password: ${var}\n{note}"
            ));
            for line in perms.to_server_config().lines() {
                out.push_str(&format!("      {line}\n"));
            }
            out.push_str("    }\n");
        }
        out.push_str("  ]\n}\n");
        Ok(out)
    }
}

/// What reading an object of the store whose stream is `stream` takes:
/// its info, its meta record (a direct get) and its chunks (an ordered
/// consumer, with flow control).
fn object_reads(stream: &str) -> [String; 5] {
    [
        format!("$JS.API.STREAM.INFO.{stream}"),
        format!("$JS.API.DIRECT.GET.{stream}.>"),
        format!("$JS.API.CONSUMER.CREATE.{stream}"),
        format!("$JS.API.CONSUMER.CREATE.{stream}.>"),
        format!("$JS.FC.{stream}.>"),
    ]
}

/// The nats-server variable that holds host `host`'s password in the config
/// [`Names::authorization`] prints: `DROVER_NATS_PW_` and the id upper-cased,
/// `-` written `_` (`box-1` → `DROVER_NATS_PW_BOX_1`).
pub fn password_var(host: &str) -> String {
    let id: String = host
        .chars()
        .map(|c| {
            if c == '-' {
                '_'
            } else {
                c.to_ascii_uppercase()
            }
        })
        .collect();
    format!("DROVER_NATS_PW_{id}")
}

/// A NATS user's allow lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Permissions {
    pub publish: Vec<String>,
    pub subscribe: Vec<String>,
    /// May reply to a request it received (the coordinator answering hosts).
    pub allow_responses: bool,
}

impl Permissions {
    /// The `permissions` block of a user in nats-server's config syntax,
    /// one subject a line.
    pub fn to_server_config(&self) -> String {
        let list = |v: &[String]| {
            v.iter()
                .map(|s| format!("    \"{s}\""))
                .collect::<Vec<_>>()
                .join(",\n")
        };
        format!(
            "permissions: {{\n  publish: {{ allow: [\n{}\n  ] }}\n  subscribe: {{ allow: [\n{}\n  ] }}{}\n}}",
            list(&self.publish),
            list(&self.subscribe),
            if self.allow_responses {
                "\n  allow_responses: true"
            } else {
                ""
            }
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

    /// Fleet `a`'s host `x-objects` would write `drover-a-objects-x-objects`,
    /// which is fleet `a-objects-x`'s own object store: such fleet names are
    /// refused, so no two fleets on one server share a stream.
    #[test]
    fn a_fleet_name_cannot_make_another_fleets_host_bucket() {
        let a = Names::new("a").unwrap();
        assert_eq!(
            a.host_objects_bucket("x-objects"),
            "drover-a-objects-x-objects"
        );
        for bad in ["a-objects-x", "a-objects", "lab-objects2"] {
            let e = Names::new(bad).unwrap_err();
            assert!(matches!(e, FleetError::ReservedFleetName { .. }), "{bad}");
            assert_eq!(e.exit_code(), crate::exit::USAGE);
            assert!(e.to_string().contains("pick another name"), "{e}");
        }
        for good in ["objects", "lab_objects", "a-object", "Lab-Objects"] {
            assert!(Names::new(good).is_ok(), "{good}");
        }
    }

    #[test]
    fn subjects_are_scoped_per_fleet_and_host() {
        let n = Names::new("lab").unwrap();
        assert_eq!(n.events_subject("h1"), "drover.lab.events.h1");
        assert_eq!(n.host_of("drover.lab.events.h1"), Some("h1"));
        assert_eq!(n.host_of("drover.other.events.h1"), None);
        assert_eq!(n.host_of("drover.lab.events.h1.x"), None);
        assert_eq!(n.host_of("drover.labx.events.h1"), None);
    }

    #[test]
    fn a_host_may_touch_only_its_own_subjects_and_never_manage_streams() {
        let n = Names::new("lab").unwrap();
        let p = n.host_permissions("h1");
        assert!(p.publish.contains(&"drover.lab.events.h1".to_string()));
        assert!(p.publish.contains(&"$KV.drover-lab-hosts.h1".to_string()));
        assert_eq!(
            p.subscribe,
            ["_INBOX_drover_lab_h1.>", "drover.lab.deliver.h1.*"]
        );
        for s in p.publish.iter().chain(&p.subscribe) {
            assert!(!s.contains("h2"), "{s}");
            // Nothing that would also match another host's subject.
            assert!(!s.starts_with("drover.lab.events.") || s == "drover.lab.events.h1");
            assert!(!s.starts_with("$KV.") || s == "$KV.drover-lab-hosts.h1");
            for verb in [
                "CREATE.drover",
                "CREATE.KV",
                "UPDATE",
                "PURGE",
                "DELETE",
                "MSG.GET",
            ] {
                assert!(!s.contains(&format!("STREAM.{verb}")), "{s}");
            }
            assert!(!s.contains("CONSUMER.DELETE"), "{s}");
            assert!(
                !s.starts_with("_INBOX.") && s != ">" && s != "$JS.API.>",
                "{s}"
            );
        }
        // A host may ask a coordinator on its own subject only, never answer
        // as one, queue steps or ack.
        assert!(p.publish.contains(&"drover.lab.coord.*.h1".to_string()));
        assert!(p.publish.iter().all(|s| !s.starts_with("$JS.ACK")), "{p:?}");
        assert!(!p.allow_responses);
        assert!(p.publish.iter().all(|s| !s.starts_with("drover.lab.work")));
        // The creator adds the creation of the fleet's streams, and what a
        // coordinator does: queue steps, take the hosts' requests, answer them.
        assert!(
            p.publish
                .contains(&"$O.drover-lab-objects-h1.>".to_string())
        );
        assert!(!p.publish.contains(&"$O.drover-lab-objects.>".to_string()));
        assert!(
            p.publish
                .contains(&"$JS.API.DIRECT.GET.OBJ_drover-lab-objects.>".to_string())
        );
        let c = n.creator_permissions("h1", &["h1".into(), "h2".into()]);
        let added: Vec<_> = c
            .publish
            .iter()
            .filter(|s| !p.publish.contains(s))
            .collect();
        assert_eq!(
            added,
            [
                "$JS.API.STREAM.CREATE.drover-lab-events",
                "$JS.API.STREAM.CREATE.KV_drover-lab-hosts",
                "$JS.API.STREAM.CREATE.drover-lab-work",
                "$JS.API.CONSUMER.CREATE.drover-lab-work.hosts-claude",
                "$JS.API.CONSUMER.CREATE.drover-lab-work.hosts-claude.>",
                "$JS.API.CONSUMER.DURABLE.CREATE.drover-lab-work.hosts-claude",
                "$JS.API.CONSUMER.CREATE.drover-lab-work.hosts-codex",
                "$JS.API.CONSUMER.CREATE.drover-lab-work.hosts-codex.>",
                "$JS.API.CONSUMER.DURABLE.CREATE.drover-lab-work.hosts-codex",
                "$JS.API.STREAM.CREATE.OBJ_drover-lab-objects",
                "$O.drover-lab-objects.>",
                "$JS.API.STREAM.CREATE.OBJ_drover-lab-objects-h2",
                "$JS.API.STREAM.INFO.OBJ_drover-lab-objects-h2",
                "$JS.API.DIRECT.GET.OBJ_drover-lab-objects-h2.>",
                "$JS.API.CONSUMER.CREATE.OBJ_drover-lab-objects-h2",
                "$JS.API.CONSUMER.CREATE.OBJ_drover-lab-objects-h2.>",
                "$JS.FC.OBJ_drover-lab-objects-h2.>",
                "$JS.API.STREAM.CREATE.OBJ_drover-lab-objects-h1",
                "drover.lab.work.>",
                "$JS.ACK.drover-lab-work.>",
            ]
        );
        assert_eq!(
            c.subscribe,
            [
                "_INBOX_drover_lab_h1.>",
                "drover.lab.deliver.h1.*",
                "drover.lab.coord.>",
                "drover.lab.deliver.*.*"
            ]
        );
        assert!(c.allow_responses);
        assert!(c.to_server_config().contains("allow_responses: true"));
        assert!(!p.to_server_config().contains("allow_responses"));
    }

    #[test]
    fn the_server_config_names_each_password_by_variable_and_refuses_clashes() {
        let n = Names::new("lab").unwrap();
        let hosts = ["h1".to_string(), "box-2".to_string()];
        let c = n.authorization(&hosts, "h1", &["pw.conf".into()]).unwrap();
        assert!(c.contains("include \"pw.conf\"\nauthorization {"), "{c}");
        assert!(
            c.contains("user: \"h1\"\n      password: $DROVER_NATS_PW_H1\n"),
            "{c}"
        );
        assert!(c.contains("password: $DROVER_NATS_PW_BOX_2\n"), "{c}");
        assert_eq!(
            c.matches("STREAM.CREATE").count(),
            6,
            "only the creator creates (events, hosts, work, objects, each host's objects)"
        );
        assert_eq!(password_var("a-b_C"), "DROVER_NATS_PW_A_B_C");
        let err = |hosts: &[&str], creator: &str, inc: &[&str]| {
            let hosts: Vec<String> = hosts.iter().map(|s| s.to_string()).collect();
            let inc: Vec<String> = inc.iter().map(|s| s.to_string()).collect();
            n.authorization(&hosts, creator, &inc).unwrap_err()
        };
        assert!(matches!(
            err(&["h1", "h1"], "h1", &[]),
            FleetError::HostTwice { .. }
        ));
        assert!(matches!(
            err(&["a-b", "A_b"], "a-b", &[]),
            FleetError::PasswordVarClash { .. }
        ));
        assert!(matches!(
            err(&["h1"], "h2", &[]),
            FleetError::CreatorNotAHost { .. }
        ));
        assert!(matches!(
            err(&["h.1"], "h.1", &[]),
            FleetError::BadId { .. }
        ));
        for bad in ["", "/etc/pw.conf", "a\"b", "a\nb"] {
            assert!(matches!(
                err(&["h1"], "h1", &[bad]),
                FleetError::BadInclude { .. }
            ));
        }
    }
}
