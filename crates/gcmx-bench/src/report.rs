//! The results as markdown tables, ready for `benches/results.md`: GB/s (10^9 bytes a second) and
//! core cycles per byte, medians over the rounds; for an empty message, cycles per message. A
//! ratio is gcmx's speed over a peer's (the median over rounds of the peer's time over gcmx's in
//! the same round): 1.00 or more means gcmx is level or ahead.

use std::fmt::Write as _;

use crate::measure::{Sample, median};
use crate::peer::{Op, Place};
use crate::peers::Kind;

/// One (operation, place, size) and its samples.
#[derive(Debug)]
pub(crate) struct Cell {
    /// Seal or open.
    pub(crate) op: Op,
    /// In place or into another buffer.
    pub(crate) place: Place,
    /// Message length in bytes.
    pub(crate) size: usize,
    /// The entries timed (indices into [`KeyResults::names`]), in column order.
    pub(crate) which: Vec<usize>,
    /// `samples[k][round]` for `which[k]`.
    pub(crate) samples: Vec<Vec<Sample>>,
}

/// Everything measured under one key.
#[derive(Debug)]
pub(crate) struct KeyResults {
    /// 128 or 256.
    pub(crate) bits: usize,
    /// Each entry's name.
    pub(crate) names: Vec<String>,
    /// Each entry's kind.
    pub(crate) kinds: Vec<Kind>,
    /// Key set-up samples, per entry.
    pub(crate) setup: Vec<Vec<Sample>>,
    /// Message timings.
    pub(crate) cells: Vec<Cell>,
}

/// A column: gcmx's entries one each, haberdashery's profiles together (the fastest per row).
#[derive(Clone, Debug, PartialEq)]
enum Column {
    One(usize),
    Haberdashery(Vec<usize>),
}

fn med_ns(s: &[Sample]) -> f64 {
    median(s.iter().map(|x| x.ns).collect())
}

/// c/B, or cycles per message for an empty one.
fn cost(s: &[Sample], size: usize) -> f64 {
    median(s.iter().map(|x| x.cycles() / size.max(1) as f64).collect())
}

fn fmt_cost(c: f64, size: usize) -> String {
    match size {
        0 => format!("{c:.0} c"),
        _ if c < 1.0 => format!("{c:.3}"),
        _ => format!("{c:.2}"),
    }
}

fn gbps(s: &[Sample], size: usize) -> f64 {
    size as f64 / med_ns(s)
}

/// Median over rounds of `peer`'s time over `ours`.
fn ratio(ours: &[Sample], peer: &[Sample]) -> f64 {
    median(ours.iter().zip(peer).map(|(o, p)| p.ns / o.ns).collect())
}

fn op_name(op: Op) -> &'static str {
    match op {
        Op::Seal => "seal",
        Op::Open => "open",
    }
}

fn place_name(place: Place) -> &'static str {
    match place {
        Place::InPlace => "in place",
        Place::Separate => "into a separate buffer",
    }
}

/// "1500 B", "16 KiB", "1 MiB".
fn size_name(size: usize) -> String {
    match size {
        0 => "0 B (empty)".into(),
        s if s >= 1 << 20 && s % (1 << 20) == 0 => format!("{} MiB", s >> 20),
        s if s >= 4096 && s % 1024 == 0 => format!("{} KiB", s >> 10),
        s => format!("{s} B"),
    }
}

impl KeyResults {
    fn columns(&self, which: &[usize]) -> Vec<Column> {
        let mut cols = Vec::new();
        let habs: Vec<usize> = which
            .iter()
            .copied()
            .filter(|&i| self.kinds[i] == Kind::Haberdashery)
            .collect();
        for &i in which {
            match self.kinds[i] {
                Kind::Haberdashery if habs.first() == Some(&i) => {
                    cols.push(Column::Haberdashery(habs.clone()))
                }
                Kind::Haberdashery => {}
                _ => cols.push(Column::One(i)),
            }
        }
        cols
    }

    fn header(&self, c: &Column) -> String {
        match c {
            Column::One(i) => self.names[*i].clone(),
            Column::Haberdashery(v) if v.len() == 1 => self.names[v[0]].clone(),
            Column::Haberdashery(_) => "haberdashery (fastest profile)".into(),
        }
    }

