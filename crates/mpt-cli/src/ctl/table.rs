//! Text laid out in a fixed width: tables whose address column is
//! shortened to make the rows fit, lines wrapped at their commas, and
//! cells cut with `…`.

use std::fmt::Write as _;

/// Spaces between columns.
const GAP: usize = 2;

/// Appends `line` indented, wrapped at `, ` separators to fit `width`.
pub(crate) fn push_wrapped(out: &mut String, line: &str, indent: usize, width: usize) {
    let mut cur = String::new();
    for (i, piece) in line.split(", ").enumerate() {
        let sep = if i == 0 { "" } else { ", " };
        let len = indent + cur.chars().count() + sep.len() + piece.chars().count();
        if i > 0 && len > width {
            let _ = writeln!(out, "{:indent$}{cur},", "");
            cur = format!("  {piece}");
        } else {
            cur.push_str(sep);
            cur.push_str(piece);
        }
    }
    let _ = writeln!(out, "{:indent$}{cur}", "");
}

/// Cuts `s` to `max` characters, ending in `…` when cut.
pub(crate) fn cut_end(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
    t.push('…');
    t
}

/// Cuts `s` to `max` characters by replacing its middle with `…`.
pub(crate) fn cut_middle(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        return s.to_string();
    }
    if max < 3 {
        return cut_end(s, max);
    }
    let keep = max - 1;
    let head = keep.div_ceil(2);
    let tail = keep - head;
    let mut t: String = s.chars().take(head).collect();
    t.push('…');
    t.extend(s.chars().skip(n - tail));
    t
}

/// Drops the port of `ip:port` / `[v6]:port`, keeping a bare address.
pub(crate) fn without_port(addr: &str) -> &str {
    if let Some(rest) = addr.strip_prefix('[') {
        return rest.split_once(']').map_or(addr, |(ip, _)| ip);
    }
    match addr.rsplit_once(':') {
        Some((ip, port)) if !ip.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => ip,
        _ => addr,
    }
}

/// A remote without its port: `ip`, or `name (ip)` for a host name.
fn bare_remote(r: &str) -> String {
    match r.strip_suffix(')').and_then(|x| x.split_once(" (")) {
        Some((name, addr)) => format!("{name} ({})", without_port(addr)),
        None => without_port(r).to_string(),
    }
}

/// Shortens `local -> remote` to `max` characters: first without ports,
/// then each side cut in the middle.
pub fn shorten_addrs(cell: &str, max: usize) -> String {
    if cell.chars().count() <= max {
        return cell.to_string();
    }
    let Some((l, r)) = cell.split_once(" -> ") else {
        return cut_middle(cell, max);
    };
    let r = bare_remote(r);
    let (l, r) = (without_port(l), r.as_str());
    let bare = format!("{l} -> {r}");
    if bare.chars().count() <= max {
        return bare;
    }
    // Each side gets half the room; a short side lends the rest to the other.
    let side = max.saturating_sub(4);
    let (ln, rn) = (l.chars().count(), r.chars().count());
    let l_max = ln.min(side.saturating_sub(rn.min(side / 2)));
    let (l, r) = (cut_middle(l, l_max), cut_middle(r, side - l_max));
    format!("{l} -> {r}")
}

#[derive(Clone, Copy)]
pub(crate) enum Align {
    /// Padded on the right.
    Left,
    /// Padded on the left.
    Right,
}

/// A text table; column `elastic` (the addresses) is shortened to make
/// the rows fit the width.
pub(crate) struct Table {
    cols: Vec<(&'static str, Align)>,
    /// The rows, one cell per column.
    pub(crate) rows: Vec<Vec<String>>,
    /// The column shortened to fit, if any.
    pub(crate) elastic: Option<usize>,
}

impl Table {
    pub(crate) fn new(cols: &[(&'static str, Align)]) -> Table {
        Table {
            cols: cols.to_vec(),
            rows: Vec::new(),
            elastic: None,
        }
    }

    pub(crate) fn render(mut self, out: &mut String, indent: usize, width: usize) {
        let widths = |rows: &[Vec<String>], cols: &[(&str, Align)]| -> Vec<usize> {
            cols.iter()
                .enumerate()
                .map(|(i, (h, _))| {
                    rows.iter()
                        .map(|r| r[i].chars().count())
                        .chain([h.chars().count()])
                        .max()
                        .unwrap_or(0)
                })
                .collect()
        };
        let mut w = widths(&self.rows, &self.cols);
        if let Some(e) = self.elastic {
            let others: usize = w
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != e)
                .map(|(_, w)| w)
                .sum();
            let fixed = indent + others + GAP * (w.len() - 1);
            let room = width.saturating_sub(fixed).max(self.cols[e].0.len());
            if w[e] > room {
                for row in &mut self.rows {
                    row[e] = shorten_addrs(&row[e], room);
                }
                w = widths(&self.rows, &self.cols);
            }
        }
        let header: Vec<String> = self.cols.iter().map(|(h, _)| h.to_string()).collect();
        for row in std::iter::once(&header).chain(&self.rows) {
            let mut line = " ".repeat(indent);
            for (i, cell) in row.iter().enumerate() {
                if i > 0 {
                    line.push_str(&" ".repeat(GAP));
                }
                let pad = w[i].saturating_sub(cell.chars().count());
                match self.cols[i].1 {
                    Align::Left => {
                        line.push_str(cell);
                        line.push_str(&" ".repeat(pad));
                    }
                    Align::Right => {
                        line.push_str(&" ".repeat(pad));
                        line.push_str(cell);
                    }
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
    }
}
