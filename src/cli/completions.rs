//! `drover completions SHELL` and `drover man`: generated from the clap
//! definitions, so they never drift from the commands.

use super::{Cli, fail};
use clap::CommandFactory;
use drover::exit;
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ShellArg {
    Bash,
    Zsh,
    Fish,
}

#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: ShellArg,
}

#[derive(Debug, clap::Args)]
pub struct ManArgs {
    /// Write `drover.1` and one page per command (`drover-pane-new.1`, …) here
    /// instead of printing `drover.1`.
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
}

pub fn completions(a: CompletionsArgs) -> anyhow::Result<u8> {
    let shell = match a.shell {
        ShellArg::Bash => clap_complete::Shell::Bash,
        ShellArg::Zsh => clap_complete::Shell::Zsh,
        ShellArg::Fish => clap_complete::Shell::Fish,
    };
    let mut cmd = Cli::command();
    clap_complete::generate(shell, &mut cmd, "drover", &mut std::io::stdout());
    Ok(exit::OK)
}

pub fn man(a: ManArgs) -> anyhow::Result<u8> {
    let cmd = Cli::command();
    match a.out_dir {
        Some(dir) => {
            std::fs::create_dir_all(&dir)
                .map_err(|e| fail(exit::ERROR, format!("cannot create {}: {e}", dir.display())))?;
            clap_mangen::generate_to(cmd, &dir).map_err(|e| {
                fail(
                    exit::ERROR,
                    format!("cannot write to {}: {e}", dir.display()),
                )
            })?;
        }
        None => {
            let mut out = Vec::new();
            clap_mangen::Man::new(cmd)
                .render(&mut out)
                .map_err(|e| fail(exit::ERROR, e.to_string()))?;
            use std::io::Write;
            // A closed pipe (`drover man | head`) is not an error worth reporting.
            let _ = std::io::stdout().write_all(&out);
        }
    }
    Ok(exit::OK)
}