    /// The samples of column `c` in `cell` (for haberdashery, its fastest profile's) and, for a
    /// column of several profiles, that profile's name.
    fn pick<'a>(&self, cell: &'a Cell, c: &Column) -> (&'a [Sample], Option<&str>) {
        let at = |i: usize| cell.which.iter().position(|&w| w == i).unwrap();
        match c {
            Column::One(i) => (&cell.samples[at(*i)], None),
            Column::Haberdashery(v) => {
                let best = v
                    .iter()
                    .min_by(|&&a, &&b| {
                        med_ns(&cell.samples[at(a)]).total_cmp(&med_ns(&cell.samples[at(b)]))
                    })
                    .unwrap();
                let name = self.names[*best].trim_start_matches("haberdashery ");
                (&cell.samples[at(*best)], (v.len() > 1).then_some(name))
            }
        }
    }

    fn is_gcmx(&self, c: &Column) -> bool {
        matches!(c, Column::One(i) if self.kinds[*i].is_gcmx())
    }

    /// The table of one operation and place: every implementation that offers the place, then
    /// gcmx's ratio to each peer.
    pub(crate) fn table(&self, op: Op, place: Place) -> String {
        let cells: Vec<&Cell> = self
            .cells
            .iter()
            .filter(|c| c.op == op && c.place == place)
            .collect();
        let Some(first) = cells.first() else {
            return String::new();
        };
        let cols = self.columns(&first.which);
        let ours: Vec<&Column> = cols.iter().filter(|c| self.is_gcmx(c)).collect();
        let peers: Vec<&Column> = cols.iter().filter(|c| !self.is_gcmx(c)).collect();
        let ours_names: Vec<String> = ours.iter().map(|c| self.header(c)).collect();
        let mut t = String::new();
        let _ = writeln!(
            t,
            "AES-{}-GCM, {}, {}: GB/s · c/B (empty message: cycles); gcmx ÷ peer in speed (above 1.00: gcmx faster), as {}",
            self.bits,
            op_name(op),
            place_name(place),
            ours_names.join(" / ")
        );
        let _ = writeln!(t);
        let mut head = vec!["size".to_string()];
        head.extend(cols.iter().map(|c| self.header(c)));
        head.extend(peers.iter().map(|c| format!("÷ {}", self.header(c))));
        let _ = writeln!(t, "| {} |", head.join(" | "));
        let _ = writeln!(t, "|{}", "---|".repeat(head.len()));
        for cell in &cells {
            let mut row = vec![size_name(cell.size)];
            for c in &cols {
                let (s, profile) = self.pick(cell, c);
                let mut text = match cell.size {
                    0 => fmt_cost(cost(s, 0), 0),
                    n => format!("{:.2} · {}", gbps(s, n), fmt_cost(cost(s, n), n)),
                };
                if let Some(p) = profile {
                    let _ = write!(text, " ({p})");
                }
                row.push(text);
            }
            for p in &peers {
                let (ps, _) = self.pick(cell, p);
                let rs: Vec<String> = ours
                    .iter()
                    .map(|o| format!("{:.2}", ratio(self.pick(cell, o).0, ps)))
                    .collect();
                row.push(rs.join(" / "));
            }
            let _ = writeln!(t, "| {} |", row.join(" | "));
        }
        t
    }

    /// Each of gcmx's APIs against the fastest peer in any place, per operation and size.
    pub(crate) fn frontier(&self) -> String {
        let mut t = String::new();
        let _ = writeln!(
            t,
            "AES-{}-GCM against the fastest peer (any place): c/B (empty message: cycles), and gcmx ÷ that peer in speed; gcmx typed in its faster place",
            self.bits
        );
        let _ = writeln!(t);
        let _ = writeln!(
            t,
            "| size | seal: gcmx typed | seal: gcmx `Gcm` | seal: fastest peer | open: gcmx typed | open: gcmx `Gcm` | open: fastest peer |"
        );
        let _ = writeln!(t, "|---|---|---|---|---|---|---|");
        let mut sizes: Vec<usize> = self.cells.iter().map(|c| c.size).collect();
        sizes.sort_unstable();
        sizes.dedup();
        for size in sizes {
            let mut row = vec![size_name(size)];
            for op in [Op::Seal, Op::Open] {
                // (median ns, cost, name) of every (entry, place) at this size.
                let mut all = Vec::new();
                for cell in self.cells.iter().filter(|c| c.op == op && c.size == size) {
                    for (k, &i) in cell.which.iter().enumerate() {
                        let s = &cell.samples[k];
                        let name = match cell.place {
                            Place::InPlace => format!("{}, in place", self.names[i]),
                            Place::Separate => format!("{}, separate", self.names[i]),
                        };
                        all.push((self.kinds[i], med_ns(s), cost(s, size), name));
                    }
                }
                let best = |f: &dyn Fn(Kind) -> bool| {
                    all.iter()
                        .filter(|x| f(x.0))
                        .min_by(|a, b| a.1.total_cmp(&b.1))
                };
                let peer = best(&|k: Kind| !k.is_gcmx());
                for kind in [Kind::GcmxTyped, Kind::GcmxRuntime] {
                    row.push(match (best(&|k| k == kind), peer) {
                        (Some(o), Some(p)) => {
                            format!("{} (×{:.2})", fmt_cost(o.2, size), p.1 / o.1)
                        }
                        (Some(o), None) => fmt_cost(o.2, size),
                        _ => "-".into(),
                    });
                }
                row.push(match peer {
                    Some(p) => format!("{} {}", fmt_cost(p.2, size), p.3),
                    None => "-".into(),
                });
            }
            let _ = writeln!(t, "| {} |", row.join(" | "));
        }
        t
    }

    /// Key set-up, cycles and nanoseconds, one column per implementation.
    pub(crate) fn setup_table(&self) -> String {
        let mut t = String::new();
        let _ = writeln!(
            t,
            "AES-{}-GCM key set-up (from the key's bytes to a key ready to seal, then released): cycles (ns)",
            self.bits
        );
        let _ = writeln!(t);
        let _ = writeln!(t, "| | {} |", self.names.join(" | "));
        let _ = writeln!(t, "|{}", "---|".repeat(self.names.len() + 1));
        let row: Vec<String> = self
            .setup
            .iter()
            .map(|s| {
                let c = median(s.iter().map(Sample::cycles).collect());
                format!("{c:.0} ({:.0})", med_ns(s))
            })
            .collect();
        let _ = writeln!(t, "| key set-up | {} |", row.join(" | "));
        t
    }

    /// Every haberdashery profile on its own (c/B; cycles when empty), when several ran.
    pub(crate) fn profiles_table(&self) -> String {
        let habs: Vec<usize> = (0..self.names.len())
            .filter(|&i| self.kinds[i] == Kind::Haberdashery)
            .collect();
        if habs.len() < 2 {
            return String::new();
        }
        let mut t = String::new();
        let _ = writeln!(
            t,
            "AES-{}-GCM, every haberdashery profile that runs here, into a separate buffer: c/B seal / open (empty message: cycles)",
            self.bits
        );
        let _ = writeln!(t);
        let names: Vec<&str> = habs
            .iter()
            .map(|&i| self.names[i].trim_start_matches("haberdashery "))
            .collect();
        let _ = writeln!(t, "| size | {} |", names.join(" | "));
        let _ = writeln!(t, "|{}", "---|".repeat(habs.len() + 1));
        let mut sizes: Vec<usize> = self.cells.iter().map(|c| c.size).collect();
        sizes.sort_unstable();
        sizes.dedup();
        for size in sizes {
            let mut row = vec![size_name(size)];
            for &h in &habs {
                let mut both = Vec::new();
                for op in [Op::Seal, Op::Open] {
                    let cell = self
                        .cells
                        .iter()
                        .find(|c| c.op == op && c.place == Place::Separate && c.size == size);
                    if let Some(cell) = cell {
                        let k = cell.which.iter().position(|&w| w == h).unwrap();
                        both.push(fmt_cost(cost(&cell.samples[k], size), size));
                    }
                }
                row.push(both.join(" / "));
            }
            let _ = writeln!(t, "| {} |", row.join(" | "));
        }
        t
    }

    /// Each implementation's median clock over its slices (a core may lower its clock for wide
    /// vector code, so implementations can differ): "name GHz" for each.
    pub(crate) fn clocks_by_entry(&self, size_at_least: usize) -> Vec<String> {
        (0..self.names.len())
            .map(|i| {
                let all: Vec<f64> = self
                    .cells
                    .iter()
                    .filter(|c| c.size >= size_at_least)
                    .flat_map(|c| {
                        let k = c.which.iter().position(|&w| w == i);
                        k.into_iter()
                            .flat_map(|k| c.samples[k].iter().map(|s| s.ghz))
                    })
                    .collect();
                // `--sizes` may leave no message this large.
                if all.is_empty() {
                    return format!("{} -", self.names[i]);
                }
                format!("{} {:.2}", self.names[i], median(all))
            })
            .collect()
    }

    /// The clock over every sample: median, lowest and highest, GHz.
    pub(crate) fn clock(&self) -> (f64, f64, f64) {
        let all: Vec<f64> = self
            .cells
            .iter()
            .flat_map(|c| c.samples.iter().flatten().map(|s| s.ghz))
            .collect();
        let lo = all.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = all.iter().copied().fold(0.0, f64::max);
        (median(all), lo, hi)
    }
}
