//! What `top`'s keys do outside the screen, behind a trait so the loop can
//! be driven without a supervisor: attach (the operator's terminal goes to
//! the pane until detach), approve/deny a blocked agent, send a prompt.

use super::ui::Verb;
use crate::client::Client;
use crate::proto::args;
use crate::runstate::control::Control;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// How long a prompt sent from `top` may wait for the agent to be ready, and
/// then to show it started.
pub const SEND_READY_MS: u64 = 10_000;
pub const SEND_CONFIRM_MS: u64 = 10_000;

/// The side effects of `top`'s keys. Each returns the footer's message.
pub trait Actions {
    /// Hand the terminal to the pane until the operator detaches.
    fn attach(&mut self, pane: &str) -> Result<(), String>;
    /// Approve or deny what a blocked agent asks.
    fn act(&mut self, verb: Verb, pane: &str) -> Result<String, String>;
    /// Deliver a prompt (confirmed as `drover send` does).
    fn send(&mut self, pane: &str, text: &str) -> Result<String, String>;
    /// Set a control on loop run `run`, with `drover loop control`'s
    /// authority and checks (a closed run refuses it).
    fn control(&mut self, run: u32, control: Control) -> Result<String, String>;
}

/// The reason `top`'s run keys record in `DECISIONS.md`.
pub const CONTROL_REASON: &str = "drover top";

/// The real actions: the drover binary's own commands for attach,
/// approve/deny and `loop control`, the supervisor's delivery for send (a prompt never goes
/// through another process's argv).
#[derive(Debug, Clone)]
pub struct CliActions {
    pub exe: PathBuf,
    pub state_dir: PathBuf,
    pub socket: PathBuf,
}

fn first_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default()
        .trim()
        .to_string()
}

impl CliActions {
    fn drover(&self) -> Command {
        let mut c = Command::new(&self.exe);
        c.arg("--state-dir")
            .arg(&self.state_dir)
            .arg("--no-autostart");
        c
    }
}

impl Actions for CliActions {
    fn attach(&mut self, pane: &str) -> Result<(), String> {
        let st = self
            .drover()
            .args(["attach", pane])
            .status()
            .map_err(|e| format!("cannot run attach: {e}"))?;
        if st.success() {
            Ok(())
        } else {
            Err(format!("attach {pane} ended with {st}"))
        }
    }

    fn act(&mut self, verb: Verb, pane: &str) -> Result<String, String> {
        let out = self
            .drover()
            .args([verb.as_str(), pane])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run {}: {e}", verb.as_str()))?;
        if out.status.success() {
            let said = first_line(&out.stdout);
            Ok(if said.is_empty() {
                format!("{} {pane}: done", verb.as_str())
            } else {
                said
            })
        } else {
            Err(format!(
                "{} {pane} failed: {}",
                verb.as_str(),
                first_line(&out.stderr)
            ))
        }
    }

    fn control(&mut self, run: u32, control: Control) -> Result<String, String> {
        let what = format!("{} of loop{run}", control.as_str());
        let out = self
            .drover()
            .args(["loop", "control", &format!("loop{run}"), control.as_str()])
            .args(["--reason", CONTROL_REASON])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run loop control: {e}"))?;
        if out.status.success() {
            let said = first_line(&out.stdout);
            Ok(if said.is_empty() {
                format!("{what}: done")
            } else {
                said
            })
        } else {
            Err(format!("{what} refused: {}", first_line(&out.stderr)))
        }
    }

    fn send(&mut self, pane: &str, text: &str) -> Result<String, String> {
        let mut c = Client::connect(&self.socket).map_err(|e| e.to_string())?;
        let v = c
            .call(args::Deliver {
                pane: pane.to_string(),
                text: text.to_string(),
                nonce: None,
                ready_timeout_ms: Some(SEND_READY_MS),
                confirm_timeout_ms: Some(SEND_CONFIRM_MS),
            })
            .map_err(|e| format!("send to {pane} failed: {e}"))?;
        Ok(format!("delivered to {pane} (now {})", v.state))
    }
}
