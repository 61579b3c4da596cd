//! `top`'s terminal loop: raw mode on the alternate screen, restored on every
//! way out (quit, a signal, the supervisor stopping, a panic). It sleeps in
//! poll(2) on the terminal, the supervisor's event feed and a signal pipe;
//! it redraws when one of them speaks. While a loop process works a run, it
//! also looks at the run's files once a second (their modification times;
//! a file is read again only when it changed), since a run changes state
//! without a supervisor event (a pause settling, a landing).

use super::actions::Actions;
use super::gather;
use super::render::render;
use super::ui::{Command, Ui, Verb};
use super::view::{Inputs, View, build};
use crate::client::{Client, ClientError, EventStream, FollowSpec};
use crate::proto::PaneEntry;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use ratatui::crossterm::{execute, terminal};
use std::io::Read;
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;

/// Where `top` looks.
#[derive(Debug, Clone)]
pub struct TopOptions {
    pub state_dir: PathBuf,
    pub socket: PathBuf,
}

/// Why `top` stopped early.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TopError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("terminal: {0}")]
    Terminal(#[from] std::io::Error),
    #[error("the supervisor stopped; start it again and rerun `drover top`")]
    SupervisorGone,
    /// `top --fleet`: the fleet could not be read.
    #[error(transparent)]
    Fleet(#[from] crate::fleet::FleetError),
}

type Term = ratatui::Terminal<ratatui::backend::CrosstermBackend<std::io::Stdout>>;

fn enter() -> std::io::Result<()> {
    terminal::enable_raw_mode()?;
    execute!(
        std::io::stdout(),
        terminal::EnterAlternateScreen,
        ratatui::crossterm::cursor::Hide
    )
}

/// Give the terminal back as it was; safe to call twice.
pub fn restore() {
    let _ = terminal::disable_raw_mode();
    let _ = execute!(
        std::io::stdout(),
        terminal::LeaveAlternateScreen,
        ratatui::crossterm::cursor::Show
    );
}

struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        restore();
    }
}

/// The terminal as `top` holds it (both `top` and `top --fleet`): raw mode
/// on the alternate screen, given back on every way out; the signals that
/// end it (TERM, HUP, INT) or resize it (WINCH) arrive on a pipe that
/// [`Screen::wait_for`] watches beside the terminal and a feed.
pub(super) struct Screen {
    pub term: Term,
    sig_rd: UnixStream,
    quit: std::sync::Arc<std::sync::atomic::AtomicBool>,
    _restore: Restore,
}

/// Which of the terminal, the feed and the signal pipe spoke.
pub(super) struct Ready {
    pub tty: bool,
    pub feed: bool,
    pub signal: bool,
}

impl Screen {
    /// Take the terminal.
    pub fn open() -> Result<Screen, TopError> {
        let (sig_rd, sig_wr) = UnixStream::pair()?;
        sig_rd.set_nonblocking(true)?;
        let quit = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        for sig in [
            signal_hook::consts::SIGTERM,
            signal_hook::consts::SIGHUP,
            signal_hook::consts::SIGINT,
        ] {
            signal_hook::flag::register(sig, quit.clone())?;
            signal_hook::low_level::pipe::register(sig, sig_wr.try_clone()?)?;
        }
        signal_hook::low_level::pipe::register(signal_hook::consts::SIGWINCH, sig_wr)?;
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            prev(info);
        }));
        enter()?;
        let restore = Restore;
        let term =
            ratatui::Terminal::new(ratatui::backend::CrosstermBackend::new(std::io::stdout()))?;
        Ok(Screen {
            term,
            sig_rd,
            quit,
            _restore: restore,
        })
    }

    /// Sleep in poll(2) until the terminal, `feed` or a signal speaks, for
    /// at most `timeout` when one is given.
    pub fn wait_for(
        &self,
        feed: std::os::fd::BorrowedFd<'_>,
        timeout: Option<std::time::Duration>,
    ) -> Result<Ready, TopError> {
        let timeout = match timeout {
            None => PollTimeout::NONE,
            Some(t) => PollTimeout::try_from(t).unwrap_or(PollTimeout::MAX),
        };
        let stdin = std::io::stdin();
        let mut fds = [
            PollFd::new(stdin.as_fd(), PollFlags::POLLIN),
            PollFd::new(feed, PollFlags::POLLIN),
            PollFd::new(self.sig_rd.as_fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds, timeout) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(TopError::Terminal(e.into())),
        }
        let ready = |i: usize| fds[i].revents().is_some_and(|r| !r.is_empty());
        Ok(Ready {
            tty: ready(0),
            feed: ready(1),
            signal: ready(2),
        })
    }

    /// A signal asked `top` to end.
    pub fn quitting(&self) -> bool {
        self.quit.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// After a signal: empty the pipe; SIGWINCH: the next draw takes the new size.
    pub fn on_signal(&mut self) -> Result<(), TopError> {
        let mut buf = [0u8; 64];
        while matches!(self.sig_rd.read(&mut buf), Ok(n) if n > 0) {}
        self.term.autoresize()?;
        Ok(())
    }
}

