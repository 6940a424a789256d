//! What a run ran on ([`RunMeta`]): the mpt build, the machine, its load,
//! the congestion controls and network sysctls, the scenario's hash and
//! the emulator seeds. Every suite writes it into results.json as `meta`,
//! so that `mpt bench compare` can tell a change of code from a change of
//! machine, kernel or settings.
//!
//! The sysctls are read in the namespace `mpt` runs in (the host's): the
//! testbed namespaces start from the kernel's defaults for the per-netns
//! ones (`net.ipv4.tcp_*`) and share the global ones (`net.core.*`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Sysctls that move throughput figures.
pub const SYSCTLS: &[&str] = &[
    "net.core.rmem_max",
    "net.core.wmem_max",
    "net.core.default_qdisc",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.ipv4.tcp_congestion_control",
    "net.ipv4.tcp_available_congestion_control",
    "net.mptcp.enabled",
];

/// The 1, 5 and 15 minute load averages (/proc/loadavg).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LoadAvg {
    pub m1: f64,
    pub m5: f64,
    pub m15: f64,
}

impl LoadAvg {
    /// Now, or `None` without /proc.
    pub fn now() -> Option<LoadAvg> {
        parse_loadavg(&std::fs::read_to_string("/proc/loadavg").ok()?)
    }
}

/// Reads the first three fields of /proc/loadavg.
pub fn parse_loadavg(text: &str) -> Option<LoadAvg> {
    let mut it = text.split_whitespace().map(str::parse::<f64>);
    Some(LoadAvg {
        m1: it.next()?.ok()?,
        m5: it.next()?.ok()?,
        m15: it.next()?.ok()?,
    })
}

/// The conditions of one run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunMeta {
    /// mpt's version (Cargo) and `git describe --dirty` at build time.
    pub mpt_version: String,
    pub commit: String,
    /// The working tree had uncommitted changes at build time.
    pub dirty: bool,
    /// Cargo profile of the `mpt` binary ("release", "debug").
    pub profile: String,
    pub kernel: String,
    pub cpu_model: String,
    pub cores: usize,
    pub load_before: Option<LoadAvg>,
    pub load_after: Option<LoadAvg>,
    /// Congestion controls the measurements asked for, and the system
    /// default (what a measurement without `-C` used).
    pub congestion_controls: Vec<String>,
    /// [`SYSCTLS`] as read at the start ("" where absent).
    pub sysctls: BTreeMap<String, String>,
    /// The scenario: file path or `preset NAME`, and the SHA-256 of its
    /// bytes (a preset: of its built-in TOML text).
    pub scenario_source: String,
    pub scenario_sha256: String,
    /// `--quick` and the other command-line overrides, as given.
    pub overrides: String,
    /// Seeds of the emulated paths' loss draws (path i: i + 1; a hop in
    /// series: 101).
    pub seeds: Vec<u64>,
}

impl RunMeta {
    /// What is known at the start of a run.
    pub fn begin(source: &str, sha256: &str, overrides: &str, seeds: Vec<u64>) -> RunMeta {
        let describe = env!("MPT_GIT_DESCRIBE");
        RunMeta {
            mpt_version: env!("CARGO_PKG_VERSION").into(),
            commit: describe.trim_end_matches("-dirty").into(),
            dirty: describe.ends_with("-dirty"),
            profile: env!("MPT_BUILD_PROFILE").into(),
            kernel: read_trim("/proc/sys/kernel/osrelease"),
            cpu_model: cpu_model(&std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default()),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            load_before: LoadAvg::now(),
            load_after: None,
            congestion_controls: Vec::new(),
            sysctls: SYSCTLS
                .iter()
                .map(|k| (k.to_string(), read_sysctl(k)))
                .collect(),
            scenario_source: source.into(),
            scenario_sha256: sha256.into(),
            overrides: overrides.into(),
            seeds,
        }
    }

