//! A real nats-server per test: free loopback port, JetStream on a private
//! store dir, users with passwords (or none), TLS from a CA made here.
//! Found through `DROVER_NATS_SERVER` (scripts/install-nats.sh), else
//! `nats-server` on PATH or in /usr/sbin.
#![allow(dead_code)]

use crate::common::wait_until;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// How long a server may take to say it is ready.
const READY_TIMEOUT: Duration = Duration::from_secs(20);

/// Whether `bin` is a nats-server of 2.10 or newer: the tests run on a
/// current server unless `DROVER_NATS_SERVER` names another (the fleet
/// works on 2.9 too, docs/fleet.md).
fn usable(bin: &Path) -> bool {
    let Ok(out) = Command::new(bin).arg("--version").output() else {
        return false;
    };
    let v = String::from_utf8_lossy(&out.stdout);
    v.trim()
        .strip_prefix("nats-server: v2.")
        .and_then(|r| r.split('.').next())
        .and_then(|m| m.parse::<u32>().ok())
        .is_some_and(|m| m >= 10)
}

/// The oldest nats-server the fleet claims (2.9): `DROVER_NATS_SERVER_OLDEST`
/// (`scripts/install-nats.sh --oldest`), else a 2.9 in /usr/sbin or on PATH
/// (Debian bookworm's package); panics with how to get one.
pub fn oldest_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("DROVER_NATS_SERVER_OLDEST").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    [PathBuf::from("/usr/sbin")]
        .into_iter()
        .chain(std::env::split_paths(&path))
        .map(|d| d.join("nats-server"))
        .find(|p| {
            Command::new(p).arg("--version").output().is_ok_and(|o| {
                String::from_utf8_lossy(&o.stdout).starts_with("nats-server: v2.9.")
            })
        })
        .expect("needs nats-server 2.9: export DROVER_NATS_SERVER_OLDEST=$(scripts/install-nats.sh --oldest)")
}

/// The nats-server binary: `DROVER_NATS_SERVER`, else one on PATH, in
/// /usr/sbin or in install-nats.sh's cache that is new enough; panics with
/// how to get one.
pub fn server_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("DROVER_NATS_SERVER").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| home.join(".cache"))
        .join("drover/nats");
    let cached = std::fs::read_dir(&cache)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin"));
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin")])
        .chain(cached)
        .map(|d| d.join("nats-server"))
        .find(|p| p.is_file() && usable(p))
        .expect("needs nats-server 2.10+ (or DROVER_NATS_SERVER naming another): export DROVER_NATS_SERVER=$(scripts/install-nats.sh)")
}

/// A CA and a server certificate for 127.0.0.1 and localhost, as PEM files.
pub struct Pki {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Make a CA named `name` and a server certificate it signs, in `dir`.
pub fn pki(dir: &Path, name: &str) -> Pki {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, format!("drover test CA {name}"));
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).unwrap();
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".into()])
        .unwrap()
        .signed_by(&leaf_key, &ca)
        .unwrap();
    let out = Pki {
        ca: dir.join(format!("{name}-ca.pem")),
        cert: dir.join(format!("{name}-cert.pem")),
        key: dir.join(format!("{name}-key.pem")),
    };
    std::fs::write(&out.ca, ca.pem()).unwrap();
    std::fs::write(&out.cert, leaf.pem()).unwrap();
    std::fs::write(&out.key, leaf_key.serialize_pem()).unwrap();
    out
}

/// How a test server is set up.
#[derive(Default)]
pub struct Setup {
    /// (user, password) pairs; empty: no authentication at all.
    pub users: Vec<(String, String)>,
    /// Serve TLS with this certificate.
    pub tls: Option<(PathBuf, PathBuf)>,
}

/// A running nats-server; stopped (SIGKILL) when dropped.
pub struct Nats {
    child: Child,
    pub port: u16,
    pub dir: tempfile::TempDir,
    pub log: PathBuf,
    /// The nats-server binary it runs.
    bin: PathBuf,
}