/// The keys the terminal sent; `None` once it closed.
pub(super) fn read_keys() -> Result<Option<Vec<super::ui::Key>>, TopError> {
    let mut buf = [0u8; 1024];
    match nix::unistd::read(std::io::stdin().as_fd(), &mut buf) {
        Ok(0) => Ok(None),
        Ok(n) => Ok(Some(super::input::parse(&buf[..n]))),
        Err(nix::errno::Errno::EINTR | nix::errno::Errno::EAGAIN) => Ok(Some(Vec::new())),
        Err(e) => Err(TopError::Terminal(e.into())),
    }
}

struct App {
    opts: TopOptions,
    client: Client,
    ui: Ui,
    view: View,
    /// Our own process and its ancestors: a pane running `top` is not shown,
    /// and its changes (our own drawing) do not wake us.
    ancestors: Vec<u32>,
    self_pane: Option<String>,
    /// What the rows were last built from.
    inputs: Inputs,
    warning: Option<String>,
    /// A problem reading or writing `top/seen.json` (kept in the footer).
    seen_warning: Option<String>,
    /// What `top/seen.json` was last read or written with.
    saved_seen: std::collections::BTreeMap<String, u64>,
    /// The loop's runs, each read again only when its files change.
    runs: super::runs::RunsReader,
}

/// How often `top` looks at a live run's files.
pub const RUN_LOOK: std::time::Duration = std::time::Duration::from_secs(1);

/// This process and its parents, up to a few levels (from /proc).
pub(super) fn ancestors() -> Vec<u32> {
    let mut out = vec![std::process::id()];
    for _ in 0..8 {
        let Some(&pid) = out.last() else { break };
        let ppid = crate::pane::procfs::stat(pid).and_then(|s| u32::try_from(s.ppid).ok());
        match ppid {
            Some(p) if p > 1 => out.push(p),
            _ => break,
        }
    }
    out
}

impl App {
    /// Read everything again (an event or an action may have changed it).
    fn refresh(&mut self) {
        let (mut inp, warning) = gather::inputs(
            &mut self.client,
            crate::statedir::StateDir::new(&self.opts.state_dir),
            &self.ui.seen,
        );
        if let Some(me) = inp.panes.iter().find(|p| {
            let pid = match p {
                PaneEntry::Live(v) => v.info.pid,
                PaneEntry::Lost(l) => l.pid,
            };
            self.ancestors.contains(&pid)
        }) {
            self.self_pane = Some(me.name().to_string());
        }
        inp.panes
            .retain(|p| Some(p.name()) != self.self_pane.as_deref());
        self.runs
            .update(crate::statedir::StateDir::new(&self.opts.state_dir));
        inp.runs = self.runs.runs();
        self.inputs = inp;
        self.warning = warning.or_else(|| self.runs.warning.clone());
        self.rebuild();
    }

    /// Rebuild the rows from what was last read (a key changed only the
    /// selection or what was seen): no git, no state dir, one screen read.
    fn rebuild(&mut self) {
        if self.saved_seen != self.ui.seen {
            self.save_seen();
            self.saved_seen = self.ui.seen.clone();
        }
        self.inputs.seen = self.ui.seen.clone();
        let mut view = build(&self.inputs);
        view.warning = self.seen_warning.clone().or_else(|| self.warning.clone());
        if let Some(p) = self.ui.selected_pane(&view) {
            view.detail = gather::detail(&mut self.client, &p);
        }
        view.seq = self.view.seq;
        self.view = view;
    }
}

impl App {
    /// Record what the operator has seen, for the next `top` too.
    fn save_seen(&mut self) {
        let live = self
            .inputs
            .panes
            .iter()
            .map(|p| p.name().to_string())
            .collect();
        if let Err(e) = super::seen::save(
            crate::statedir::StateDir::new(&self.opts.state_dir),
            &self.ui.seen,
            &live,
        ) {
            self.seen_warning = Some(format!("seen: {e}"));
        }
    }
}

