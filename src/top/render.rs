//! Drawing `top`: a pure function of the view and the interaction state, so
//! a screen can be checked cell for cell on a test backend.

use super::state::RowState;
use super::ui::{Mode, Ui, visible};
use super::view::{Row as ViewRow, View, ago};
use crate::agent::State;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table, TableState};

/// The space between columns.
const SPACING: u16 = 1;
/// The detail pane never gets fewer lines than this (when the screen has them).
pub const MIN_DETAIL: u16 = 5;
/// The keys, as the footer lists them.
pub const KEYS_HELP: &str = "enter attach  a approve  d deny  s send  n next  / filter  q quit";

pub(super) fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n.saturating_sub(1)).collect::<String>() + "…"
    }
}

/// A name cut to `n` characters in the middle, so the tail that tells
/// lanes apart (`-claude`, `-codex`) stays visible.
pub(super) fn clip_middle(s: &str, n: usize) -> String {
    let len = s.chars().count();
    if len <= n || n < 5 {
        return clip(s, n);
    }
    let tail = (n - 1) / 2;
    let head = n - 1 - tail;
    let start: String = s.chars().take(head).collect();
    let end: String = s.chars().skip(len - tail).collect();
    format!("{start}…{end}")
}

fn state_text(r: &ViewRow) -> String {
    match (&r.state_kind, r.exit_code) {
        (Some(k), _) => format!("{}:{k}", r.state),
        (None, Some(c)) if r.state == RowState::Agent(State::Exited) => format!("exited:{c}"),
        _ => r.state.to_string(),
    }
}

pub(super) fn clock(ms: u64) -> String {
    chrono::DateTime::from_timestamp_millis(ms as i64)
        .map(|t| t.format("%H:%M:%S").to_string())
        .unwrap_or_else(|| "--:--:--".into())
}

fn header(view: &View, ui: &Ui) -> String {
    let need = view
        .rows
        .iter()
        .filter(|r| r.attention.needs_human())
        .count();
    let gate = match &view.gate {
        None => "gate -".to_string(),
        Some(g) if g.ready => "gate ready".to_string(),
        Some(g) => format!("gate blocked ({})", g.reasons),
    };
    let filter = if ui.filter.is_empty() {
        String::new()
    } else {
        format!("  filter /{}", ui.filter)
    };
    format!(
        "drover top  {} rows  {need} need you  {gate}  as of {}{filter}",
        view.rows.len(),
        clock(view.now_ms)
    )
}

fn footer(view: &View, ui: &Ui) -> String {
    match &ui.mode {
        Mode::Confirm { verb, pane } => format!("{} {pane}? y/N", verb.as_str()),
        Mode::Send { pane, text } => format!("send to {pane} (enter sends, esc cancels): {text}_"),
        Mode::Filter => format!("filter (enter keeps, esc clears): /{}_", ui.filter),
        Mode::Normal => ui
            .message
            .clone()
            .or_else(|| view.warning.clone())
            .unwrap_or_else(|| KEYS_HELP.to_string()),
    }
}

fn cells(r: &ViewRow, now_ms: u64, wide: bool) -> Vec<String> {
    let job = r.job.as_ref();
    let mut c = vec![
        r.attention.mark().to_string(),
        r.pane.clone(),
        state_text(r),
        ago(now_ms, r.since_ms),
        r.agent.clone(),
    ];
    if wide {
        c.push(r.agent_version.clone().unwrap_or_else(|| "-".into()));
    }
    c.push(job.map_or("-".into(), |j| j.job_id.clone()));
    c.push(
        job.and_then(|j| j.decision.clone())
            .unwrap_or_else(|| "-".into()),
    );
    c.push(r.lease.clone().unwrap_or_else(|| "-".into()));
    c.push(r.heartbeat.as_ref().map_or("-".into(), |h| {
        let age = h.at_ms.map(|t| format!(" {}", ago(now_ms, t)));
        format!(
            "{}{}{}",
            h.status,
            if h.stale { "!" } else { "" },
            age.unwrap_or_default()
        )
    }));
    if wide {
        c.push(r.lane_id.clone().unwrap_or_else(|| "-".into()));
        c.push(r.worktree_state.map_or("-", |w| w.as_str()).into());
        c.push(
            r.ahead_behind
                .map_or("-".into(), |(a, b)| format!("+{a}/-{b}")),
        );
        c.push(r.parked_until.clone().unwrap_or_else(|| "-".into()));
    }
    c
}

