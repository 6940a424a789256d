//! `mptd --check` and start-up with a bad config: exit code 2, an error
//! naming the problem, and nothing half-started.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use mpt_e2e::*;

fn check(file: &Path) -> (i32, String) {
    let bin = mptd_bin().expect("mptd binary");
    let out = Command::new(bin)
        .arg("--check")
        .arg(file)
        .output()
        .expect("run mptd --check");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn good_config(dir: &Path) -> String {
    BedSpec::uniform(2, Family::V4).config(Side::A, &dir.join("a.sock"))
}

#[test]
fn check_accepts_the_harness_configs() {
    let dir = TempDir::new("cfg").expect("temp dir");
    let mixed = BedSpec::with_paths(vec![
        PathSpec::new(Family::V4),
        PathSpec::new(Family::V6).weights(3, 1),
    ]);
    for (name, text) in [
        ("a.toml", mixed.config(Side::A, &dir.path().join("a.sock"))),
        ("b.toml", mixed.config(Side::B, &dir.path().join("b.sock"))),
        (
            "v6only.toml",
            mixed
                .clone()
                .inner(&[Family::V6])
                .config(Side::A, &dir.path().join("c.sock")),
        ),
    ] {
        let f = dir.path().join(name);
        std::fs::write(&f, &text).expect("write config");
        let (code, err) = check(&f);
        assert_eq!(code, 0, "--check rejected {name}:\n{text}\nstderr:\n{err}");
    }
}

#[test]
fn check_rejects_bad_configs_with_exit_code_2() {
    let dir = TempDir::new("cfg").expect("temp dir");
    let good = good_config(dir.path());
    let cases = [
        (
            "unknown key",
            good.replace("mtu = 1400", "mtu = 1400\nbogus_key = 1"),
            "bogus_key",
        ),
        (
            "bad duration",
            good.replace("keepalive = \"300ms\"", "keepalive = \"soon\""),
            "keepalive",
        ),
        (
            "bad address",
            good.replace("local = \"10.77.0.1\"", "local = \"10.77.0.300\""),
            "local",
        ),
        (
            "bad status",
            good.replacen("status = \"up\"", "status = \"sideways\"", 1),
            "status",
        ),
        ("not toml", "[daemon\ncontrol = ".to_owned(), ""),
    ];
    for (what, text, key) in cases {
        assert_ne!(text, good, "{what}: the edit did not apply");
        let f = dir.path().join("bad.toml");
        std::fs::write(&f, &text).expect("write config");
        let (code, err) = check(&f);
        assert_eq!(code, 2, "{what}: --check exit code {code}, stderr:\n{err}");
        assert!(
            err.contains(key),
            "{what}: error does not name {key:?}:\n{err}"
        );
        assert!(
            err.contains("bad.toml"),
            "{what}: error does not name the file:\n{err}"
        );
    }
    let (code, err) = check(&dir.path().join("missing.toml"));
    assert_eq!(code, 2, "missing file: exit code {code}, stderr:\n{err}");
}

#[test]
fn daemon_with_bad_config_exits_2_without_half_starting() {
    let dir = TempDir::new("cfg").expect("temp dir");
    let ns = Netns::new("cfg").expect("netns");
    let f = dir.path().join("bad.toml");
    let sock = dir.path().join("a.sock");
    let text = BedSpec::uniform(1, Family::V4)
        .config(Side::A, &sock)
        .replace("window = 1", "window = 1\nnope = true");
    std::fs::write(&f, text).expect("write config");
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns.name()])
        .arg(mptd_bin().expect("mptd binary"))
        .arg("--config")
        .arg(&f)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn mptd");
    let status = wait_until("mptd to exit", Duration::from_secs(5), POLL, || {
        Ok(child.try_wait()?)
    });
    let status = match status {
        Ok(s) => s,
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            panic!("mptd kept running with a bad config: {e:#}");
        }
    };
    assert_eq!(status.code(), Some(2), "exit status {status}");
    assert!(!ns.link_exists(TUN), "{TUN} left behind");
    assert!(!sock.exists(), "control socket left behind");
}