/// Run the dashboard until `q`, Ctrl-C, SIGTERM/SIGHUP or the supervisor stops.
pub fn run(opts: TopOptions, actions: &mut dyn Actions) -> Result<(), TopError> {
    let client = Client::connect(&opts.socket)?;
    let mut feed = EventStream::open(Client::connect(&opts.socket)?, &FollowSpec::default())?;
    let mut screen = Screen::open()?;
    let mut app = App {
        opts,
        client,
        ui: Ui::default(),
        view: View::default(),
        ancestors: ancestors(),
        self_pane: None,
        inputs: Inputs::default(),
        warning: None,
        seen_warning: None,
        saved_seen: Default::default(),
        runs: Default::default(),
    };
    app.view.seq = feed.last_seq;
    match super::seen::load(crate::statedir::StateDir::new(&app.opts.state_dir)) {
        Ok(seen) => {
            app.saved_seen = seen.clone();
            app.ui.seen = seen;
        }
        Err(e) => app.seen_warning = Some(format!("seen: {e}")),
    }
    app.refresh();
    // Draw only when something changed: even an unchanged frame writes bytes,
    // and a pane running `top` would see that as output.
    let mut redraw = true;
    loop {
        if std::mem::take(&mut redraw) {
            screen.term.draw(|f| render(f, &app.view, &app.ui))?;
        }
        let look = app.runs.any_live().then_some(RUN_LOOK);
        let Ready {
            tty,
            feed: ev,
            signal: sig,
        } = screen.wait_for(feed.as_fd(), look)?;
        if screen.quitting() {
            return Ok(());
        }
        let mut dirty = false;
        let mut moved = false;
        if look.is_some()
            && !(tty || ev || sig)
            && app
                .runs
                .update(crate::statedir::StateDir::new(&app.opts.state_dir))
        {
            // Only the runs changed: the rest as it was read.
            app.inputs.runs = app.runs.runs();
            moved = true;
        }
        if sig {
            screen.on_signal()?;
            redraw = true;
        }
        if ev {
            // Drain what is queued: one refresh for a burst of events.
            loop {
                match feed.next_line()? {
                    Some(line) => {
                        // A line this top cannot read still wakes it.
                        let ev = crate::proto::EventLine::parse(&line).ok();
                        if let Some(ev) = &ev {
                            app.view.seq = ev.seq;
                        }
                        let about = ev.as_ref().and_then(|e| e.event.pane());
                        if about.is_none() || about != app.self_pane.as_deref() {
                            dirty = true;
                        }
                    }
                    None => return Err(TopError::SupervisorGone),
                }
                let mut more = [PollFd::new(feed.as_fd(), PollFlags::POLLIN)];
                let queued = poll(&mut more, PollTimeout::ZERO).unwrap_or(0) > 0;
                if !queued {
                    break;
                }
            }
        }
        if tty {
            let Some(keys) = read_keys()? else {
                return Ok(());
            };
            for key in keys {
                redraw = true;
                let before = app.ui.selected_pane(&app.view);
                match app.ui.on_key(&app.view, key) {
                    Command::Quit => return Ok(()),
                    Command::Redraw => {}
                    Command::Attach(p) => {
                        restore();
                        let res = actions.attach(&p);
                        enter()?;
                        screen.term.clear()?;
                        app.ui.message = res.err();
                        dirty = true;
                    }
                    Command::Act(verb, p) => {
                        app.ui.message = Some(format!("{}ing {p}…", verb_ing(verb)));
                        screen.term.draw(|f| render(f, &app.view, &app.ui))?;
                        app.ui.message = Some(match actions.act(verb, &p) {
                            Ok(m) | Err(m) => m,
                        });
                        dirty = true;
                    }
                    Command::Control(run, c) => {
                        app.ui.message = Some(format!("{} of loop{run}…", c.as_str()));
                        screen.term.draw(|f| render(f, &app.view, &app.ui))?;
                        app.ui.message = Some(match actions.control(run, c) {
                            Ok(m) | Err(m) => m,
                        });
                        dirty = true;
                    }
                    Command::Send(p, text) => {
                        app.ui.message = Some(format!("sending to {p}…"));
                        screen.term.draw(|f| render(f, &app.view, &app.ui))?;
                        app.ui.message = Some(match actions.send(&p, &text) {
                            Ok(m) | Err(m) => m,
                        });
                        dirty = true;
                    }
                }
                if app.ui.selected_pane(&app.view) != before || app.ui.seen != app.saved_seen {
                    moved = true;
                }
            }
        }
        if dirty {
            app.refresh();
            redraw = true;
        } else if moved {
            app.rebuild();
            redraw = true;
        }
    }
}

fn verb_ing(v: Verb) -> &'static str {
    match v {
        Verb::Approve => "approv",
        Verb::Deny => "deny",
    }
}
