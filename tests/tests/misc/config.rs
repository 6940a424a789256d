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

/// `[daemon] include`: the connections of a main file split off into
/// `clients.d/*.toml`; `mptd --check` and `mpt config check` accept it and
/// list the included file, and an error in it names that file.
#[test]
fn check_reads_and_reports_included_files() {
    let dir = TempDir::new("cfg").expect("temp dir");
    let good = good_config(dir.path());
    let at = good.find("[[connection]]").expect("a connection");
    let main = good[..at].replacen(
        "[daemon]\n",
        "[daemon]\ninclude = \"clients.d/*.toml\"\n",
        1,
    );
    assert_ne!(main, good[..at], "include not inserted");
    std::fs::create_dir_all(dir.path().join("clients.d")).expect("mkdir");
    let inc = dir.path().join("clients.d/site.toml");
    std::fs::write(&inc, &good[at..]).expect("write include");
    let f = dir.path().join("main.toml");
    std::fs::write(&f, &main).expect("write main");
    for bin in [mptd_bin().expect("mptd"), mpt_bin().expect("mpt")] {
        let mut cmd = Command::new(&bin);
        if bin.ends_with("mpt") {
            cmd.args(["config", "check"]);
        } else {
            cmd.arg("--check");
        }
        let out = cmd.arg(&f).output().expect("run the check");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}: {stdout}{}",
            bin.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            stdout.contains("ok (1 connection(s), 2 path(s))"),
            "{stdout}"
        );
        assert!(stdout.contains("site.toml: 1 connection(s)"), "{stdout}");
    }
    // An error inside the included file names it, not the main file.
    std::fs::write(
        &inc,
        good[at..].replacen("status = \"up\"", "status = \"sideways\"", 1),
    )
    .expect("write include");
    let (code, err) = check(&f);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("site.toml:") && err.contains("status"),
        "{err}"
    );
    assert!(!err.contains("main.toml"), "{err}");
}
