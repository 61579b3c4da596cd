//! A pane generation's cgroup: where the host lets drover make one (a
//! writable cgroup v2 hierarchy; root, or a delegated one), a tmux pane's
//! first process is moved into `<cgroup2>/drover-panes/<id>` while it waits
//! at its start gate, before it runs anything, so every process it ever
//! starts is in it: also one that leaves the pane's session (`setsid`),
//! drops its environment and with it drover's marker (`env -i`), and is
//! re-parented away. The cgroup is named from the generation's marker, so
//! a supervisor that re-adopts the pane after a crash finds it again. Only
//! membership is used (no controller); without such a hierarchy a pane's
//! tree is what its session and marker say (docs/tmux.md).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The directory under the cgroup v2 mount that holds the panes' cgroups.
const PANES_DIR: &str = "drover-panes";

/// The cgroup v2 directory drover may make panes' cgroups in, if any.
fn base() -> Option<&'static Path> {
    static BASE: OnceLock<Option<PathBuf>> = OnceLock::new();
    BASE.get_or_init(|| {
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        let mount = mounts.lines().find_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            (right.split(' ').next() == Some("cgroup2"))
                .then(|| left.split(' ').nth(4).map(PathBuf::from))
                .flatten()
        })?;
        let dir = mount.join(PANES_DIR);
        match std::fs::create_dir(&dir) {
            Ok(()) => Some(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Some(dir),
            Err(_) => None,
        }
    })
    .as_deref()
}

/// Whether panes get cgroups on this host.
pub fn available() -> bool {
    base().is_some()
}

fn fnv(seed: u64, s: &str) -> u64 {
    s.bytes().fold(seed, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The cgroup of the generation whose marker is `marker` (no marker, none).
pub fn dir_for(marker: &str) -> Option<PathBuf> {
    if marker.is_empty() {
        return None;
    }
    let id = format!(
        "{:016x}{:016x}",
        fnv(0xcbf2_9ce4_8422_2325, marker),
        fnv(0x8422_2325_cbf2_9ce4, marker)
    );
    Some(base()?.join(id))
}

/// Move `pid` into the cgroup of `marker` (made first). False when the
/// host has no such hierarchy or refuses it.
pub fn join(marker: &str, pid: u32) -> bool {
    let Some(dir) = dir_for(marker) else {
        return false;
    };
    if let Err(e) = std::fs::create_dir(&dir)
        && e.kind() != std::io::ErrorKind::AlreadyExists
    {
        return false;
    }
    std::fs::write(dir.join("cgroup.procs"), format!("{pid}\n")).is_ok()
}

/// The processes in the cgroup `dir` now.
pub fn pids(dir: &Path) -> Vec<u32> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .map(|t| t.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

/// Remove the cgroup `dir` once nothing is in it (the kernel refuses while
/// anything is).
pub fn remove(dir: &Path) {
    let _ = std::fs::remove_dir(dir);
}
