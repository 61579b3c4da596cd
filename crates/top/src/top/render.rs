//! Drawing `top`: a pure function of the view and the interaction state, so
//! a screen can be checked cell for cell on a test backend.

use super::columns::{Col, Elide, elide, fit_keeping, total, wanted};
use super::runs_lines;
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
pub const KEYS_HELP: &str = "enter attach  a approve  d deny  s send  n next  / filter  p/r/c pause/resume/close run  q quit";
/// From this width on the lane columns always show (narrower, they show
/// when every column fits whole).
pub const WIDE_FROM: u16 = 175;

pub(crate) use super::columns::{clip, clip_middle};

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
        .count()
        + view.runs.iter().filter(|r| r.needs_human()).count();
    let gate = match &view.gate {
        None => "ship gate: -".to_string(),
        Some(g) => g.words.clone(),
    };
    let filter = if ui.filter.is_empty() {
        String::new()
    } else {
        format!("  filter /{}", ui.filter)
    };
    format!(
        "drover top  {} rows  {need} need you  as of {}{filter}  {gate}",
        view.rows.len(),
        clock(view.now_ms)
    )
}

fn footer(view: &View, ui: &Ui) -> String {
    match &ui.mode {
        Mode::Confirm { verb, pane } => format!("{} {pane}? y/N", verb.as_str()),
        Mode::ConfirmRun { control, run } => format!(
            "{} loop{run} (in-flight work finishes and lands, then the run closes)? y/N",
            control.as_str()
        ),
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
        c.push(r.usage.map_or("-".into(), |u| u.brief()));
    }
    c
}

/// The table's columns; the lane columns (VERSION, LANE, WORKTREE, +/-,
/// PARKED) and USAGE (what the pane's agent reported using) only when `wide`.
fn columns(wide: bool) -> Vec<Col> {
    let col = |title, min, max, elide| Col {
        title,
        min,
        max,
        elide,
        keep: matches!(title, "PANE" | "STATE"),
    };
    use Elide::{End, Middle};
    let mut c = vec![
        col("", 1, 1, End),
        col("PANE", 10, 32, Middle),
        col("STATE", 8, 24, End),
        col("SINCE", 5, 5, End),
        col("AGENT", 6, 8, End),
    ];
    if wide {
        c.push(col("VERSION", 7, 12, Middle));
    }
    c.extend([
        col("JOB", 7, 48, Middle),
        col("DECISION", 8, 24, Middle),
        col("LEASE", 7, 40, Middle),
        col("HEARTBEAT", 9, 20, End),
    ]);
    if wide {
        c.extend([
            col("LANE", 10, 32, Middle),
            col("WORKTREE", 8, 17, End),
            col("+/-", 5, 9, End),
            col("PARKED", 6, 25, Middle),
            col("USAGE", 5, 32, End),
        ]);
    }
    c
}

/// The columns and their widths for `cells` at `width`: the lane columns
/// when the screen is [`WIDE_FROM`] wide or they all fit whole; each column
/// as wide as its widest cell, the widest giving way first when they do not
/// fit (`fit`).
pub fn layout(
    rows: &[Vec<String>],
    narrow: &[Vec<String>],
    width: u16,
) -> (bool, Vec<Col>, Vec<usize>) {
    let want = |cols: &[Col], cells: &[Vec<String>]| -> Vec<usize> {
        cols.iter()
            .enumerate()
            .map(|(i, c)| wanted(c, cells.iter().filter_map(|r| r.get(i).map(String::as_str))))
            .collect()
    };
    let spacing = SPACING as usize;
    let wide_cols = columns(true);
    let wide_want = want(&wide_cols, rows);
    let wide = width >= WIDE_FROM || total(&wide_want, spacing) <= width as usize;
    let (cols, want) = if wide {
        (wide_cols, wide_want)
    } else {
        let cols = columns(false);
        let w = want(&cols, narrow);
        (cols, w)
    };
    let avail = (width as usize).saturating_sub(spacing * want.len().saturating_sub(1));
    let mins: Vec<usize> = cols.iter().map(|c| c.min).collect();
    let keep: Vec<bool> = cols.iter().map(|c| c.keep).collect();
    let widths = fit_keeping(&want, &mins, &keep, avail);
    (wide, cols, widths)
}

