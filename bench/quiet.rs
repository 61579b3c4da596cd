//! What a shorter burst-quiet window would misclassify (docs/performance.md,
//! "Detection latency"). The supervisor classifies a pane when its output has
//! been quiet for `BURST_QUIET` (2 ms) or a burst has lasted `MAX_BURST`
//! (50 ms). This replays timed recordings of the real agents (a `script(1)`
//! typescript and its `--timing` file: each output read and the delay before
//! it) through the screen model and the real classifier, cutting bursts at
//! several windows, and counts the classifications at each window that differ
//! from what the 2 ms window settles on for the same bytes (the state at the
//! end of the 2 ms burst that holds them): states that would be published and
//! then taken back.
//!
//! `cargo bench --bench quiet -- AGENT TYPESCRIPT TIMING [AGENT TYPESCRIPT TIMING …]`
//! (`bench/quiet-record` makes the recordings with `drover rehearse`).

use drover::agent::{AgentKind, Classifier, Signals};
use drover::screen::Screen;
use std::time::Duration;

/// The windows compared, in microseconds; the last is the supervisor's.
const WINDOWS_US: [u64; 6] = [0, 100, 250, 500, 1000, 2000];

struct Read {
    /// Microseconds since the recording started.
    at_us: u64,
    len: usize,
}

/// `script --timing` lines: `DELAY BYTES` (classic) or `O DELAY BYTES`
/// (advanced; other streams skipped).
fn timing(text: &str) -> Vec<Read> {
    let mut at = 0.0f64;
    let mut out = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (delay, len) = match f.as_slice() {
            [d, n] => (*d, *n),
            ["O", d, n] => (*d, *n),
            [_, d, _] => {
                at += d.parse::<f64>().unwrap_or(0.0);
                continue;
            }
            _ => continue,
        };
        at += delay.parse::<f64>().unwrap_or(0.0);
        if let Ok(len) = len.parse() {
            out.push(Read {
                at_us: (at * 1e6) as u64,
                len,
            });
        }
    }
    out
}

/// Classify the screen as the detector would after `quiet_us` without output.
fn classify(c: &Classifier, kind: AgentKind, s: &Screen, at_us: u64, quiet_us: u64) -> String {
    let rows = s.rows();
    let h = s.hooks();
    let o = c.classify(
        kind,
        &Signals {
            rows: &rows,
            cols: s.size().0,
            title: h.title(),
            osc7501: h.osc7501(),
            exited: None,
            quiet_ms: quiet_us / 1000,
            since_spawn_ms: at_us / 1000,
            foreground_job: None,
            shell_child: false,
        },
    );
    match o.kind {
        Some(k) => format!("{}:{k}", o.state),
        None => o.state.to_string(),
    }
}

/// The classifications a window makes: (bytes fed, state), one per burst end
/// (none inside a synchronized-output block, as the supervisor skips those).
fn replay(
    c: &Classifier,
    kind: AgentKind,
    bytes: &[u8],
    reads: &[Read],
    window_us: u64,
) -> Vec<(usize, String)> {
    let max_burst = 50_000u64;
    let mut s = Screen::new(120, 40);
    let (mut fed, mut burst_start) = (0usize, None::<u64>);
    let mut out = Vec::new();
    for (i, r) in reads.iter().enumerate() {
        let end = (fed + r.len).min(bytes.len());
        s.process(&bytes[fed..end]);
        fed = end;
        let start = *burst_start.get_or_insert(r.at_us);
        let gap = reads
            .get(i + 1)
            .map_or(u64::MAX, |n| n.at_us.saturating_sub(r.at_us));
        if gap > window_us || r.at_us - start >= max_burst {
            burst_start = None;
            if s.hooks().in_sync_block() {
                continue;
            }
            let quiet = gap.min(window_us.max(1));
            out.push((fed, classify(c, kind, &s, r.at_us + quiet, quiet)));
        }
    }
    out
}

fn die(msg: &str) -> ! {
    eprintln!("bench/quiet: {msg}");
    std::process::exit(2);
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    if args.is_empty() || !args.len().is_multiple_of(3) {
        eprintln!("usage: cargo bench --bench quiet -- AGENT TYPESCRIPT TIMING …");
        std::process::exit(2);
    }
    let c = Classifier::builtin().unwrap_or_else(|e| die(&format!("the built-in rules: {e}")));
    println!(
        "burst-quiet windows on timed recordings (the supervisor's: {:?}); per window: \
         classifications, of them differing from the 2 ms window's settled state, states published (changes), of them wrong",
        Duration::from_micros(WINDOWS_US[WINDOWS_US.len() - 1])
    );
    for rec in args.chunks(3) {
        let kind: AgentKind = rec[0]
            .parse()
            .unwrap_or_else(|_| die(&format!("{}: not an agent (claude, codex)", rec[0])));
        let raw = std::fs::read(&rec[1]).unwrap_or_else(|e| die(&format!("{}: {e}", rec[1])));
        let bytes = drover::rehearse::recording::strip_typescript(&raw);
        let text =
            std::fs::read_to_string(&rec[2]).unwrap_or_else(|e| die(&format!("{}: {e}", rec[2])));
        let reads = timing(&text);
        let total: usize = reads.iter().map(|r| r.len).sum();
        let gaps: Vec<u64> = reads.windows(2).map(|w| w[1].at_us - w[0].at_us).collect();
        println!(
            "{} ({}: {} bytes, {} reads, timing sums to {total}; gaps ≤ 2 ms between reads: {})",
            rec[1],
            rec[0],
            bytes.len(),
            reads.len(),
            gaps.iter().filter(|&&g| g <= 2000).count()
        );
        let reference = replay(&c, kind, bytes, &reads, WINDOWS_US[WINDOWS_US.len() - 1]);
        for &w in &WINDOWS_US {
            let got = replay(&c, kind, bytes, &reads, w);
            // The reference state for bytes fed: the first reference burst end at or after it.
            let settled = |fed: usize| {
                reference
                    .iter()
                    .find(|(f, _)| *f >= fed)
                    .map(|(_, s)| s.as_str())
                    .unwrap_or("")
            };
            let wrong: Vec<&(usize, String)> = got
                .iter()
                .filter(|(f, st)| st.as_str() != settled(*f))
                .collect();
            let mut published = Vec::new();
            for g in &got {
                if published
                    .last()
                    .is_none_or(|p: &&(usize, String)| p.1 != g.1)
                {
                    published.push(g);
                }
            }
            let wrong_pub = published
                .iter()
                .filter(|(f, st)| st.as_str() != settled(*f))
                .count();
            println!(
                "  window {:>5} µs: {:>5} classifications, {:>4} differ; {:>3} published, {:>3} wrong{}",
                w,
                got.len(),
                wrong.len(),
                published.len(),
                wrong_pub,
                wrong
                    .iter()
                    .take(3)
                    .map(|(f, st)| format!(" [{st} at byte {f}, settles {}]", settled(*f)))
                    .collect::<String>()
            );
        }
    }
}
