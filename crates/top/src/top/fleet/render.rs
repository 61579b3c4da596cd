//! Drawing `top --fleet`: a pure function of the view and the interaction
//! state, like `top`'s. A header, the hosts present, the panes with their
//! HOST first, a footer.

use super::model::{FleetRow, FleetView};
use super::ui::{FleetUi, visible};
use crate::top::render::{clip, clip_middle, clock};
use crate::top::view::ago;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::widgets::{Cell, Paragraph, Row, Table, TableState};

/// The keys, as the footer lists them.
pub const KEYS_HELP: &str = "j/k move  n next  / filter  p/r/c pause/resume/close run  q quit  (panes: view only, act with `drover top` on their host)";

const SPACING: u16 = 1;

fn header(view: &FleetView, ui: &FleetUi) -> String {
    let need = view
        .rows
        .iter()
        .filter(|r| r.attention.needs_human())
        .count();
    let filter = if ui.filter.is_empty() {
        String::new()
    } else {
        format!("  filter /{}", ui.filter)
    };
    let dropped = if view.stream_missed > 0 {
        format!(
            "  the stream dropped {} events before they were read: panes may be stale",
            view.stream_missed
        )
    } else {
        String::new()
    };
    format!(
        "drover top --fleet {}  {} hosts  {} panes  {need} need you  as of {}{filter}{dropped}",
        view.fleet,
        view.hosts.len(),
        view.rows.len(),
        clock(view.now_ms)
    )
}

fn footer(view: &FleetView, ui: &FleetUi) -> String {
    if let Some((c, run)) = ui.confirm {
        return format!(
            "{} loop{run} (in-flight work finishes and lands, then the run closes)? y/N",
            c.as_str()
        );
    }
    if ui.filtering {
        return format!("filter (enter keeps, esc clears): /{}_", ui.filter);
    }
    ui.message
        .clone()
        .or_else(|| view.warning.clone())
        .unwrap_or_else(|| KEYS_HELP.to_string())
}

fn state_text(r: &FleetRow) -> String {
    match (&r.cell.state_kind, r.cell.exit_code) {
        (Some(k), _) => format!("{}:{k}", r.cell.state),
        (None, Some(c)) if r.cell.state == crate::agent::State::Exited => format!("exited:{c}"),
        _ => r.cell.state.to_string(),
    }
}

/// Cells clipped to their column widths (the last column takes the rest).
fn row_of(cells: Vec<String>, widths: &[u16], middle: &[usize]) -> Row<'static> {
    Row::new(
        cells
            .into_iter()
            .enumerate()
            .map(|(i, s)| {
                let n = widths.get(i).map_or(usize::MAX, |&w| w as usize);
                Cell::from(if middle.contains(&i) {
                    clip_middle(&s, n)
                } else {
                    clip(&s, n)
                })
            })
            .collect::<Vec<_>>(),
    )
}

fn table<'a>(titles: &[&'a str], widths: &[u16], rows: Vec<Row<'a>>) -> Table<'a> {
    let mut c: Vec<Constraint> = widths.iter().map(|&w| Constraint::Length(w)).collect();
    c.push(Constraint::Min(0));
    Table::new(rows, c)
        .header(Row::new(titles.to_vec()).style(Style::new().add_modifier(Modifier::BOLD)))
        .column_spacing(SPACING)
}