/// Draw one frame.
pub fn render(f: &mut Frame, view: &View, ui: &Ui) {
    let area = f.area();
    let rows = visible(view, &ui.filter);
    let mut body = area.height.saturating_sub(2);
    // The loop's runs first (at most a third of the screen, more when there
    // are no panes), then the table, leaving the detail pane its share.
    let runs_max = if rows.is_empty() { body / 2 } else { body / 3 };
    let run_lines = runs_lines::lines(
        &view.runs,
        view.older_runs,
        ui.selected_run(view),
        area.width as usize,
        runs_max as usize,
    );
    let runs_h = run_lines.len() as u16;
    body = body.saturating_sub(runs_h);
    let detail_h = (body / 3).max(MIN_DETAIL.min(body / 2));
    let table_h = (rows.len() as u16 + 1)
        .min(body.saturating_sub(detail_h))
        .max(1);
    let [head, runs_area, table_area, detail_area, foot] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(runs_h),
        Constraint::Length(table_h),
        Constraint::Min(0),
        Constraint::Length(1),
    ])
    .areas(area);
    if runs_h > 0 {
        let lines: Vec<Line> = run_lines.into_iter().map(Line::raw).collect();
        f.render_widget(Paragraph::new(lines), runs_area);
    }
    f.render_widget(
        Paragraph::new(clip(&header(view, ui), area.width as usize)),
        head,
    );
    let wide_cells: Vec<Vec<String>> = rows.iter().map(|r| cells(r, view.now_ms, true)).collect();
    let narrow_cells: Vec<Vec<String>> =
        rows.iter().map(|r| cells(r, view.now_ms, false)).collect();
    let (wide, cols, sizes) = layout(&wide_cells, &narrow_cells, area.width);
    let shown = if wide { &wide_cells } else { &narrow_cells };
    let titles: Vec<&str> = cols.iter().map(|c| c.title).collect();
    let table_rows: Vec<Row> = shown
        .iter()
        .map(|c| {
            Row::new(
                c.iter()
                    .zip(cols.iter().zip(&sizes))
                    .map(|(s, (col, n))| Cell::from(elide(s, *n, col.elide)))
                    .collect::<Vec<_>>(),
            )
        })
        .collect();
    let last = sizes.len().saturating_sub(1);
    let widths: Vec<Constraint> = sizes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            if i == last {
                Constraint::Min(*n as u16)
            } else {
                Constraint::Length(*n as u16)
            }
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
    let title = match (ui.selected_pane(view), view.runs.first()) {
        (Some(p), _) => format!(" {p} "),
        // A run without live lanes (paused, interrupted, between tasks) is
        // what there is to see: said above, with its keys.
        (None, Some(_)) => {
            let n = ui.selected_run(view).unwrap_or_default();
            let r = view.runs.iter().find(|r| r.n == n);
            let state = r.map_or("", |r| r.state.as_str());
            format!(
                " loop{n} {state}: no lane panes live · {} ",
                runs_lines::RUN_KEYS
            )
        }
        (None, None) => " no panes: `drover pane new` or `drover lane up` ".to_string(),
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
    use super::*;

    fn row(job: &str, lease: &str) -> Vec<String> {
        let mut r: Vec<String> = vec![" ", "l3-impl-task-7", "working", "5s", "claude", "2.1.197"]
            .into_iter()
            .map(String::from)
            .collect();
        r.extend([
            job.into(),
            "hold_working".into(),
            lease.into(),
            "working 3s".into(),
        ]);
        r.extend(["l3-impl-task-7", "clean", "+1/-0", "-"].map(String::from));
        r
    }

    fn narrow(r: &[String]) -> Vec<String> {
        let mut n = r[..5].to_vec();
        n.extend(r[6..10].iter().cloned());
        n
    }

    #[test]
    fn at_160_columns_long_ids_show_whole() {
        let job = "loop3-implement-TASK-7-attempt-2";
        let lease = "TASK-7:active";
        let wide = vec![row(job, lease)];
        let narrow_rows: Vec<Vec<String>> = wide.iter().map(|r| narrow(r)).collect();
        let (is_wide, cols, w) = layout(&wide, &narrow_rows, 160);
        let at = |t: &str| cols.iter().position(|c| c.title == t).unwrap_or(usize::MAX);
        assert!(is_wide, "every column fits whole at 160: {w:?}");
        assert!(w[at("JOB")] >= job.len() && w[at("LEASE")] >= lease.len());
        assert!(total(&w, 1) <= 160);
    }

    #[test]
    fn at_80_columns_ids_lose_their_middle_not_their_tail() {
        let job = "loop3-implement-TASK-7-attempt-2";
        let wide = vec![row(job, "TASK-7:active")];
        let narrow_rows: Vec<Vec<String>> = wide.iter().map(|r| narrow(r)).collect();
        let (is_wide, cols, w) = layout(&wide, &narrow_rows, 80);
        assert!(!is_wide);
        assert!(total(&w, 1) <= 80, "{w:?}");
        let j = cols.iter().position(|c| c.title == "JOB").unwrap_or(0);
        let cut = elide(job, w[j], cols[j].elide);
        assert!(cut.ends_with("attempt-2") || cut.ends_with("-2"), "{cut}");
        assert!(cut.starts_with("loop3"), "{cut}");
    }
}
