//! A nats-server for `bench/fleet.rs`: JetStream in a temp store dir on a
//! free loopback port, users with passwords. The binary is
//! `$DROVER_NATS_SERVER` (scripts/install-nats.sh), else `nats-server` on
//! PATH. Killed on drop. Included with `#[path]`; not a bench target itself.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long the server may take to say it is ready.
const READY_TIMEOUT: Duration = Duration::from_secs(20);

pub struct Nats {
    child: Child,
    pub port: u16,
    _dir: tempfile::TempDir,
}

fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("free port: {e}"))
}

fn binary() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("DROVER_NATS_SERVER").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join("nats-server"))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            "needs nats-server 2.10+: export DROVER_NATS_SERVER=$(scripts/install-nats.sh)".into()
        })
}

impl Nats {
    /// Start a server with these (user, password) pairs and wait until it is ready.
    pub fn start(users: &[(&str, &str)]) -> Result<Nats, String> {
        let mut n = Nats::spawn(users, free_port()?, "")?;
        let log = n._dir.path().join("nats.log");
        n.wait_ready(&log)?;
        Ok(n)
    }

    /// Three servers in one cluster, JetStream on each; ready once every
    /// node is, with its route listener, and a JetStream meta leader is
    /// elected. A node whose port was taken between the probe and its bind
    /// exits (after saying "Server is ready" when it is the route port):
    /// the cluster is then started again on fresh ports, up to 5 times.
    #[allow(dead_code)]
    pub fn cluster(users: &[(&str, &str)]) -> Result<Vec<Nats>, String> {
        let mut last = String::new();
        for _ in 0..5 {
            match Nats::try_cluster(users) {
                Ok(nodes) => return Ok(nodes),
                Err(e) => last = e,
            }
        }
        Err(format!("the cluster did not come up in 5 tries: {last}"))
    }

    fn try_cluster(users: &[(&str, &str)]) -> Result<Vec<Nats>, String> {
        let routes: Vec<u16> = (0..3).map(|_| free_port()).collect::<Result<_, _>>()?;
        let list: Vec<String> = routes
            .iter()
            .map(|r| format!("\"nats-route://127.0.0.1:{r}\""))
            .collect();
        let mut nodes = Vec::new();
        for (i, r) in routes.iter().enumerate() {
            let extra = format!(
                "server_name: \"n{i}\"\ncluster {{ name: \"bench\", listen: \"127.0.0.1:{r}\", routes: [{}] }}\n",
                list.join(", ")
            );
            nodes.push(Nats::spawn(users, free_port()?, &extra)?);
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(i) = nodes
                .iter_mut()
                .position(|n| n.child.try_wait().ok().flatten().is_some())
            {
                return Err(format!("node n{i} exited (a port taken?)"));
            }
            let logs: Vec<String> = nodes
                .iter()
                .map(|n| {
                    std::fs::read_to_string(n._dir.path().join("nats.log")).unwrap_or_default()
                })
                .collect();
            if logs.iter().all(|l| {
                l.contains("Server is ready") && l.contains("Listening for route connections")
            }) && logs.iter().any(|l| {
                l.contains("JetStream cluster new metadata leader")
                    || l.contains("Self is new JetStream cluster metadata leader")
            }) {
                return Ok(nodes);
            }
            if Instant::now() >= deadline {
                return Err("the cluster did not come up in 60 s".into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kill the server (SIGKILL) for good.
    #[allow(dead_code)]
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// A server on `port` (not yet waited for), `extra` added to its config.
    fn spawn(users: &[(&str, &str)], port: u16, extra: &str) -> Result<Nats, String> {
        let dir = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
        let log = dir.path().join("nats.log");
        let mut conf = format!(
            "{extra}listen: \"127.0.0.1:{port}\"\njetstream {{ store_dir: \"{}\" }}\nauthorization {{ users: [\n",
            dir.path().join("js").display()
        );
        for (u, p) in users {
            conf.push_str(&format!("  {{ user: \"{u}\", password: \"{p}\" }}\n"));
        }
        conf.push_str("] }\n");
        let conf_file = dir.path().join("nats.conf");
        std::fs::write(&conf_file, conf).map_err(|e| format!("nats.conf: {e}"))?;
        let child = Command::new(binary()?)
            .arg("-c")
            .arg(&conf_file)
            .arg("-l")
            .arg(&log)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("nats-server: {e}"))?;
        Ok(Nats {
            child,
            port,
            _dir: dir,
        })
    }

    /// Kill the server (SIGKILL) and start it again on its port, config and
    /// JetStream store dir (a restart that loses nothing on file storage).
    #[allow(dead_code)]
    pub fn restart(&mut self) -> Result<(), String> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let log = self._dir.path().join("nats.log");
        let _ = std::fs::remove_file(&log);
        self.child = Command::new(binary()?)
            .arg("-c")
            .arg(self._dir.path().join("nats.conf"))
            .arg("-l")
            .arg(&log)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("nats-server: {e}"))?;
        self.wait_ready(&log)
    }

    fn wait_ready(&mut self, log: &Path) -> Result<(), String> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if std::fs::read_to_string(log).is_ok_and(|l| l.contains("Server is ready")) {
                return Ok(());
            }
            if let Ok(Some(st)) = self.child.try_wait() {
                return Err(format!("nats-server exited ({st}); see its log"));
            }
            if Instant::now() >= deadline {
                return Err("nats-server was not ready in 20 s".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
