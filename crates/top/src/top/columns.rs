//! Sizing `top`'s table columns by what they hold (pure): each column asks
//! for its widest cell (between a floor and a cap); when the screen is too
//! narrow for every ask, the widest columns give up width first, down to
//! their floors, and a cell cut to fit loses its middle, never the tail that
//! tells ids apart (`loop3-…-TASK-7`).

/// How a cell too wide for its column is cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Elide {
    /// Keep both ends (ids: panes, jobs, leases, lanes).
    Middle,
    /// Keep the start (words: a state, a heartbeat).
    End,
}

/// One column of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Col {
    pub title: &'static str,
    /// Never narrower than this (when the screen has it).
    pub min: usize,
    /// Never wider than this, whatever a cell holds.
    pub max: usize,
    pub elide: Elide,
    /// Given its whole ask before any other column is (the pane, its state).
    pub keep: bool,
}

/// `s` cut to `n` characters, its end replaced by `…`.
pub fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n.saturating_sub(1)).collect::<String>() + "…"
    }
}

/// `s` cut to `n` characters in the middle, so its start and its tail stay
/// (`implementer-claude` in 15: `impleme…-claude`).
pub fn clip_middle(s: &str, n: usize) -> String {
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

/// A cell cut to its column's width the column's way.
pub fn elide(s: &str, n: usize, how: Elide) -> String {
    match how {
        Elide::Middle => clip_middle(s, n),
        Elide::End => clip(s, n),
    }
}

/// What a column asks for: its title or its widest cell, within its floor
/// and cap.
pub fn wanted<'a>(col: &Col, cells: impl IntoIterator<Item = &'a str>) -> usize {
    let widest = cells
        .into_iter()
        .map(|c| c.chars().count())
        .max()
        .unwrap_or(0)
        .max(col.title.chars().count());
    widest.clamp(col.min, col.max.max(col.min))
}

/// Widths for columns that ask `want` (each at least its `min`) in `avail`
/// characters. All asks fit: each gets its ask. Otherwise the widest give
/// way first: every column is held to one cap, the largest that fits, but
/// never below its floor; what is left over goes one character at a time to
/// the columns the cap cut, left first. Floors that do not fit are kept
/// (the screen cuts the table's right edge).
pub fn fit(want: &[usize], min: &[usize], avail: usize) -> Vec<usize> {
    let floor = |i: usize| min.get(i).copied().unwrap_or(0).min(want[i]);
    if want.iter().sum::<usize>() <= avail {
        return want.to_vec();
    }
    let at_cap = |cap: usize| -> usize {
        (0..want.len())
            .map(|i| want[i].min(cap).max(floor(i)))
            .sum()
    };
    let top = want.iter().copied().max().unwrap_or(0);
    // The largest cap whose widths fit (0 when only the floors remain).
    let cap = (0..=top).rev().find(|&c| at_cap(c) <= avail).unwrap_or(0);
    let mut out: Vec<usize> = (0..want.len())
        .map(|i| want[i].min(cap).max(floor(i)))
        .collect();
    let mut spare = avail.saturating_sub(out.iter().sum());
    for (i, w) in out.iter_mut().enumerate() {
        if spare == 0 {
            break;
        }
        if *w < want[i] {
            *w += 1;
            spare -= 1;
        }
    }
    out
}

/// [`fit`], the `keep` columns given their whole ask first while the others
/// can still shrink to their floors.
pub fn fit_keeping(want: &[usize], min: &[usize], keep: &[bool], avail: usize) -> Vec<usize> {
    let held: Vec<usize> = (0..want.len())
        .map(|i| {
            let floor = min.get(i).copied().unwrap_or(0);
            if keep.get(i).copied().unwrap_or(false) {
                want[i].max(floor)
            } else {
                floor
            }
        })
        .collect();
    if held.iter().sum::<usize>() <= avail {
        fit(want, &held, avail)
    } else {
        fit(want, min, avail)
    }
}

/// The width `n` columns of `widths` take with `spacing` between them.
pub fn total(widths: &[usize], spacing: usize) -> usize {
    widths.iter().sum::<usize>() + spacing * widths.len().saturating_sub(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asks_that_fit_are_given_whole() {
        assert_eq!(fit(&[5, 20, 30], &[1, 4, 4], 60), [5, 20, 30]);
        assert_eq!(fit(&[5, 20, 30], &[1, 4, 4], 55), [5, 20, 30]);
    }

    #[test]
    fn the_widest_give_way_first_and_never_below_their_floor() {
        // 54 asked of 40: the 30 and the 20 come down to one cap; the 4 stays.
        let w = fit(&[4, 20, 30], &[1, 4, 4], 40);
        assert_eq!(w.iter().sum::<usize>(), 40);
        assert_eq!(w[0], 4);
        assert!(w[1].abs_diff(w[2]) <= 1, "{w:?}");
        // Too narrow for the floors: the floors are kept.
        assert_eq!(fit(&[10, 10], &[6, 6], 8), [6, 6]);
        // A floor above the ask is the ask.
        assert_eq!(fit(&[2, 50], &[6, 6], 20), [2, 18]);
    }

    #[test]
    fn a_column_asks_for_its_widest_cell_within_its_bounds() {
        let col = Col {
            title: "JOB",
            min: 7,
            max: 40,
            elide: Elide::Middle,
            keep: false,
        };
        assert_eq!(wanted(&col, ["-", "J-1"]), 7);
        assert_eq!(wanted(&col, ["loop3-impl-TASK-7-r2"]), 20);
        assert_eq!(wanted(&col, ["x".repeat(90).as_str()]), 40);
    }

    #[test]
    fn elision_keeps_the_tail_that_tells_ids_apart() {
        assert_eq!(clip_middle("implementer-claude", 15), "impleme…-claude");
        assert_eq!(clip_middle("implementer-codex", 15), "impleme…r-codex");
        assert_eq!(clip_middle("short", 16), "short");
        assert_eq!(clip_middle("abcdef", 3), "ab…");
        let job = "loop3-implement-TASK-7";
        let cut = elide(job, 14, Elide::Middle);
        assert_eq!(cut.chars().count(), 14);
        assert!(
            cut.starts_with("loop3-") && cut.ends_with("TASK-7"),
            "{cut}"
        );
        assert_eq!(elide("working 45s", 8, Elide::End), "working…");
    }

    #[test]
    fn kept_columns_are_whole_while_the_others_can_shrink() {
        let (want, min) = ([11, 18, 33, 14], [10, 8, 7, 7]);
        let keep = [true, true, false, false];
        assert_eq!(fit_keeping(&want, &min, &keep, 50), [11, 18, 11, 10]);
        // Not even the kept ones fit with the others at their floors.
        assert_eq!(fit_keeping(&want, &min, &keep, 40), fit(&want, &min, 40));
    }

    #[test]
    fn total_counts_the_spacing() {
        assert_eq!(total(&[1, 2, 3], 1), 8);
        assert_eq!(total(&[], 1), 0);
    }
}
