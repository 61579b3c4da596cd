//! `drover completions SHELL` and `drover man [COMMAND]`: generated from the
//! clap definitions, so they never drift from the commands.

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
    /// Only this command's page and the pages under it (e.g. `pane new`).
    #[arg(value_name = "COMMAND")]
    pub command: Vec<String>,
    /// Write `drover.1` and one page per command (`drover-pane-new.1`, …) here
    /// and list the files written, instead of printing the pages.
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
    // Generated into memory: clap_complete panics on a failed write.
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "drover", &mut out);
    use std::io::Write;
    // A closed pipe (`drover completions bash | head -1`) is not an error worth reporting.
    let _ = std::io::stdout().write_all(&out);
    Ok(exit::OK)
}

pub fn man(a: ManArgs) -> anyhow::Result<u8> {
    // Built once so every subcommand carries its full name (`drover-pane-new`).
    let mut top = Cli::command().disable_help_subcommand(true);
    top.build();
    let mut at = &top;
    for word in &a.command {
        at = at
            .get_subcommands()
            .find(|c| c.get_name() == word && !c.is_hide_set())
            .ok_or_else(|| {
                fail(
                    exit::USAGE,
                    format!(
                        "no command `{}` to print a page for; `drover --help` lists them",
                        a.command.join(" ")
                    ),
                )
            })?;
    }
    let mut pages = Vec::new();
    collect(at, &mut pages);
    match a.out_dir {
        Some(dir) => {
            std::fs::create_dir_all(&dir)
                .map_err(|e| fail(exit::ERROR, format!("cannot create {}: {e}", dir.display())))?;
            for page in pages {
                let path = page.generate_to(&dir).map_err(|e| {
                    fail(
                        exit::ERROR,
                        format!("cannot write to {}: {e}", dir.display()),
                    )
                })?;
                println!("{}", path.display());
            }
        }
        None => {
            let mut out = Vec::new();
            for page in pages {
                page.render(&mut out)
                    .map_err(|e| fail(exit::ERROR, e.to_string()))?;
            }
            use std::io::Write;
            // A closed pipe (`drover man | head`) is not an error worth reporting.
            let _ = std::io::stdout().write_all(&out);
        }
    }
    Ok(exit::OK)
}

/// `cmd`'s page, then the pages of its visible subcommands, depth first: the
/// order a reader meets them in `drover --help`.
fn collect(cmd: &clap::Command, pages: &mut Vec<clap_mangen::Man>) {
    pages.push(clap_mangen::Man::new(cmd.clone()));
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        collect(sub, pages);
    }
}
