//! `drover lease …`: write leases, one per task, over [`drover::registry::lease`].

use super::fail;
use super::registry::{AgentArg, json_line, map, out};
use chrono::Utc;
use clap::{Args, Subcommand};
use drover::exit;
use drover::registry::{Agent, lease, scope, view};
use drover::statedir::StateDir;
use std::path::PathBuf;

/// A lease's task: `--task T` (the old positional spelling is still read).
#[derive(Debug, Args)]
pub struct TaskArg {
    /// The task whose lease this is.
    #[arg(
        long = "task",
        value_name = "TASK",
        required_unless_present = "task_positional"
    )]
    task: Option<String>,
    #[arg(value_name = "TASK", hide = true, conflicts_with = "task")]
    task_positional: Option<String>,
}

impl TaskArg {
    fn get(self) -> String {
        self.task.or(self.task_positional).unwrap_or_default()
    }
}

#[derive(Debug, Subcommand)]
pub enum LeaseCmd {
    /// Claim (or, as its owner, renew) the write lease of a task.
    #[command(
        after_help = "Example:\n  drover lease claim --task T-1 --worktree ../wt --file src/ --file Cargo.toml"
    )]
    Claim {
        /// The task to lease.
        #[arg(long)]
        task: String,
        /// Default: the registry's write-lease owner (the Implementer).
        #[arg(long, value_name = "ID")]
        session: Option<String>,
        /// The branch the work happens on.
        #[arg(long)]
        branch: Option<String>,
        /// The worktree the work happens in (resolved; a warning when it does not exist).
        #[arg(long, value_name = "DIR")]
        worktree: Option<PathBuf>,
        /// A claimed path, directory or glob, relative to the worktree (repeatable).
        #[arg(long = "file", value_name = "PATH")]
        files: Vec<String>,
        /// Seconds until the lease expires (default 7200).
        #[arg(long, value_name = "S")]
        ttl_s: Option<u64>,
        /// Print one JSON document: {outcome, lease}.
        #[arg(long)]
        json: bool,
    },
    /// Release a task's lease (--force for a borrowed or recovery-needed one).
    #[command(after_help = "Example:\n  drover lease release --task T-1")]
    Release {
        /// The task whose lease to release.
        #[arg(long)]
        task: String,
        /// Release a borrowed or recovery-needed lease too.
        #[arg(long)]
        force: bool,
    },
    /// Lend the lease to one agent (refused while the other holds it).
    #[command(after_help = "Example:\n  drover lease borrow --task T-1 --agent codex")]
    Borrow {
        /// The task whose lease to lend.
        #[arg(long)]
        task: String,
        /// The agent that borrows it.
        #[arg(long, value_enum)]
        agent: AgentArg,
    },
    /// Give a borrowed lease back.
    #[command(after_help = "Example:\n  drover lease return --task T-1 --agent codex")]
    Return {
        /// The task whose lease to give back.
        #[arg(long)]
        task: String,
        /// The agent that borrowed it.
        #[arg(long, value_enum)]
        agent: AgentArg,
    },
    /// List leases with their current state.
    #[command(after_help = "Example:\n  drover lease ls --json")]
    Ls {
        /// Print one JSON document (an array of leases).
        #[arg(long)]
        json: bool,
    },
    /// One lease and a live look at its worktree.
    #[command(
        alias = "inspect",
        after_help = "Example:\n  drover lease show --task T-1"
    )]
    Show {
        #[command(flatten)]
        task: TaskArg,
        /// Print one JSON document: {lease, worktree_check}.
        #[arg(long)]
        json: bool,
    },
    /// Exit 3 naming the files outside the lease's claimed_files.
    #[command(
        after_help = "Example:\n  drover lease check-scope --task T-1 src/lib.rs docs/cli.md"
    )]
    CheckScope {
        /// The task whose lease to check against.
        #[arg(long)]
        task: Option<String>,
        /// Paths relative to the worktree (without --task, the first is the task).
        #[arg(required = true, value_name = "FILE")]
        files: Vec<String>,
        /// Print one JSON document: {in_scope, out_of_scope, unenforced}.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(cmd: LeaseCmd, state: &StateDir, now: chrono::DateTime<Utc>) -> anyhow::Result<u8> {
    match cmd {
        LeaseCmd::Claim {
            task,
            session,
            branch,
            worktree,
            files,
            ttl_s,
            json,
        } => {
            let req = lease::ClaimRequest {
                task,
                session,
                branch,
                worktree,
                files,
                ttl_s,
            };
            let o = lease::claim(state, &req, now).map_err(map)?;
            let (lease::ClaimOutcome::Claimed(l) | lease::ClaimOutcome::Renewed(l)) = &o;
            if let Some(w) = &l.worktree
                && !std::path::Path::new(w).is_dir()
            {
                eprintln!("drover: warning: the worktree {w} does not exist (yet)");
            }
            if json {
                json_line(&o)?;
            } else {
                let (verb, l) = match &o {
                    lease::ClaimOutcome::Claimed(l) => ("claimed", l),
                    lease::ClaimOutcome::Renewed(l) => ("renewed", l),
                };
                out(&format!(
                    "{verb} {} for {} (owner {}, expires {})\n",
                    l.lease_id, req.task, l.owner_session, l.expires_at
                ));
            }
            Ok(exit::OK)
        }
        LeaseCmd::Release { task, force } => {
            let o = lease::release(state, &task, force, now).map_err(map)?;
            out(&match o {
                lease::ReleaseOutcome::Released => format!("released the lease of {task}\n"),
                lease::ReleaseOutcome::NotHeld => {
                    format!("no lease for {task}; nothing to release\n")
                }
            });
            Ok(exit::OK)
        }
        LeaseCmd::Borrow { task, agent } => {
            let agent = Agent::from(agent);
            let o = lease::borrow(state, &task, agent, now).map_err(map)?;
            out(&match o {
                lease::LendOutcome::Changed => format!("{agent} borrowed the lease of {task}\n"),
                lease::LendOutcome::Unchanged => {
                    format!("{agent} already holds the lease of {task}\n")
                }
            });
            Ok(exit::OK)
        }
        LeaseCmd::Return { task, agent } => {
            let agent = Agent::from(agent);
            let o = lease::give_back(state, &task, agent, now).map_err(map)?;
            out(&match o {
                lease::LendOutcome::Changed => format!("{agent} returned the lease of {task}\n"),
                lease::LendOutcome::Unchanged => format!("the lease of {task} was not borrowed\n"),
            });
            Ok(exit::OK)
        }
        LeaseCmd::Ls { json } => {
            let leases = lease::list(state, now).map_err(map)?;
            if json {
                json_line(&leases)?;
            } else {
                out(&view::leases(&leases, now));
            }
            Ok(exit::OK)
        }
        LeaseCmd::Show { task, json } => {
            let task = task.get();
            let Some(i) = lease::inspect(state, &task, now).map_err(map)? else {
                return Err(fail(exit::REFUSED, format!("no lease for task {task}")));
            };
            if json {
                json_line(&i)?;
            } else {
                let mut s = view::leases(std::slice::from_ref(&i.lease), now);
                if let Some(c) = &i.worktree_check {
                    s += &format!("worktree: {}\n", c.describe());
                }
                if let Some(c) = &i.lease.recovery_command {
                    s += &format!("recovery: {c}\n");
                }
                out(&s);
            }
            Ok(exit::OK)
        }
        LeaseCmd::CheckScope {
            task,
            mut files,
            json,
        } => {
            // The old spelling `check-scope TASK FILE…`.
            let task = match task {
                Some(t) => t,
                None if files.len() >= 2 => files.remove(0),
                None => {
                    return Err(fail(
                        exit::USAGE,
                        "give the task with --task and at least one file",
                    ));
                }
            };
            let s = scope::check_scope(state, &task, &files, now).map_err(map)?;
            if json {
                json_line(&s)?;
            } else if s.out_of_scope.is_empty() {
                out(&format!("{} files in scope of {task}\n", files.len()));
            }
            if s.unenforced {
                eprintln!(
                    "drover: warning: the lease of {task} claims no files; scope is not enforced"
                );
            }
            match s.refusal(&task) {
                Some(e) => Err(map(e)),
                None => Ok(exit::OK),
            }
        }
    }
}
