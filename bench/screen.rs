//! Screen-model benchmark (docs/performance.md, "Ingest"): the parsing half of
//! the ingest path without a PTY. The bytes `bench/ingest` feeds a pane (the
//! generator's output, with the PTY's `onlcr` applied) go through, in 4 KiB
//! chunks as the reader hands them over:
//!   vte     vte's parser with a `Perform` that does nothing: the floor of any
//!           screen model built on it
//!   vt100   vt100 0.18.1 (its callbacks left as no-ops): the screen
//!           model before drover's own grid, run beside the new
//!   screen  drover's screen model (`Screen::process`)
//! and the ratios screen/vte and vt100/vte are printed.
//!
//! `cargo bench --bench screen [-- --mib 64 --runs 5]`; `-- --only screen`
//! runs drover's model alone (to profile it: `perf record` the bench binary,
//! or count its instructions with `valgrind --tool=cachegrind`); `-- --check`
//! prints, instead of timings, a hash of what drover's model shows along the
//! way (every 97th chunk's repaint and rows, the end with its scrollback):
//! two builds that print the same hash read these bytes alike.

use std::time::Instant;

use drover::screen::Screen;

/// What the PTY reader hands the parser at most per read.
const CHUNK: usize = 4095;

struct Noop(u64);

impl vte::Perform for Noop {
    fn print(&mut self, c: char) {
        self.0 = self.0.wrapping_add(c as u64);
    }
    fn execute(&mut self, b: u8) {
        self.0 = self.0.wrapping_add(u64::from(b));
    }
    fn csi_dispatch(&mut self, p: &vte::Params, _: &[u8], _: bool, c: char) {
        self.0 = self.0.wrapping_add(p.len() as u64 + c as u64);
    }
}

fn arg(args: &[String], name: &str, default: usize) -> usize {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mib = arg(&args, "--mib", 64);
    let runs = arg(&args, "--runs", 5).max(1);
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .cloned();
    if let Some(o) = only.as_deref()
        && !["vte", "screen", "vt100"].contains(&o)
    {
        eprintln!("bench/screen: --only takes vte, screen or vt100, not {o:?}");
        std::process::exit(2);
    }
    let check = args.iter().any(|a| a == "--check");
    let run = |name: &str| only.as_deref().is_none_or(|o| o == name);
    let root = env!("CARGO_MANIFEST_DIR");
    let out = std::process::Command::new("perl")
        .arg(format!("{root}/bench/ingest-gen.pl"))
        .arg((mib * 1024 * 1024).to_string())
        .output()
        .expect("bench/screen: perl bench/ingest-gen.pl");
    // The PTY's line discipline turns each \n into \r\n.
    let mut data = Vec::with_capacity(out.stdout.len() * 21 / 20);
    for &b in &out.stdout {
        if b == b'\n' {
            data.push(b'\r');
        }
        data.push(b);
    }
    if check {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        let mut s = Screen::new(120, 40);
        for (i, c) in data.chunks(CHUNK).enumerate() {
            s.process(c);
            if i % 97 == 0 {
                s.repaint().hash(&mut h);
                s.rows_formatted().hash(&mut h);
            }
        }
        s.scrollback_rows(drover::screen::SCROLLBACK_ROWS)
            .hash(&mut h);
        s.repaint().hash(&mut h);
        println!("screen model, {mib} MiB: check {:016x}", h.finish());
        return;
    }
    let (mut vte_t, mut screen_t, mut old_t) = (Vec::new(), Vec::new(), Vec::new());
    // A model left out (`--only`) times as NaN.
    let time = |name: &str, times: &mut Vec<f64>, f: &dyn Fn()| {
        if run(name) {
            let t = Instant::now();
            f();
            times.push(t.elapsed().as_secs_f64());
        } else {
            times.push(f64::NAN);
        }
    };
    for _ in 0..runs {
        time("vte", &mut vte_t, &|| {
            let mut p = vte::Parser::new();
            let mut n = Noop(0);
            for c in data.chunks(CHUNK) {
                p.advance(&mut n, c);
            }
            std::hint::black_box(n.0);
        });
        time("screen", &mut screen_t, &|| {
            let mut s = Screen::new(120, 40);
            for c in data.chunks(CHUNK) {
                s.process(c);
            }
            std::hint::black_box(s.bytes());
        });
        time("vt100", &mut old_t, &|| {
            let nz = |v| std::num::NonZeroU16::new(v).expect("nonzero");
            let mut old = vt100::Parser::new(nz(40), nz(120), drover::screen::SCROLLBACK_ROWS);
            for c in data.chunks(CHUNK) {
                old.process(c);
            }
            std::hint::black_box(old.screen().cursor_position());
        });
    }
    let (v, s, o) = (
        median(&mut vte_t),
        median(&mut screen_t),
        median(&mut old_t),
    );
    let mb = data.len() as f64 / 1e6;
    println!(
        "screen model, {mib} MiB of bench/ingest output in {CHUNK}-byte chunks, median of {runs} (load {})",
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split(' ')
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!("  vte alone (no grid)  {v:7.3} s  {:7.1} MB/s", mb / v);
    println!("  drover screen model  {s:7.3} s  {:7.1} MB/s", mb / s);
    println!("  vt100 0.18.1 model   {o:7.3} s  {:7.1} MB/s", mb / o);
    println!("  screen/vte  {:.2}   vt100/vte  {:.2}", s / v, o / v);
}