/// nats-server `bin` with config `conf`, logging to `log`.
fn spawn(bin: &Path, conf: &Path, log: &Path) -> Child {
    Command::new(bin)
        .arg("-c")
        .arg(conf)
        .arg("-l")
        .arg(log)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("cannot run nats-server")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Nats {
    /// Start a server as `setup` says and wait until it is ready.
    pub fn start(setup: &Setup) -> Nats {
        Self::start_with(setup, "", &[])
    }

    /// Start a server as `setup` says with `extra` appended to its config
    /// (an `authorization` block of its own, say) and each of `files`
    /// (name, text) written beside the config, private, for its `include`s
    /// (nats-server reads them relative to the config's directory).
    pub fn start_with(setup: &Setup, extra: &str, files: &[(&str, &str)]) -> Nats {
        // A port taken between the probe and the bind: try another.
        Self::start_bin(&server_bin(), setup, extra, files)
    }

    /// [`Nats::start_with`] on nats-server `bin` (an older one).
    pub fn start_bin(bin: &Path, setup: &Setup, extra: &str, files: &[(&str, &str)]) -> Nats {
        for _ in 0..5 {
            if let Some(n) = Self::try_start(bin, setup, extra, files) {
                return n;
            }
        }
        panic!("nats-server did not start on any of 5 free ports");
    }

    fn try_start(bin: &Path, setup: &Setup, extra: &str, files: &[(&str, &str)]) -> Option<Nats> {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            use std::os::unix::fs::PermissionsExt;
            let p = dir.path().join(name);
            std::fs::write(&p, text).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        let port = free_port();
        let store = dir.path().join("js");
        let log = dir.path().join("nats.log");
        let mut conf = format!(
            "listen: \"127.0.0.1:{port}\"\njetstream {{ store_dir: \"{}\" }}\n",
            store.display()
        );
        if !setup.users.is_empty() {
            conf.push_str("authorization { users: [\n");
            for (u, p) in &setup.users {
                conf.push_str(&format!("  {{ user: \"{u}\", password: \"{p}\" }}\n"));
            }
            conf.push_str("] }\n");
        }
        if let Some((cert, key)) = &setup.tls {
            conf.push_str(&format!(
                "tls {{ cert_file: \"{}\", key_file: \"{}\" }}\n",
                cert.display(),
                key.display()
            ));
        }
        conf.push_str(extra);
        let conf_file = dir.path().join("nats.conf");
        std::fs::write(&conf_file, conf).unwrap();
        let child = spawn(bin, &conf_file, &log);
        let mut n = Nats {
            child,
            port,
            dir,
            log,
            bin: bin.to_path_buf(),
        };
        let ready = wait_until(READY_TIMEOUT, || {
            n.log_text().contains("Server is ready") || n.exited()
        });
        if ready && !n.exited() { Some(n) } else { None }
    }

    /// Kill the server (SIGKILL: no clean shutdown) and start it again on
    /// the same port with the same config and JetStream store dir; waits
    /// until it is ready again.
    pub fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let before = self.log_text().matches("Server is ready").count();
        let conf_file = self.dir.path().join("nats.conf");
        // The port is free again once the old process is gone; a new
        // listener may take a moment to bind it.
        let started = wait_until(READY_TIMEOUT, || {
            self.child = spawn(&self.bin, &conf_file, &self.log);
            let up = wait_until(READY_TIMEOUT, || {
                self.log_text().matches("Server is ready").count() > before || self.exited()
            });
            up && !self.exited()
        });
        assert!(
            started,
            "nats-server did not start again: {}",
            self.log_text()
        );
    }

    /// Kill the server, wipe its JetStream store (every stream gone, as a
    /// lost disk) and start it again on the same port and config.
    pub fn wipe_and_restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(self.dir.path().join("js"));
        self.restart();
    }

    fn exited(&mut self) -> bool {
        self.child.try_wait().ok().flatten().is_some()
    }

    /// The server's log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `nats://127.0.0.1:PORT` (or `tls://` for a TLS server).
    pub fn url(&self, scheme: &str) -> String {
        format!("{scheme}://127.0.0.1:{}", self.port)
    }
}

/// A JetStream context as `user` on `nats` (for what drover itself never
/// does: a stream's config read, a purge, a bucket made the old way), and
/// the runtime that drives it.
pub fn js_as(
    nats: &Nats,
    user: &str,
    pw: &str,
) -> (tokio::runtime::Runtime, async_nats::jetstream::Context) {
    js_with(
        nats,
        async_nats::ConnectOptions::with_user_and_password(user.into(), pw.into()),
    )
}

/// The same as host `user` of fleet `lab` with per-host users: its
/// replies on its own inbox (`_INBOX_drover_lab_<user>`), the only one its
/// user may listen on.
pub fn js_as_host(
    nats: &Nats,
    user: &str,
    pw: &str,
) -> (tokio::runtime::Runtime, async_nats::jetstream::Context) {
    js_with(
        nats,
        async_nats::ConnectOptions::with_user_and_password(user.into(), pw.into())
            .custom_inbox_prefix(format!("_INBOX_drover_lab_{user}")),
    )
}

