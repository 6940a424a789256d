//! Expands an `unlike` scenario: one testbed case per (IP combination,
//! `[[unlike.case]]`), each with its own emulated paths, and the
//! per-case settings beside them.

use std::time::Duration;

use super::def::{
    check_cc, check_repeat, resolve_path, CaseDef, Target, UnlikeCase, UnlikeDef, UnlikeParams,
};
use crate::bench::scenario::case::{parse_combos, Case, TestKind};
use crate::bench::scenario::error::{invalid, ScenarioError};
use crate::bench::scenario::expanded::Scenario;
use crate::bench::scenario::file::ScenarioFile;
use crate::bench::scenario::limits::{MAX_OMIT_S, MAX_PATHS};
use crate::bench::scenario::overrides::Overrides;

/// Expands an `unlike` scenario: one testbed case per (combo, case).
pub fn expand(
    name: &str,
    origin: &str,
    f: ScenarioFile,
    u: &UnlikeDef,
    ov: &Overrides,
) -> Result<Scenario, ScenarioError> {
    let mut cc = u.cc.clone();
    let mut omit = u.omit;
    let mut repeat = (u.repeat, "unlike.repeat");
    let mut wanted: Option<Vec<String>> = None;
    let mut objects = u.objects;
    if ov.quick {
        objects = u.quick.objects.unwrap_or(objects);
        cc = u.quick.cc.clone().unwrap_or(cc);
        omit = u.quick.omit.unwrap_or(omit);
        if let Some(r) = u.quick.repeat {
            repeat = (r, "unlike.quick.repeat");
        }
        wanted = u.quick.cases.clone();
    }
    check_cc(origin, &cc)?;
    let repeat = check_repeat(origin, repeat.0, repeat.1)?;
    let objects = match usize::try_from(objects) {
        Ok(n) if n <= 100 => n,
        _ => {
            return Err(invalid(
                origin,
                format!("unlike.objects: 0..=100 objects per round (got {objects})"),
            ))
        }
    };
    if !(omit.is_finite() && (0.0..=MAX_OMIT_S).contains(&omit)) || omit.fract() != 0.0 {
        return Err(invalid(
            origin,
            format!("unlike.omit: whole seconds, 0..={MAX_OMIT_S}"),
        ));
    }
    if !(f.duration.is_finite() && (1.0..=3600.0).contains(&f.duration)) {
        return Err(invalid(origin, "duration: must be 1..3600 seconds"));
    }
    if ov.paths.is_some() {
        return Err(invalid(
            origin,
            "--paths does not apply: each case lists its own paths",
        ));
    }
    let combos = match &ov.combos {
        Some(c) => c.clone(),
        None => parse_combos(&f.combos).map_err(|m| invalid(origin, m))?,
    };
    if u.cases.is_empty() {
        return Err(invalid(origin, "unlike: at least one [[unlike.case]]"));
    }
    for (i, c) in u.cases.iter().enumerate() {
        if c.name.trim().is_empty() {
            return Err(invalid(origin, "unlike.case: empty name"));
        }
        if u.cases[..i].iter().any(|d| d.name == c.name) {
            return Err(invalid(origin, format!("unlike.case {:?} twice", c.name)));
        }
        if !(c.ratio.is_finite() && c.ratio > 0.0 && c.ratio <= 10.0) {
            return Err(invalid(
                origin,
                format!("case {:?}: ratio must be in (0, 10]", c.name),
            ));
        }
        if c.paths.is_empty() || c.paths.len() > MAX_PATHS {
            return Err(invalid(
                origin,
                format!("case {:?}: 1..={MAX_PATHS} paths", c.name),
            ));
        }
        for (j, p) in c.paths.iter().enumerate() {
            if c.paths[..j].iter().any(|q| q.name == p.name) {
                return Err(invalid(
                    origin,
                    format!("case {:?}: path {:?} twice", c.name, p.name),
                ));
            }
        }
    }
    let defs: Vec<&CaseDef> = match &wanted {
        Some(names) => names
            .iter()
            .map(|n| {
                u.cases
                    .iter()
                    .find(|c| &c.name == n)
                    .ok_or_else(|| invalid(origin, format!("unlike.quick.cases: no case {n:?}")))
            })
            .collect::<Result<_, _>>()?,
        None => u.cases.iter().collect(),
    };
    let omit = Duration::from_secs_f64(omit);
    let duration = Duration::from_secs_f64(f.duration);
    let window = (omit, omit + duration);
    let mut cases = Vec::new();
    let mut ucases = Vec::new();
    for &combo in &combos {
        for d in &defs {
            let mut links = Vec::new();
            let mut infos = Vec::new();
            for p in &d.paths {
                let (l, i) = resolve_path(origin, &d.name, p, window)?;
                links.push(l);
                infos.push(i);
            }
            let label = if combos.len() > 1 {
                format!("{} {}", d.name, combo.label())
            } else {
                d.name.clone()
            };
            cases.push(Case {
                combo,
                n: links.len(),
                links,
                rtt_ms: None,
                loss: None,
                extra: false,
                weights: Vec::new(),
                networks_b: Vec::new(),
                label: Some(label.clone()),
                daemon_scheduler: true,
                scheduler: None,
                roaming_path0: false,
                default_timers: false,
                backup_paths: Vec::new(),
                lte_variant: 0,
            });
            ucases.push(UnlikeCase {
                name: label,
                target: Target {
                    of: d.target,
                    ratio: d.ratio,
                },
                paths: infos,
                objects: d.objects,
            });
        }
    }
    Ok(Scenario {
        name: name.to_string(),
        description: f.description.unwrap_or_default(),
        duration,
        // Per measurement, in `UnlikeParams` (raw paths and tunnel runs).
        omit: Duration::ZERO,
        tests: vec![TestKind::RawTcp, TestKind::Tcp],
        udp_overload: f.udp_overload,
        streams: 1,
        cases,
        lte: None,
        dtn: None,
        unlike: Some(UnlikeParams {
            cc,
            omit,
            repeat,
            objects,
            cases: ucases,
        }),
        source: String::new(),
        source_sha256: String::new(),
        overrides: String::new(),
    })
}
