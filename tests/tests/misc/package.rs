//! The Debian package: `scripts/package.sh` packs the binaries this test
//! run uses (no second build), and the .deb holds what docs/OPERATIONS.md
//! promises: binaries, the hardened unit, conffiles in /etc/mpt, shell
//! completions, man pages, dashboard, alert rules, docs, and maintainer
//! scripts that the shell accepts. The unit passes `systemd-analyze
//! verify` where systemd-analyze is installed.
//!
//! It does not run `dpkg -i`: the postinst adds the system user `mpt`,
//! which a purge keeps, so the machine would not be left as it was.
//! docs/OPERATIONS.md records the install tried by hand.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{ensure, Context, Result};
use mpt_e2e::mptd_bin;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A folder removed on drop.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn run(cmd: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .with_context(|| format!("running {cmd}"))?;
    ensure!(
        out.status.success(),
        "{cmd} {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs scripts/package.sh on the binaries next to mptd; the .deb's path.
fn build_package(out: &Path) -> Result<PathBuf> {
    let bin_dir = mptd_bin()?.parent().unwrap().to_path_buf();
    let script = repo().join("scripts/package.sh");
    let stdout = run(
        "bash",
        &[
            script.to_str().unwrap(),
            "--bin-dir",
            bin_dir.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
    )?;
    let deb = PathBuf::from(stdout.lines().last().unwrap_or_default());
    ensure!(deb.is_file(), "package.sh printed {stdout:?}");
    Ok(deb)
}

#[test]
fn package_holds_what_operations_md_promises() -> Result<()> {
    if Command::new("dpkg-deb").arg("--version").output().is_err() {
        // Only Debian and its kin have dpkg; CI's machine does.
        eprintln!("skipped: no dpkg-deb on this machine");
        return Ok(());
    }
    let tmp = TempDir(std::env::temp_dir().join(format!("mpt-package-{}", std::process::id())));
    std::fs::create_dir_all(&tmp.0)?;
    let deb = build_package(&tmp.0.join("out"))?;
    let deb = deb.to_str().unwrap();

    let info = run("dpkg-deb", &["-I", deb])?;
    for want in [
        "Package: mpt",
        "Architecture: ",
        "iproute2",
        "libc6 (>= 2.",
        "postinst",
        "prerm",
        "postrm",
        "conffiles",
    ] {
        ensure!(info.contains(want), "dpkg-deb -I lacks {want:?}:\n{info}");
    }

    let listing = run("dpkg-deb", &["-c", deb])?;
    let has = |path: &str| listing.lines().any(|l| l.ends_with(path));
    for path in [
        "./usr/bin/mptd",
        "./usr/bin/mpt",
        "./lib/systemd/system/mptd.service",
        "./usr/lib/sysusers.d/mpt.conf",
        "./etc/mpt/client.toml.example",
        "./etc/mpt/server.toml.example",
        "./etc/mpt/clients.d/",
        "./usr/share/bash-completion/completions/mpt",
        "./usr/share/zsh/vendor-completions/_mpt",
        "./usr/share/fish/vendor_completions.d/mpt.fish",
        "./usr/share/man/man1/mpt.1.gz",
        "./usr/share/man/man1/mpt-status.1.gz",
        "./usr/share/man/man1/mpt-emu-run.1.gz",
        "./usr/share/man/man8/mptd.8.gz",
        "./usr/share/mpt/grafana/mpt-dashboard.json",
        "./usr/share/mpt/prometheus/mpt-alerts.yml",
        "./usr/share/doc/mpt/README.md",
        "./usr/share/doc/mpt/OPERATIONS.md",
        "./usr/share/doc/mpt/copyright",
    ] {
        ensure!(has(path), "the package lacks {path}:\n{listing}");
    }
    // The hidden packaging command has no page of its own.
    ensure!(!listing.contains("mpt-generate"), "{listing}");
    for l in listing.lines() {
        ensure!(l.contains(" root/root "), "not owned by root: {l}");
    }
    let bin = listing
        .lines()
        .find(|l| l.ends_with("./usr/bin/mptd"))
        .unwrap();
    ensure!(bin.starts_with("-rwxr-xr-x"), "{bin}");

    let root = tmp.0.join("root");
    let root_s = root.to_str().unwrap();
    run("dpkg-deb", &["-R", deb, root_s])?;
    let read = |rel: &str| {
        std::fs::read_to_string(root.join(rel)).with_context(|| format!("reading {rel}"))
    };
    ensure!(read("lib/systemd/system/mptd.service")? == read_repo("conf/mptd.service")?);
    ensure!(read("etc/mpt/client.toml.example")? == read_repo("conf/client.toml")?);
    let conffiles = read("DEBIAN/conffiles")?;
    ensure!(
        conffiles == "/etc/mpt/client.toml.example\n/etc/mpt/server.toml.example\n",
        "{conffiles:?}"
    );
    let postinst = read("DEBIAN/postinst")?;
    ensure!(postinst.contains("adduser --system --group"), "{postinst}");
    for script in ["postinst", "prerm", "postrm"] {
        let path = root.join("DEBIAN").join(script);
        run("sh", &["-n", path.to_str().unwrap()])?;
    }
    // The completions and pages come from the packed binary.
    ensure!(read("usr/share/bash-completion/completions/mpt")?.contains("status"));
    let page = run(
        "sh",
        &[
            "-c",
            &format!("gzip -dc {root_s}/usr/share/man/man8/mptd.8.gz"),
        ],
    )?;
    ensure!(
        page.contains(".TH mptd 8") && page.contains("\\-\\-config"),
        "{page}"
    );

    // systemd's own check of the unit, with the packed binaries and man
    // pages in place of the installed ones.
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_ok()
    {
        let unit = read("lib/systemd/system/mptd.service")?
            .replace("/usr/bin/", &format!("{root_s}/usr/bin/"));
        let dir = tmp.0.join("verify");
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("mptd.service"), unit)?;
        let out = Command::new("systemd-analyze")
            .arg("verify")
            .arg(dir.join("mptd.service"))
            .env("MANPATH", root.join("usr/share/man"))
            .output()?;
        let said = String::from_utf8_lossy(&out.stderr);
        ensure!(
            out.status.success() && said.trim().is_empty(),
            "systemd-analyze verify: {said}"
        );
    }
    Ok(())
}

fn read_repo(rel: &str) -> Result<String> {
    std::fs::read_to_string(repo().join(rel)).with_context(|| format!("reading {rel}"))
}
