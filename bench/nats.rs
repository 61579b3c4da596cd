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
        let dir = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("free port: {e}"))?
            .port();
        let log = dir.path().join("nats.log");
        let mut conf = format!(
            "listen: \"127.0.0.1:{port}\"\njetstream {{ store_dir: \"{}\" }}\nauthorization {{ users: [\n",
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
        let mut n = Nats {
            child,
            port,
            _dir: dir,
        };
        n.wait_ready(&log)?;
        Ok(n)
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