    /// At the end: the load after, and the congestion controls used
    /// (`asked`, plus the default every measurement without `-C` used).
    pub fn finish(&mut self, asked: impl IntoIterator<Item = String>) {
        self.load_after = LoadAvg::now();
        let default = self
            .sysctls
            .get("net.ipv4.tcp_congestion_control")
            .cloned()
            .unwrap_or_default();
        let mut cc: Vec<String> = asked.into_iter().filter(|c| !c.is_empty()).collect();
        if !default.is_empty() {
            cc.push(format!("{default} (default)"));
        }
        cc.sort();
        cc.dedup();
        self.congestion_controls = cc;
    }

    /// Differences that make two runs' figures not like for like, one
    /// line each ("kernel: A -> B").
    pub fn differences(&self, new: &RunMeta) -> Vec<String> {
        let mut d = Vec::new();
        let mut cmp = |what: &str, a: String, b: String| {
            if a != b {
                d.push(format!("{what}: {a} -> {b}"));
            }
        };
        cmp("kernel", self.kernel.clone(), new.kernel.clone());
        cmp("cpu", self.cpu_model.clone(), new.cpu_model.clone());
        cmp("cores", self.cores.to_string(), new.cores.to_string());
        cmp("profile", self.profile.clone(), new.profile.clone());
        cmp(
            "congestion control",
            self.congestion_controls.join(", "),
            new.congestion_controls.join(", "),
        );
        cmp(
            "scenario",
            short(&self.scenario_sha256),
            short(&new.scenario_sha256),
        );
        cmp("overrides", self.overrides.clone(), new.overrides.clone());
        for (k, v) in &self.sysctls {
            let w = new.sysctls.get(k).cloned().unwrap_or_default();
            cmp(k, v.clone(), w);
        }
        let busy = |m: &RunMeta| {
            m.load_before
                .iter()
                .chain(m.load_after.iter())
                .map(|l| l.m1)
                .fold(0.0, f64::max)
        };
        let (a, b) = (busy(self), busy(new));
        // A load of a core or more beside the run moves throughput figures.
        if (a - b).abs() >= 1.0 {
            d.push(format!("load (1 min, highest): {a:.2} -> {b:.2}"));
        }
        d
    }
}

fn short(h: &str) -> String {
    h.chars().take(12).collect()
}

/// SHA-256 of `bytes`, lower-case hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, bytes)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn read_trim(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn read_sysctl(key: &str) -> String {
    read_trim(&format!("/proc/sys/{}", key.replace('.', "/")))
}

/// The first `model name` of /proc/cpuinfo (or `Model`, `cpu model` on
/// other architectures).
pub fn cpu_model(cpuinfo: &str) -> String {
    cpuinfo
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| matches!(k.trim(), "model name" | "Model" | "cpu model"))
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_machine() {
        assert_eq!(
            parse_loadavg("0.52 1.10 2.00 3/400 1234\n"),
            Some(LoadAvg {
                m1: 0.52,
                m5: 1.1,
                m15: 2.0
            })
        );
        assert_eq!(parse_loadavg("x"), None);
        assert_eq!(
            cpu_model("processor\t: 0\nmodel name\t: AMD EPYC 7B13\nflags : x\n"),
            "AMD EPYC 7B13"
        );
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let m = RunMeta::begin("preset unlike", "ab", "--quick", vec![1, 2]);
        assert!(m.cores >= 1 && !m.profile.is_empty() && !m.commit.is_empty());
        assert_eq!(m.sysctls.len(), SYSCTLS.len());
    }

    #[test]
    fn differences_name_what_changed() {
        let mut a = RunMeta {
            kernel: "6.1".into(),
            cores: 2,
            profile: "release".into(),
            ..RunMeta::default()
        };
        a.finish(["cubic".to_string()]);
        a.load_after = None;
        let mut b = a.clone();
        assert!(a.differences(&b).is_empty());
        b.kernel = "6.8".into();
        b.cores = 4;
        b.congestion_controls = vec!["bbr".into()];
        b.load_before = Some(LoadAvg {
            m1: 3.0,
            m5: 0.0,
            m15: 0.0,
        });
        let d = a.differences(&b).join("\n");
        assert!(d.contains("kernel: 6.1 -> 6.8"), "{d}");
        assert!(d.contains("cores: 2 -> 4") && d.contains("congestion control"));
        assert!(d.contains("load"), "{d}");
    }
}
