use super::*;

const GOOD: &str = r#"
[daemon]
control = "/tmp/x.sock"

[tunnel]
name = "mpt0"
mtu = 1400
ipv4 = "192.168.200.1/24"
ipv6 = "fd00:de:200::1/64"

[[connection]]
name = "site-b"
peer_ipv4 = "192.168.200.2"
peer_ipv6 = "fd00:de:200::2"
networks = ["10.20.0.0/16"]
port = 65022
keepalive = "500ms"
dead_timer = "2s"
key_file = "/etc/mpt/site-b.key"
allow_peer_paths = ["10.30.0.0/24", "fd30::/64"]

[[connection.path]]
name = "eth1"
local = "10.0.0.1"
remote = "10.0.0.2"
weight_out = 100
weight_in = 50
window = 2
status = "backup"

[[connection.path]]
name = "v6"
local = "fd77::1"
"#;

#[test]
fn good_config_parses_with_every_key() {
    let c = parse(GOOD, "good.toml").expect("valid");
    assert_eq!(c.daemon.control, PathBuf::from("/tmp/x.sock"));
    assert_eq!(c.tunnel.ipv4.map(|p| p.len), Some(24));
    let conn = &c.connections[0];
    assert_eq!(conn.keepalive, Duration::from_millis(500));
    assert_eq!(conn.dead_timer, Duration::from_secs(2));
    assert_eq!(conn.remote_port, 65022, "defaults to port");
    assert_eq!(conn.networks[0].to_string(), "10.20.0.0/16");
    let p = &conn.paths[0];
    assert_eq!((p.weight_out, p.weight_in, p.window), (100, 50, 2));
    assert_eq!(p.status, AdminStatus::Backup);
    assert_eq!(conn.paths[1].remote, None);
    assert_eq!(conn.paths[1].status, AdminStatus::Up);
    assert_eq!(conn.allow_peer_paths.len(), 2);
    let locals: Vec<String> = conn.peer_locals().iter().map(|p| p.to_string()).collect();
    assert_eq!(
        locals,
        ["10.0.0.1/32", "fd77::1/128", "10.30.0.0/24", "fd30::/64"]
    );
}

#[test]
fn a_cleartext_path_must_name_its_remote() {
    let text = GOOD.replace("key_file = \"/etc/mpt/site-b.key\"\n", "");
    let e = error_of(&text);
    assert!(
        e.message.contains("path `v6`") && e.message.contains("key `remote` is missing"),
        "{e}"
    );
    assert!(e.message.contains("key_file"), "says how to fix it: {e}");
    // With a remote it is fine.
    let fixed = text.replace(
        "local = \"fd77::1\"",
        "local = \"fd77::1\"\nremote = \"fd77::2\"",
    );
    parse(&fixed, "fixed.toml").expect("cleartext with remotes");
}

#[test]
fn path_names_must_be_plain_printable_ascii() {
    // As TOML strings: a space, a tab, a non-ASCII letter, an escape code.
    for bad in [
        r#""two words""#,
        r#""tab\there""#,
        r#""caf\u00e9""#,
        r#""esc\u001b[31m""#,
    ] {
        let text = GOOD.replace("name = \"eth1\"", &format!("name = {bad}"));
        let e = error_of(&text);
        assert!(e.message.contains("printable ASCII"), "{bad:?}: {e}");
    }
}

fn error_of(text: &str) -> ConfigError {
    parse(text, "bad.toml").expect_err("must be rejected")
}

#[test]
fn unknown_key_rejected_with_position() {
    let text = GOOD.replace("window = 2", "window = 2\nwindwo = 3");
    let e = error_of(&text);
    let line = text
        .lines()
        .position(|l| l.starts_with("windwo"))
        .expect("line")
        + 1;
    assert_eq!((e.file.as_str(), e.line, e.column), ("bad.toml", line, 1));
    assert!(e.message.contains("windwo"), "{e}");
}

#[test]
fn bad_value_names_key_and_position() {
    let text = GOOD.replace("keepalive = \"500ms\"", "keepalive = \"500 parsecs\"");
    let e = error_of(&text);
    let line = text
        .lines()
        .position(|l| l.starts_with("keepalive"))
        .expect("line")
        + 1;
    assert_eq!(e.line, line);
    assert!(e.message.contains("keepalive"), "{e}");
    assert!(
        e.to_string().starts_with(&format!("bad.toml:{line}:")),
        "{e}"
    );
    let e = error_of(&GOOD.replace("\"10.0.0.2\"", "\"10.0.0.300\""));
    assert!(e.message.contains("remote"), "{e}");
    let e = error_of(&GOOD.replace("\"backup\"", "\"sideways\""));
    assert!(e.message.contains("status"), "{e}");
}

