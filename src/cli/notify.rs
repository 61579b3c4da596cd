//! `drover loop notify-test`: one test notification to `--notify-url`, to
//! check a notification setup (TLS, proxy, topic) before a night.

use super::fail;
use clap::Args;
use drover::exit;
use drover::loopctl::night::notify::{self, Note, Targets, intent_id};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct NotifyTestArgs {
    /// POST the test notification here, as `loop run --notify-url` would.
    #[arg(long, value_name = "URL")]
    pub notify_url: String,
    /// Trust only this PEM bundle for an https:// URL (default: the system's trust store).
    #[arg(long, value_name = "FILE")]
    pub notify_ca: Option<PathBuf>,
    /// Print one JSON document: whether it was delivered, and why not.
    #[arg(long)]
    pub json: bool,
}

/// Send it once (no retry: the answer is the point); exit 1 when it was
/// not delivered, saying why.
pub fn notify_test(a: NotifyTestArgs) -> anyhow::Result<u8> {
    let targets = Targets {
        url: Some(a.notify_url.clone()),
        ca_file: a.notify_ca,
        ..Default::default()
    };
    let agent = notify::http_agent(&targets).map_err(|e| fail(exit::USAGE, e))?;
    let at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let note = Note {
        intent_id: intent_id("test", "test", &at),
        // No run: its title is `drover test notification`.
        event: "test notification".into(),
        run: String::new(),
        task: None,
        text: "drover test notification".into(),
        at,
    };
    let result = notify::post(&agent, &a.notify_url, &note);
    if a.json {
        println!(
            "{}",
            serde_json::json!({"delivered": result.is_ok(), "error": result.as_ref().err()})
        );
    } else {
        match &result {
            Ok(()) => println!("delivered a test notification to {}", a.notify_url),
            Err(e) => eprintln!("drover: not delivered to {}: {e}", a.notify_url),
        }
    }
    Ok(if result.is_ok() {
        exit::OK
    } else {
        exit::ERROR
    })
}
