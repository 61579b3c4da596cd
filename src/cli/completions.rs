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
fn collect(cmd: &clap::Command, pages: &mut Vec<Page>) {
    pages.push(Page(cmd.clone()));
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        collect(sub, pages);
    }
}

/// One man page: clap_mangen's, with drover's name and version in the
/// footer (it put the command's last word: `"run 0.1.0"`) and a synopsis that
/// keeps each flag's value (`[--charter <FILE>]`, where it printed `[--charter]`).
struct Page(clap::Command);

impl Page {
    fn man(&self) -> clap_mangen::Man {
        clap_mangen::Man::new(self.0.clone())
            .source(format!("drover {}", env!("CARGO_PKG_VERSION")))
    }

    fn render(&self, out: &mut Vec<u8>) -> std::io::Result<()> {
        let mut page = Vec::new();
        self.man().render(&mut page)?;
        let text = String::from_utf8_lossy(&page);
        let head = ".SH SYNOPSIS\n";
        match text.find(head) {
            Some(at) => {
                let body = at + head.len();
                let end = text[body..].find("\n.SH ").map_or(text.len(), |e| body + e);
                out.extend_from_slice(text[..body].as_bytes());
                out.extend_from_slice(synopsis(&self.0).as_bytes());
                out.extend_from_slice(text[end..].as_bytes());
            }
            None => out.extend_from_slice(text.as_bytes()),
        }
        Ok(())
    }

    fn generate_to(&self, dir: &std::path::Path) -> std::io::Result<PathBuf> {
        let path = dir.join(format!(
            "{}.1",
            self.0.get_display_name().unwrap_or("drover")
        ));
        let mut out = Vec::new();
        self.render(&mut out)?;
        std::fs::write(&path, out)?;
        Ok(path)
    }
}

/// Roff for text shown literally: backslashes and hyphens escaped.
fn roff(s: &str) -> String {
    s.replace('\\', "\\e").replace('-', "\\-")
}

/// The synopsis line: the command, then each visible argument with the
/// value it takes.
fn synopsis(cmd: &clap::Command) -> String {
    let name = cmd.get_bin_name().unwrap_or(cmd.get_name());
    let mut line = format!("\\fB{}\\fR", roff(name));
    for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
        let values = arg
            .get_value_names()
            .map(|v| {
                v.iter()
                    .map(|n| format!("<\\fI{}\\fR>", roff(n)))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_else(|| {
                vec![format!(
                    "<\\fI{}\\fR>",
                    roff(&arg.get_id().as_str().to_uppercase())
                )]
            });
        let takes = arg.get_num_args().is_some_and(|n| n.takes_values());
        let many = matches!(
            arg.get_action(),
            clap::ArgAction::Append | clap::ArgAction::Count
        );
        let mut item = if arg.is_positional() {
            values.join(" ")
        } else {
            let mut names = Vec::new();
            if let Some(s) = arg.get_short() {
                names.push(format!("\\fB\\-{}\\fR", roff(&s.to_string())));
            }
            if let Some(l) = arg.get_long() {
                names.push(format!("\\fB\\-\\-{}\\fR", roff(l)));
            }
            let mut f = names.join("|");
            if takes {
                f.push(' ');
                f.push_str(&values.join(" "));
            }
            f
        };
        if !arg.is_required_set() {
            item = format!("[{item}]");
        }
        if many {
            item.push_str("...");
        }
        line.push(' ');
        line.push_str(&item);
    }
    for _ in cmd.get_subcommands().filter(|s| !s.is_hide_set()).take(1) {
        line.push_str(" <\\fIsubcommands\\fR>");
    }
    line.push('\n');
    line
}