/// A runtime and a JetStream context connected to `nats` with `opts`
/// (the context is made inside the runtime: it needs one).
fn js_with(
    nats: &Nats,
    opts: async_nats::ConnectOptions,
) -> (tokio::runtime::Runtime, async_nats::jetstream::Context) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let js = rt.block_on(async {
        let client = opts.connect(nats.url("nats")).await.unwrap();
        async_nats::jetstream::new(client)
    });
    (rt, js)
}

impl Drop for Nats {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Three nats-servers in one cluster, JetStream on each (its own store
/// dir), the same users on each; stopped when dropped.
pub struct NatsCluster {
    pub nodes: Vec<Nats>,
}

impl NatsCluster {
    /// Three nodes up, JetStream's meta leader elected. A port taken between
    /// the probe and a node's bind (another test's listener, or a client's
    /// outgoing connection given it as its own port) ends that node at
    /// once: the nodes are stopped and the cluster tried again on fresh
    /// ports, as [`Nats::start`] does for one server.
    pub fn start(setup: &Setup) -> NatsCluster {
        let mut logs = Vec::new();
        for _ in 0..5 {
            match Self::try_start(setup) {
                Ok(c) => return c,
                Err(l) => logs.push(l),
            }
        }
        panic!(
            "the cluster did not come up in 5 tries: {}",
            logs.join("\n===\n")
        );
    }

    /// The cluster, or every node's log when one ended or no meta leader
    /// was elected in time.
    fn try_start(setup: &Setup) -> Result<NatsCluster, String> {
        let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
        let routes: Vec<String> = ports
            .iter()
            .map(|(_, r)| format!("\"nats-route://127.0.0.1:{r}\""))
            .collect();
        let mut nodes = Vec::new();
        for (i, (port, route)) in ports.iter().enumerate() {
            let dir = tempfile::tempdir().unwrap();
            let log = dir.path().join("nats.log");
            let mut conf = format!(
                "server_name: \"n{i}\"\nlisten: \"127.0.0.1:{port}\"\njetstream {{ store_dir: \"{}\" }}\ncluster {{ name: \"c\", listen: \"127.0.0.1:{route}\", routes: [{}] }}\n",
                dir.path().join("js").display(),
                routes.join(", ")
            );
            conf.push_str("authorization { users: [\n");
            for (u, p) in &setup.users {
                conf.push_str(&format!("  {{ user: \"{u}\", password: \"{p}\" }}\n"));
            }
            conf.push_str("] }\n");
            let conf_file = dir.path().join("nats.conf");
            std::fs::write(&conf_file, conf).unwrap();
            let bin = server_bin();
            let child = spawn(&bin, &conf_file, &log);
            nodes.push(Nats {
                child,
                port: *port,
                dir,
                log,
                bin,
            });
        }
        // JetStream is up in a cluster once a meta leader is elected. A node
        // says "Server is ready" before it binds its route port (and exits
        // when that is taken): its route listener is waited for too, or two
        // live nodes electing a leader would pass for three.
        let up = wait_until(Duration::from_secs(60), || {
            if nodes.iter_mut().any(Nats::exited) {
                return true;
            }
            let logs: Vec<String> = nodes.iter().map(Nats::log_text).collect();
            logs.iter().all(|t| {
                t.contains("Server is ready") && t.contains("Listening for route connections")
            }) && logs.iter().any(|t| {
                t.contains("JetStream cluster new metadata leader")
                    || t.contains("Self is new JetStream cluster metadata leader")
            })
        });
        if up && !nodes.iter_mut().any(Nats::exited) {
            return Ok(NatsCluster { nodes });
        }
        // Dropped: every node is killed.
        Err(nodes
            .iter()
            .map(Nats::log_text)
            .collect::<Vec<_>>()
            .join("\n---\n"))
    }

    /// Every node's client URL, comma-separated (what `fleet join --nats` takes).
    pub fn urls(&self) -> String {
        self.nodes
            .iter()
            .map(|n| n.url("nats"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Kill node `i` (SIGKILL).
    pub fn kill(&mut self, i: usize) {
        let _ = self.nodes[i].child.kill();
        let _ = self.nodes[i].child.wait();
    }

    /// Start node `i` again on its ports, config and store (after
    /// [`NatsCluster::kill`]); waits until it is ready.
    pub fn restart(&mut self, i: usize) {
        self.nodes[i].restart();
    }
}