#[test]
fn cross_key_rules() {
    for (from, to, needle) in [
        ("weight_out = 100", "weight_out = 0", "weight_out"),
        ("window = 2", "window = 0", "window"),
        (
            "dead_timer = \"2s\"",
            "dead_timer = \"100ms\"",
            "dead_timer",
        ),
        ("mtu = 1400", "mtu = 100", "mtu"),
        ("remote = \"10.0.0.2\"", "remote = \"fd00::2\"", "family"),
        ("name = \"v6\"", "name = \"eth1\"", "already exists"),
        (
            "ipv4 = \"192.168.200.1/24\"",
            "ipv4 = \"192.168.200.1/33\"",
            "prefix length",
        ),
        ("port = 65022", "port = 0", "port"),
    ] {
        assert!(GOOD.contains(from), "{from}");
        let e = error_of(&GOOD.replacen(from, to, 1));
        assert!(e.message.contains(needle), "{from} -> {to}: {e}");
        assert!(e.line > 0, "{e}");
    }
}

#[test]
fn missing_parts() {
    let no_conn = &GOOD[..GOOD.find("[[connection]]").expect("conn")];
    assert!(error_of(no_conn).message.contains("no [[connection]]"));
    let no_path = &GOOD[..GOOD.find("[[connection.path]]").expect("path")];
    assert!(error_of(no_path).message.contains("at least one"));
    assert!(error_of("").message.contains("tunnel"));
    assert!(error_of("[tunnel\n").line >= 1);
}

#[test]
fn durations() {
    assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
    assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
    assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
    assert_eq!(parse_duration("100us"), Ok(Duration::from_micros(100)));
    assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
    assert!(parse_duration("2").is_err());
    assert!(parse_duration("s").is_err());
    assert!(parse_duration("2h").is_err());
    assert!(parse_duration("1e999s").is_err());
}

#[test]
fn prefixes() {
    let p: Prefix = "10.20.0.0/16".parse().expect("prefix");
    assert!(p.contains("10.20.3.4".parse().expect("ip")));
    assert!(!p.contains("10.21.0.1".parse().expect("ip")));
    assert!(!p.contains("fd00::1".parse().expect("ip")));
    let all: Prefix = "0.0.0.0/0".parse().expect("prefix");
    assert!(all.contains("1.2.3.4".parse().expect("ip")));
    let v6: Prefix = "fd00:20::/32".parse().expect("prefix");
    assert!(v6.contains("fd00:20:1::5".parse().expect("ip")));
    assert!("fd00::/129".parse::<Prefix>().is_err());
    assert!("10.0.0.0".parse::<Prefix>().is_err());
}

#[test]
fn shipped_example_configs_are_valid() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../conf");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).expect("conf/ exists") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "toml") {
            load(&path).unwrap_or_else(|e| panic!("{e}"));
            checked += 1;
        }
    }
    assert!(checked >= 6, "only {checked} example configs found");
}

#[test]
fn interface_only_paths() {
    let text = GOOD.replace(
        "name = \"v6\"\nlocal = \"fd77::1\"",
        "name = \"wifi\"\ninterface = \"wlan0\"\nremote = \"10.0.0.9\"",
    );
    let c = parse(&text, "good.toml").expect("interface-only path is valid");
    let p = &c.connections[0].paths[1];
    assert_eq!((p.local, p.interface.as_deref()), (None, Some("wlan0")));
    // Its changing address is not among the peer's allowed locals.
    let locals: Vec<String> = c.connections[0]
        .peer_locals()
        .iter()
        .map(|p| p.to_string())
        .collect();
    assert_eq!(locals, ["10.0.0.1/32", "10.30.0.0/24", "fd30::/64"]);

    // Neither local nor interface: the message says what to write.
    let e = error_of(&GOOD.replace("local = \"fd77::1\"", ""));
    assert!(
        e.message.contains("local = \"ADDRESS\"") && e.message.contains("interface = \"NAME\""),
        "{e}"
    );
    assert!(e.message.contains("path `v6`"), "{e}");
    assert!(e.line > 0, "{e}");
    for bad in ["", "has space", "a/b", "sixteen-chars-xx", "eth0:1", ".."] {
        let e = error_of(&text.replace("\"wlan0\"", &format!("{bad:?}")));
        assert!(
            e.message.contains("key `interface`") && e.message.contains("interface = \"wlan0\""),
            "{bad:?}: {e}"
        );
    }
    // Two paths cannot follow one interface's address.
    let twice = format!(
        "{text}\n[[connection.path]]\nname = \"wifi2\"\ninterface = \"wlan0\"\nremote = \"10.0.0.10\"\n"
    );
    let e = error_of(&twice);
    assert!(e.message.contains("already follows"), "{e}");
}
