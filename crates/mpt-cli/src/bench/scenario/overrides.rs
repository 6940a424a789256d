//! Command-line overrides of a scenario (`--paths`, `--duration`,
//! `--combos`, `--quick`, `--scheduler`).

use super::case::Combo;

/// Command-line overrides of a scenario.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub paths: Option<Vec<usize>>,
    pub duration: Option<f64>,
    pub combos: Option<Vec<Combo>>,
    pub quick: bool,
    /// mptd's `scheduler` in every case (`adaptive` or `weighted`).
    pub scheduler: Option<String>,
}

impl Overrides {
    /// The overrides as command-line flags ("" for none), for the record.
    pub fn flags(&self) -> String {
        let mut f = Vec::new();
        if self.quick {
            f.push("--quick".to_string());
        }
        if let Some(p) = &self.paths {
            let p: Vec<String> = p.iter().map(ToString::to_string).collect();
            f.push(format!("--paths {}", p.join(",")));
        }
        if let Some(d) = self.duration {
            f.push(format!("--duration {d}"));
        }
        if let Some(c) = &self.combos {
            let c: Vec<String> = c.iter().map(|c| c.label()).collect();
            f.push(format!("--combos {}", c.join(",")));
        }
        if let Some(s) = &self.scheduler {
            f.push(format!("--scheduler {s}"));
        }
        f.join(" ")
    }
}
