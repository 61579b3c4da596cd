//! The names of the environment drover reads and sets (`DROVER_*`), each
//! spelled once. The lane contract (docs/lanes.md) is what a lane's agent
//! and its `drover report` find in their environment; the rest are knobs
//! and markers drover reads for itself.

/// The state dir (also `--state-dir`).
pub const STATE_DIR: &str = "DROVER_STATE_DIR";
/// The supervisor's socket, set in a lane.
pub const SOCKET: &str = "DROVER_SOCKET";
/// The lane's id.
pub const LANE_ID: &str = "DROVER_LANE_ID";
/// The lane's session id (its role's session, e.g. `implementer`).
pub const SESSION_ID: &str = "DROVER_SESSION_ID";
/// The lane's role.
pub const ROLE: &str = "DROVER_ROLE";
/// The agent kind a lane runs (`claude`, `codex`, `sim`).
pub const AGENT: &str = "DROVER_AGENT";
/// The lane's own folder under the state dir (where its report goes).
pub const LANE_DIR: &str = "DROVER_LANE_DIR";
/// A lane's own port range starts here (its width `lane::ports::STEP`).
pub const PORT_BASE: &str = "DROVER_PORT_BASE";
/// Where lanes' port bases start when set (default 20000).
pub const PORT_START: &str = "DROVER_PORT_START";
/// The attempt an agent's report belongs to.
pub const ATTEMPT_ID: &str = "DROVER_ATTEMPT_ID";
/// For a landing's gate: the integration branch, its head and the run.
pub const INTEGRATION_BRANCH: &str = "DROVER_INTEGRATION_BRANCH";
/// The integration branch's head a landing's gate runs on.
pub const INTEGRATION_SHA: &str = "DROVER_INTEGRATION_SHA";
/// The run (`loop<n>`) a landing's gate belongs to.
pub const LOOP_RUN: &str = "DROVER_LOOP_RUN";

/// The pane backend (`native`, `tmux`, `herdr`).
pub const BACKEND: &str = "DROVER_BACKEND";
/// The tmux binary drover runs.
pub const TMUX: &str = "DROVER_TMUX";
/// The herdr binary drover runs.
pub const HERDR: &str = "DROVER_HERDR";
/// The herdr session drover's panes are in.
pub const HERDR_SESSION: &str = "DROVER_HERDR_SESSION";
/// Marks every process of a pane (its value names the pane).
pub const PANE: &str = "DROVER_PANE";
/// `off`: lanes start their agents without the agents' own signals (the
/// lanes' `--no-signals`; docs/agents.md, "The agents' own signals").
pub const SIGNALS: &str = "DROVER_SIGNALS";
/// Marks every process a loop starts, so a killed loop's leftovers are found.
pub const LOOP_CHILD: &str = "DROVER_LOOP_CHILD";
/// Stands in for the boot id (tests simulate a reboot with it).
pub const BOOT_ID: &str = "DROVER_BOOT_ID";
/// A test's crash point: the engine's writer kills itself (SIGKILL) at the
/// N-th crash point it passes (src/engine/crash.rs).
pub const ENGINE_CRASH_AT: &str = "DROVER_ENGINE_CRASH_AT";
/// How long a store lock is waited for, in ms.
pub const LOCK_WAIT_MS: &str = "DROVER_LOCK_WAIT_MS";
/// Shadow autocomplete on or off.
pub const AUTOCOMPLETE: &str = "DROVER_AUTOCOMPLETE";
/// Where a sim agent writes its trace.
pub const SIM_TRACE: &str = "DROVER_SIM_TRACE";
/// The agent versions a rehearsal runs.
pub const AGENT_VERSIONS: &str = "DROVER_AGENT_VERSIONS";
/// Where the installed agents are.
pub const AGENTS_DIR: &str = "DROVER_AGENTS_DIR";
/// The fleet's NATS password (never reaches a pane).
pub const NATS_PASSWORD: &str = "DROVER_NATS_PASSWORD";
/// The fleet's NATS token (never reaches a pane).
pub const NATS_TOKEN: &str = "DROVER_NATS_TOKEN";