fn columns(wide: bool) -> (Vec<&'static str>, Vec<Constraint>) {
    use Constraint::{Length, Min};
    if wide {
        (
            vec![
                "",
                "PANE",
                "STATE",
                "SINCE",
                "AGENT",
                "VERSION",
                "JOB",
                "DECISION",
                "LEASE",
                "HEARTBEAT",
                "LANE",
                "WORKTREE",
                "+/-",
                "PARKED",
            ],
            vec![
                Length(1),
                Length(18),
                Length(20),
                Length(5),
                Length(6),
                Length(9),
                Length(14),
                Length(16),
                Length(16),
                Length(14),
                Length(18),
                Length(9),
                Length(8),
                Min(8),
            ],
        )
    } else {
        (
            vec![
                "",
                "PANE",
                "STATE",
                "SINCE",
                "AGENT",
                "JOB",
                "DECISION",
                "LEASE",
                "HEARTBEAT",
            ],
            vec![
                Length(1),
                Length(15),
                Length(12),
                Length(5),
                Length(6),
                Length(7),
                Length(8),
                Length(7),
                Min(6),
            ],
        )
    }
}

/// From this width on, the lane columns show: the wide layout's own width,
/// so no column is squeezed below what it was given.
pub fn wide_width() -> u16 {
    let (_, widths) = columns(true);
    let cols: u16 = widths
        .iter()
        .map(|w| match w {
            Constraint::Length(n) | Constraint::Min(n) => *n,
            _ => 0,
        })
        .sum();
    cols + SPACING * (widths.len() as u16 - 1)
}

/// Draw one frame.
pub fn render(f: &mut Frame, view: &View, ui: &Ui) {
    let area = f.area();
    let rows = visible(view, &ui.filter);
    let body = area.height.saturating_sub(2);
    // The table takes what its rows need, leaving the detail pane its share.
    let detail_h = (body / 3).max(MIN_DETAIL.min(body / 2));
    let table_h = (rows.len() as u16 + 1)
        .min(body.saturating_sub(detail_h))
        .max(1);
    let [head, table_area, detail_area, foot] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(table_h),
        Constraint::Min(0),
        Constraint::Length(1),
    ])
    .areas(area);
    f.render_widget(
        Paragraph::new(clip(&header(view, ui), area.width as usize)),
        head,
    );
    let wide = area.width >= wide_width();
    let (titles, widths) = columns(wide);
    let limits: Vec<usize> = widths
        .iter()
        .map(|w| match w {
            Constraint::Length(n) => *n as usize,
            _ => area.width as usize,
        })
        .collect();
    let table_rows: Vec<Row> = rows
        .iter()
        .map(|r| {
            let c = cells(r, view.now_ms, wide);
            Row::new(
                c.iter()
                    .zip(&limits)
                    .enumerate()
                    .map(|(i, (s, n))| {
                        Cell::from(if i == 1 || (wide && i == 10) {
                            clip_middle(s, *n)
                        } else {
                            clip(s, *n)
                        })
                    })
                    .collect::<Vec<_>>(),
            )
        })
        .collect();
    let table = Table::new(table_rows, widths)
        .header(Row::new(titles).style(Style::new().add_modifier(Modifier::BOLD)))
        .column_spacing(SPACING)
        .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED));
    let mut state = TableState::default().with_selected(ui.selected_index(&rows));
    f.render_stateful_widget(table, table_area, &mut state);
    draw_detail(f, view, ui, detail_area);
    f.render_widget(
        Paragraph::new(clip(&footer(view, ui), area.width as usize)),
        foot,
    );
}

fn draw_detail(f: &mut Frame, view: &View, ui: &Ui, area: Rect) {
    if area.height == 0 {
        return;
    }
    let title = match ui.selected_pane(view) {
        Some(p) => format!(" {p} "),
        None => " no panes: `drover pane new` or `drover lane up` ".to_string(),
    };
    let inner = area.height.saturating_sub(1) as usize;
    let lines: Vec<Line> = view
        .detail
        .iter()
        .skip(view.detail.len().saturating_sub(inner))
        .map(|l| Line::raw(clip(l, area.width as usize)))
        .collect();
    let block = Block::new().borders(Borders::TOP).title(title);
    f.render_widget(Paragraph::new(lines).block(block), area);
}

#[cfg(test)]
mod tests {
    use super::clip_middle;

    #[test]
    fn the_wide_layout_starts_where_it_fits() {
        assert_eq!(super::wide_width(), 175);
    }

    #[test]
    fn clip_middle_keeps_the_tail_that_tells_lanes_apart() {
        assert_eq!(clip_middle("implementer-claude", 15), "impleme…-claude");
        assert_eq!(clip_middle("implementer-codex", 15), "impleme…r-codex");
        assert_eq!(clip_middle("short", 16), "short");
        assert_eq!(clip_middle("abcdef", 3), "ab…");
    }
}