/// Draw one frame.
pub fn render(f: &mut Frame, view: &FleetView, ui: &FleetUi) {
    let area = f.area();
    let mut body = area.height.saturating_sub(2);
    let run_lines = crate::top::runs_lines::lines(
        &view.runs,
        view.older_runs,
        ui.selected_run(view),
        area.width as usize,
        (body / 3) as usize,
    );
    let runs_h = run_lines.len() as u16;
    body = body.saturating_sub(runs_h);
    let hosts_h = (view.hosts.len() as u16 + 1).min(body / 3).max(1);
    let [head, runs_area, hosts_area, panes_area, foot] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(runs_h),
        Constraint::Length(hosts_h),
        Constraint::Min(0),
        Constraint::Length(1),
    ])
    .areas(area);
    if runs_h > 0 {
        let lines: Vec<ratatui::text::Line> = run_lines
            .into_iter()
            .map(ratatui::text::Line::raw)
            .collect();
        f.render_widget(Paragraph::new(lines), runs_area);
    }
    f.render_widget(
        Paragraph::new(clip(&header(view, ui), area.width as usize)),
        head,
    );

    const HOST_W: [u16; 4] = [18, 5, 5, 5];
    let hosts = view.hosts.iter().map(|h| {
        let note = if h.missed > 0 {
            format!("missed {} events: panes may be stale", h.missed)
        } else {
            String::new()
        };
        row_of(
            vec![
                format!("{}{}", h.host, if h.this { "*" } else { "" }),
                h.state.as_str().into(),
                h.lanes.to_string(),
                ago(view.now_ms, h.heartbeat_ms),
                note,
            ],
            &HOST_W,
            &[0],
        )
    });
    f.render_widget(
        table(
            &["HOST", "STATE", "LANES", "SEEN", ""],
            &HOST_W,
            hosts.collect(),
        ),
        hosts_area,
    );

    const PANE_W: [u16; 7] = [1, 16, 18, 20, 5, 6, 5];
    let rows = visible(view, &ui.filter);
    let panes = rows.iter().map(|r| {
        row_of(
            vec![
                r.attention.mark().to_string(),
                r.host.clone(),
                r.pane.clone(),
                state_text(r),
                ago(view.now_ms, r.cell.since_ms),
                r.cell.agent.clone(),
                ago(view.now_ms, r.cell.last_ms),
                r.cell.last_kind.clone(),
            ],
            &PANE_W,
            &[1, 2],
        )
    });
    let t = table(
        &[
            "", "HOST", "PANE", "STATE", "SINCE", "AGENT", "LAST", "EVENT",
        ],
        &PANE_W,
        panes.collect(),
    )
    .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED));
    let mut state = TableState::default().with_selected(ui.selected_index(&rows));
    f.render_stateful_widget(t, panes_area, &mut state);
    f.render_widget(
        Paragraph::new(clip(&footer(view, ui), area.width as usize)),
        foot,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::membership::HostState;
    use crate::top::fleet::model::{HostRow, PaneCell};
    use crate::top::view::Attention;
    use ratatui::backend::TestBackend;

    #[test]
    fn every_host_and_its_panes_show_with_their_host() {
        let now = 1_893_456_012_000;
        let host = |h: &str, this| HostRow {
            host: h.into(),
            this,
            state: HostState::Up,
            lanes: 1,
            heartbeat_ms: now - 2_000,
            missed: 0,
        };
        let row = |h: &str, p: &str, st: &str, a| FleetRow {
            host: h.into(),
            pane: p.into(),
            cell: PaneCell {
                agent: "sim".into(),
                state: st.parse().unwrap_or(crate::agent::State::Unknown),
                since_ms: now - 5_000,
                last_ms: now - 3_000,
                last_kind: "pane.state".into(),
                ..Default::default()
            },
            attention: a,
        };
        let view = FleetView {
            fleet: "lab".into(),
            hosts: vec![host("h1", true), host("h2", false)],
            rows: vec![
                row("h2", "b1", "blocked", Attention::Blocked),
                row("h1", "a1", "idle", Attention::None),
            ],
            now_ms: now,
            ..Default::default()
        };
        let mut t = ratatui::Terminal::new(TestBackend::new(100, 12)).unwrap();
        t.draw(|f| render(f, &view, &FleetUi::default())).unwrap();
        let lines: Vec<String> = t
            .backend()
            .buffer()
            .content()
            .chunks(100)
            .map(|c| c.iter().map(|x| x.symbol()).collect::<String>())
            .collect();
        let screen = lines.join("\n");
        assert!(
            lines[0].starts_with("drover top --fleet lab  2 hosts  2 panes  1 need you"),
            "{screen}"
        );
        assert!(lines[2].starts_with("h1*"), "{screen}");
        assert!(
            lines[2].contains("up") && lines[2].contains("2s"),
            "{screen}"
        );
        let panes = lines.iter().position(|l| l.contains("PANE")).unwrap();
        assert!(lines[panes].contains("HOST"), "{screen}");
        assert!(lines[panes + 1].starts_with("! h2"), "{screen}");
        assert!(lines[panes + 1].contains("b1") && lines[panes + 1].contains("blocked"));
        assert!(lines[panes + 2].contains("h1") && lines[panes + 2].contains("a1"));
        assert!(lines[panes + 2].contains("5s") && lines[panes + 2].contains("3s"));
        assert!(lines[11].contains("view only"), "{screen}");
    }
}
