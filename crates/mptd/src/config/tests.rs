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
    assert!(c.tunnel.mss_clamp, "on by default");
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

/// Identity tests: our key pair is derived from these bytes instead of a
/// file, so the tests need no file system.
const OUR_SECRET: [u8; 32] = [0x11; 32];

fn our_public() -> PublicKey {
    mpt_proto::noise::StaticSecret::from_bytes(OUR_SECRET).public_key()
}

fn peer_public(seed: u8) -> String {
    crate::keys::encode_public(&mpt_proto::noise::StaticSecret::from_bytes([seed; 32]).public_key())
}

fn parse_ids(text: &str) -> Result<Config, ConfigError> {
    parse_with(text, "ids.toml", &|path: &Path| {
        if path == Path::new("/etc/mpt/private.key") {
            Ok(our_public())
        } else {
            Err(format!(
                "key file {}: No such file or directory",
                path.display()
            ))
        }
    })
}

/// GOOD with `[daemon] private_key_file` and the first connection's
/// `public_key`.
fn with_identity(public_key: &str) -> String {
    GOOD.replace(
        "control = \"/tmp/x.sock\"",
        "control = \"/tmp/x.sock\"\nprivate_key_file = \"/etc/mpt/private.key\"",
    )
    .replace(
        "key_file = \"/etc/mpt/site-b.key\"",
        &format!("key_file = \"/etc/mpt/site-b.key\"\npublic_key = \"{public_key}\""),
    )
}

/// A second connection with `public_key`, appended to a config.
fn second_connection(public_key: &str) -> String {
    format!(
        r#"
[[connection]]
name = "site-c"
id = 2
peer_ipv4 = "192.168.200.3"
port = 65023
key_file = "/etc/mpt/site-c.key"
public_key = "{public_key}"

[[connection.path]]
name = "eth1"
local = "10.0.1.1"
"#
    )
}

#[test]
fn identities_parse_and_are_stored() {
    let peer = peer_public(0x22);
    let c = parse_ids(&with_identity(&peer)).expect("valid");
    assert_eq!(
        c.daemon.private_key_file.as_deref(),
        Some(Path::new("/etc/mpt/private.key"))
    );
    assert_eq!(c.daemon.public_key, Some(our_public()));
    assert_eq!(
        c.connections[0].public_key,
        Some(crate::keys::decode_public(&peer).unwrap())
    );
    // The daemon uses them: nothing to warn about.
    let w = c.identity_warnings();
    assert!(w.is_empty(), "{w:?}");
    assert_eq!(c.connections[0].rekey_after, None);

    // Two connections with different peer keys are fine.
    let two = with_identity(&peer) + &second_connection(&peer_public(0x33));
    assert!(parse_ids(&two)
        .expect("valid")
        .identity_warnings()
        .is_empty());
}

#[test]
fn configs_without_identities_are_unchanged() {
    let c = parse_ids(GOOD).expect("valid");
    assert_eq!(c.daemon.private_key_file, None);
    assert_eq!(c.daemon.public_key, None);
    assert_eq!(c.connections[0].public_key, None);
    assert!(c.identity_warnings().is_empty());
    // The spec's example writes an empty string for "none".
    let empty = GOOD.replace(
        "control = \"/tmp/x.sock\"",
        "control = \"/tmp/x.sock\"\nprivate_key_file = \"\"",
    );
    assert_eq!(
        parse_ids(&empty).expect("valid").daemon.private_key_file,
        None
    );
    // A key pair without any peer key: loaded, and the warning says so.
    let only_ours = GOOD.replace(
        "control = \"/tmp/x.sock\"",
        "control = \"/tmp/x.sock\"\nprivate_key_file = \"/etc/mpt/private.key\"",
    );
    let w = parse_ids(&only_ours).expect("valid").identity_warnings();
    assert!(w.len() == 1 && w[0].contains("private_key_file"), "{w:?}");
}

#[test]
fn bad_public_keys_are_refused_with_position() {
    let line_of = |text: &str| {
        text.lines()
            .position(|l| l.starts_with("public_key"))
            .expect("line")
            + 1
    };
    for (bad, expect) in [
        ("not base64!", "not base64"),
        ("AAAA", "found 3 bytes"),
        (
            "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
            "found 50 bytes",
        ),
        (
            "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
            "all zero bytes",
        ),
    ] {
        let text = with_identity(bad);
        let e = parse_ids(&text).expect_err(bad);
        assert!(
            e.message.contains("key `public_key`") && e.message.contains(expect),
            "{bad}: {e}"
        );
        assert_eq!(e.line, line_of(&text), "{bad}: {e}");
    }
}

#[test]
fn public_key_needs_our_private_key() {
    let text = GOOD.replace(
        "key_file = \"/etc/mpt/site-b.key\"",
        &format!(
            "key_file = \"/etc/mpt/site-b.key\"\npublic_key = \"{}\"",
            peer_public(0x22)
        ),
    );
    let e = parse_ids(&text).expect_err("no private key");
    assert!(
        e.message.contains("needs `[daemon] private_key_file`")
            && e.message.contains("mpt keypair"),
        "{e}"
    );
}

#[test]
fn our_own_public_key_is_not_a_peer() {
    let ours = crate::keys::encode_public(&our_public());
    let e = parse_ids(&with_identity(&ours)).expect_err("own key");
    assert!(e.message.contains("our own public key"), "{e}");
}

#[test]
fn two_connections_cannot_share_a_peer_key() {
    let peer = peer_public(0x22);
    let text = with_identity(&peer) + &second_connection(&peer);
    let e = parse_ids(&text).expect_err("duplicate");
    assert!(
        e.message.contains("site-c")
            && e.message
                .contains("connection `site-b` has the same public key"),
        "{e}"
    );
}

#[test]
fn unreadable_private_key_file_is_a_config_error() {
    let text =
        with_identity(&peer_public(0x22)).replace("/etc/mpt/private.key", "/etc/mpt/missing.key");
    let e = parse_ids(&text).expect_err("missing");
    assert!(
        e.message.contains("private_key_file") && e.message.contains("No such file"),
        "{e}"
    );
    // The real loader: a file that does not exist.
    let e = parse(&text, "real.toml").expect_err("missing");
    assert!(e.message.contains("/etc/mpt/missing.key"), "{e}");
}

#[test]
fn identity_changes_need_a_restart() {
    let a = parse_ids(&with_identity(&peer_public(0x22))).unwrap();
    let b = parse_ids(&with_identity(&peer_public(0x33))).unwrap();
    let lines = reload::needs_restart(&a, &b);
    assert_eq!(
        lines,
        ["connection site-b: public_key changed (restart to apply)"]
    );
    let lines = reload::needs_restart(&parse_ids(GOOD).unwrap(), &a);
    assert!(
        lines.iter().any(|l| l.contains("private_key_file")),
        "{lines:?}"
    );
}

#[test]
fn rekey_after_only_with_a_public_key_and_within_bounds() {
    let peer = peer_public(0x22);
    let with = |v: &str| {
        with_identity(&peer).replacen(
            "public_key =",
            &format!("rekey_after = \"{v}\"\npublic_key ="),
            1,
        )
    };
    let c = parse_ids(&with("5s")).expect("valid");
    assert_eq!(
        c.connections[0].rekey_after,
        Some(std::time::Duration::from_secs(5))
    );
    for bad in ["1s", "121s"] {
        let e = parse_ids(&with(bad)).unwrap_err();
        assert!(e.message.contains("rekey_after"), "{e}");
    }
    let psk_only = GOOD.replacen("key_file", "rekey_after = \"5s\"\nkey_file", 1);
    if psk_only != GOOD {
        let e = parse_ids(&psk_only).unwrap_err();
        assert!(e.message.contains("public_key"), "{e}");
    }
}

/// A client connection: `public_key`, no paths (served on the shared port).
fn client_connection(name: &str, id: u32, public_key: &str) -> String {
    format!(
        r#"
[[connection]]
name = "{name}"
id = {id}
peer_ipv4 = "192.168.200.{}"
public_key = "{public_key}"
"#,
        10 + id
    )
}

#[test]
fn client_connections_need_a_public_key_and_no_paths() {
    let peer = peer_public(0x22);
    // Valid: public_key, [daemon] private_key_file, no paths.
    let text = with_identity(&peer)
        + &client_connection("client-1", 5, &peer_public(0x44))
        + &client_connection("client-2", 6, &peer_public(0x55));
    let c = parse_ids(&text).expect("valid");
    assert!(!c.connections[0].is_client());
    let client = &c.connections[1];
    assert!(client.is_client() && client.paths.is_empty());
    assert_eq!(client.port, 65022, "the shared port by default");
    assert!(c.connections[2].is_client());
    // Without public_key: an error that says what a path-less connection is.
    let text = GOOD.to_string()
        + "\n[[connection]]\nname = \"nokey\"\nid = 9\npeer_ipv4 = \"192.168.200.9\"\nkey_file = \"/etc/mpt/k\"\n";
    let e = error_of(&text);
    assert!(
        e.message.contains("at least one [[connection.path]]") && e.message.contains("public_key"),
        "{e}"
    );
    // public_key without [daemon] private_key_file: refused as before.
    let text = GOOD.to_string() + &client_connection("c", 9, &peer);
    let e = error_of(&text);
    assert!(e.message.contains("private_key_file"), "{e}");
    // A client's ports are learnt: remote_port makes no sense.
    let text = with_identity(&peer)
        + &client_connection("c", 9, &peer_public(0x44))
            .replace("public_key", "remote_port = 1\npublic_key");
    let e = parse_ids(&text).expect_err("remote_port on a client");
    assert!(e.message.contains("remote_port"), "{e}");
    // Two clients may not share a key (which would be which?).
    let text = with_identity(&peer)
        + &client_connection("c1", 5, &peer_public(0x44))
        + &client_connection("c2", 6, &peer_public(0x44));
    assert!(parse_ids(&text).is_err());
}

/// A fresh directory for include tests.
fn include_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mptd-include-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(d.join("clients.d")).unwrap();
    d
}

/// A client connection table for an included file.
fn client_conn(name: &str, id: u32, last_octet: u8) -> String {
    format!(
        r#"
[[connection]]
name = "{name}"
id = {id}
peer_ipv4 = "192.168.200.{last_octet}"
key_file = "/etc/mpt/{name}.key"
[[connection.path]]
name = "p"
local = "10.0.0.1"
"#
    )
}

const MAIN_WITH_INCLUDE: &str = r#"
[daemon]
control = "/tmp/x.sock"
include = "clients.d/*.toml"

[tunnel]
ipv4 = "192.168.200.1/24"
"#;

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

#[test]
fn include_reads_matching_files_in_sorted_order() {
    let d = include_dir("sorted");
    let main = d.join("mptd.toml");
    write(
        &main,
        &format!("{MAIN_WITH_INCLUDE}{}", client_conn("main-one", 1, 2)),
    );
    write(&d.join("clients.d/b.toml"), &client_conn("b", 3, 4));
    write(
        &d.join("clients.d/a.toml"),
        &format!(
            "# first\n{}{}",
            client_conn("a1", 2, 3),
            client_conn("a2", 4, 5)
        ),
    );
    // Not matched: another suffix, a hidden file, a directory.
    write(&d.join("clients.d/c.toml.bak"), "garbage = 1");
    write(&d.join("clients.d/.hidden.toml"), "garbage = 1");
    std::fs::create_dir_all(d.join("clients.d/dir.toml")).unwrap();
    let c = load(&main).expect("valid");
    let names: Vec<&str> = c.connections.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["main-one", "a1", "a2", "b"]);
    let files: Vec<PathBuf> = c.includes.iter().map(|i| i.path.clone()).collect();
    assert_eq!(
        files,
        [d.join("clients.d/a.toml"), d.join("clients.d/b.toml")]
    );
    assert_eq!(c.includes[0].connections, ["a1", "a2"]);
    let report = c.check_report(&main);
    assert!(report.contains("4 connection(s)"), "{report}");
    assert!(report.contains("a.toml: 2 connection(s)"), "{report}");
    assert!(report.contains("b.toml: 1 connection(s)"), "{report}");
    // An absolute pattern works the same.
    let abs = MAIN_WITH_INCLUDE.replace(
        "clients.d/*.toml",
        &format!("{}/clients.d/?.toml", d.display()),
    );
    write(&main, &format!("{abs}{}", client_conn("main-one", 1, 2)));
    assert_eq!(load(&main).expect("valid").connections.len(), 4);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn include_matching_nothing_is_empty() {
    let d = include_dir("empty");
    let main = d.join("mptd.toml");
    write(
        &main,
        &format!("{MAIN_WITH_INCLUDE}{}", client_conn("only", 1, 2)),
    );
    let c = load(&main).expect("valid");
    assert_eq!(c.connections.len(), 1);
    assert!(c.includes.is_empty());
    // No connection anywhere: the error says where it looked.
    write(&main, MAIN_WITH_INCLUDE);
    let e = load(&main).unwrap_err();
    assert!(e.message.contains("no [[connection]]"), "{e}");
    assert!(e.message.contains("clients.d/*.toml"), "{e}");
    // A directory that does not exist is no match either.
    let other = MAIN_WITH_INCLUDE.replace("clients.d/", "nowhere.d/");
    write(&main, &format!("{other}{}", client_conn("only", 1, 2)));
    assert!(load(&main).is_ok());
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_concentrator_with_a_key_may_await_its_first_client() {
    let d = include_dir("await");
    let main = d.join("mptd.toml");
    let file = main.display().to_string();
    let text = MAIN_WITH_INCLUDE.replace(
        "control = \"/tmp/x.sock\"",
        "control = \"/tmp/x.sock\"\nprivate_key_file = \"/etc/mpt/private.key\"",
    );
    let c = parse_with(&text, &file, &|_: &Path| Ok(our_public())).expect("awaits clients");
    assert!(c.connections.is_empty() && c.awaits_clients());
    assert!(
        c.identity_warnings().is_empty(),
        "no warning for a key kept for clients"
    );
    // Once a client is there it no longer awaits one.
    write(&d.join("clients.d/a.toml"), &client_conn("a", 1, 2));
    let c = parse_with(&text, &file, &|_: &Path| Ok(our_public())).expect("valid");
    assert!(!c.awaits_clients());
    // Without include there is nowhere for clients to come from.
    let bare = text.replace("include = \"clients.d/*.toml\"\n", "");
    let e = parse_with(&bare, &file, &|_: &Path| Ok(our_public())).unwrap_err();
    assert!(e.message.contains("no [[connection]]"), "{e}");
    assert!(
        e.message.contains("private_key_file"),
        "says what would do: {e}"
    );
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn include_errors_name_the_included_file_and_position() {
    let d = include_dir("errors");
    let main = d.join("mptd.toml");
    write(&main, MAIN_WITH_INCLUDE);
    let inc = d.join("clients.d/x.toml");
    let inc_name = inc.display().to_string();
    // Another table than [[connection]].
    write(
        &inc,
        &format!("{}\n[tunnel]\nname = \"x\"\n", client_conn("x", 2, 3)),
    );
    let e = load(&main).unwrap_err();
    assert_eq!(e.file, inc_name, "{e}");
    assert!(e.message.contains("tunnel"), "{e}");
    assert!(e.message.contains("[[connection]] tables only"), "{e}");
    assert!(e.line > 1, "{e}");
    // A key after the last path belongs to that path: no hint about
    // top-level tables then.
    write(&inc, &format!("{}threads = 2\n", client_conn("x", 2, 3)));
    let e = load(&main).unwrap_err();
    assert!(e.message.contains("unknown field `threads`"), "{e}");
    assert!(!e.message.contains("tables only"), "{e}");
    // A top-level key.
    write(&inc, "threads = 2\n");
    let e = load(&main).unwrap_err();
    assert!(e.message.contains("tables only"), "{e}");
    assert_eq!(
        (e.file.as_str(), e.line, e.column),
        (inc_name.as_str(), 1, 1),
        "{e}"
    );
    // A bad key inside a connection: position in the included file.
    write(
        &inc,
        &client_conn("x", 2, 3).replace("key_file", "\nkey_fiel"),
    );
    let e = load(&main).unwrap_err();
    assert_eq!(e.file, inc_name, "{e}");
    assert_eq!((e.line, e.column), (7, 1), "{e}");
    assert!(e.message.contains("key_fiel"), "{e}");
    // A validation error (cross-key rule) in the included file.
    write(
        &inc,
        &client_conn("x", 2, 3).replace("\"10.0.0.1\"", "\"fd00::1\"\nremote = \"10.0.0.2\""),
    );
    let e = load(&main).unwrap_err();
    assert_eq!(e.file, inc_name, "{e}");
    assert!(e.message.contains("connection `x` path `p`"), "{e}");
    assert_eq!(e.line, 7, "{e}");
    // The main file's errors still name the main file, at the right line.
    write(&inc, &client_conn("x", 2, 3));
    write(
        &main,
        &MAIN_WITH_INCLUDE.replace("[tunnel]", "[tunnel]\nmtu = 1"),
    );
    let e = load(&main).unwrap_err();
    assert_eq!(e.file, main.display().to_string(), "{e}");
    assert!(e.message.contains("mtu"), "{e}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_connection_name_in_two_files_names_both() {
    let d = include_dir("dup");
    let main = d.join("mptd.toml");
    write(
        &main,
        &format!("{MAIN_WITH_INCLUDE}{}", client_conn("same", 1, 2)),
    );
    write(&d.join("clients.d/a.toml"), &client_conn("other", 2, 3));
    write(&d.join("clients.d/b.toml"), &client_conn("same", 3, 4));
    let e = load(&main).unwrap_err();
    let b = d.join("clients.d/b.toml").display().to_string();
    assert_eq!(e.file, b, "{e}");
    assert!(e.message.contains(&main.display().to_string()), "{e}");
    assert!(e.message.contains(&b), "{e}");
    assert_eq!(e.line, 2, "{e}");
    // Between two included files.
    write(&main, MAIN_WITH_INCLUDE);
    write(&d.join("clients.d/a.toml"), &client_conn("same", 2, 3));
    let e = load(&main).unwrap_err();
    assert!(
        e.message.contains("a.toml") && e.message.contains("b.toml"),
        "{e}"
    );
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn include_patterns_take_wildcards_in_the_file_name_only() {
    let d = include_dir("pattern");
    let main = d.join("mptd.toml");
    for (pattern, want) in [
        ("*/x.toml", "only the file-name part"),
        ("clients.d/[ab].toml", "only `*` and `?`"),
        ("clients.d/missing.toml", "not a readable file"),
    ] {
        let text = MAIN_WITH_INCLUDE.replace("clients.d/*.toml", pattern);
        write(&main, &format!("{text}{}", client_conn("c", 1, 2)));
        let e = load(&main).unwrap_err();
        assert!(e.message.contains("key `include`"), "{e}");
        assert!(e.message.contains(want), "{pattern}: {e}");
        assert_eq!(
            (e.file.clone(), e.line),
            (main.display().to_string(), 2),
            "{e}"
        );
    }
    // A plain file name that exists is read.
    write(&d.join("clients.d/one.toml"), &client_conn("one", 2, 3));
    let text = MAIN_WITH_INCLUDE.replace("*.toml", "one.toml");
    write(&main, &format!("{text}{}", client_conn("c", 1, 2)));
    assert_eq!(load(&main).expect("valid").connections.len(), 2);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn wildcards_match_like_the_shell() {
    use super::include::wildcard_match as m;
    assert!(m("*.toml", "a.toml"));
    assert!(!m("*.toml", ".toml"));
    assert!(!m("*.toml", "a.toml.bak"));
    assert!(m("c-??.toml", "c-01.toml"));
    assert!(!m("c-??.toml", "c-1.toml"));
    assert!(m("*", "x"));
    assert!(!m("*", ".x"));
    assert!(m(".*", ".x"));
    assert!(m("a*b*c", "aXXbYYbc"));
    assert!(!m("a*b*c", "aXXbYYbd"));
    assert!(m("plain", "plain"));
    assert!(!m("plain", "plainer"));
}

#[test]
fn reload_sees_included_connections_change() {
    let d = include_dir("reload");
    let main = d.join("mptd.toml");
    write(
        &main,
        &format!("{MAIN_WITH_INCLUDE}{}", client_conn("m", 1, 2)),
    );
    write(&d.join("clients.d/a.toml"), &client_conn("a", 2, 3));
    let running = load(&main).unwrap();
    write(
        &d.join("clients.d/a.toml"),
        &client_conn("a", 2, 3)
            .replace("\"p\"", "\"q\"")
            .replace("key_file", "keepalive = \"1s\"\nkey_file"),
    );
    write(&d.join("clients.d/b.toml"), &client_conn("b", 3, 4));
    let new = load(&main).unwrap();
    assert_eq!(new.connections.len(), 3);
    // Paths and timers apply; nothing needs a restart.
    assert!(reload::needs_restart(&running, &new).is_empty());
    assert_eq!(new.connections[1].paths[0].name, "q");
    // A restart-only key in an included file is reported.
    write(&d.join("clients.d/b.toml"), &client_conn("b", 3, 9));
    let newer = load(&main).unwrap();
    assert_eq!(
        reload::needs_restart(&new, &newer),
        ["connection b: peer_ipv4 changed (restart to apply)"]
    );
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn accept_remote_is_refused_with_advice() {
    for value in ["true", "false", "\"yes\""] {
        let text = GOOD.replace(
            "control = \"/tmp/x.sock\"",
            &format!("control = \"/tmp/x.sock\"\naccept_remote = {value}"),
        );
        let e = parse(&text, "a.toml").unwrap_err();
        assert_eq!((e.line, e.column), (4, 17), "{e}");
        assert!(e.message.contains("key `accept_remote`"), "{e}");
        assert!(e.message.contains("accept_remote was removed"), "{e}");
        assert!(e.message.contains("public_key"), "{e}");
        assert!(e.message.contains("include = \"clients.d/*.toml\""), "{e}");
    }
}

#[test]
fn cipher_defaults_to_aes_and_a_wrong_name_is_refused_where_it_is() {
    let c = parse(GOOD, "good.toml").expect("valid");
    assert_eq!(c.daemon.cipher, Cipher::Aes256Gcm);
    let text = GOOD.replace(
        "control = \"/tmp/x.sock\"",
        "control = \"/tmp/x.sock\"\ncipher = \"chacha20-poly1305\"",
    );
    let c = parse(&text, "good.toml").expect("valid");
    assert_eq!(c.daemon.cipher, Cipher::ChaCha20Poly1305);
    let text = GOOD.replace(
        "control = \"/tmp/x.sock\"",
        "control = \"/tmp/x.sock\"\ncipher = \"rot13\"",
    );
    let e = error_of(&text);
    let line = text
        .lines()
        .position(|l| l.starts_with("cipher"))
        .expect("line")
        + 1;
    assert_eq!(e.line, line, "{e}");
    assert!(e.message.contains("`rot13` is not a cipher"), "{e}");
    assert!(e.message.contains("aes-256-gcm, chacha20-poly1305"), "{e}");
}

#[test]
fn hook_is_a_program_or_an_argv_with_a_timeout() {
    let c = parse(GOOD, "good.toml").expect("valid");
    assert!(c.daemon.hook.is_empty(), "no hook by default");
    assert_eq!(c.daemon.hook_timeout, Duration::from_secs(10));

    let with = |keys: &str| {
        GOOD.replace(
            "control = \"/tmp/x.sock\"",
            &format!("control = \"/tmp/x.sock\"\n{keys}"),
        )
    };
    let c = parse(&with("hook = \"/etc/mpt/hook\""), "good.toml").expect("valid");
    assert_eq!(c.daemon.hook, ["/etc/mpt/hook"]);
    let c = parse(
        &with("hook = [\"/usr/bin/logger\", \"-t\", \"mpt\"]\nhook_timeout = \"2s\""),
        "good.toml",
    )
    .expect("valid");
    assert_eq!(c.daemon.hook, ["/usr/bin/logger", "-t", "mpt"]);
    assert_eq!(c.daemon.hook_timeout, Duration::from_secs(2));

    for (bad, says) in [
        ("hook = \"logger\"", "absolute path"),
        ("hook = []", "empty"),
        ("hook = 3", "hook"),
        ("hook = \"/x\"\nhook_timeout = \"0s\"", "hook_timeout"),
        ("hook = \"/x\"\nhook_timeout = \"11m\"", "hook_timeout"),
    ] {
        let e = error_of(&with(bad));
        assert!(e.message.contains(says), "{bad}: {e}");
    }
}

#[test]
fn remote_takes_a_host_name_and_keeps_ip_literals() {
    let c = parse(GOOD, "good.toml").expect("valid");
    let p = &c.connections[0].paths[0];
    assert_eq!(p.remote, Some("10.0.0.2".parse().unwrap()));
    assert_eq!(p.remote_name, None);
    assert_eq!(c.daemon.resolve_interval, Duration::from_secs(300));

    let named = GOOD.replace("\"10.0.0.2\"", "\"Hub.Example.net\"");
    let c = parse(&named, "named.toml").expect("a host name");
    let p = &c.connections[0].paths[0];
    assert_eq!(p.remote, None);
    assert_eq!(p.remote_name.as_deref(), Some("hub.example.net"));
    // A name is not held to the local address's family (its addresses
    // are picked by it at run time).
    let v6 = GOOD.replace("remote = \"10.0.0.2\"", "").replace(
        "local = \"fd77::1\"",
        "local = \"fd77::1\"\nremote = \"hub.example.net\"",
    );
    let c = parse(&v6, "v6.toml").expect("a name on an IPv6 path");
    assert_eq!(
        c.connections[0].paths[1].remote_name.as_deref(),
        Some("hub.example.net")
    );
    // Neither an address nor a name: an error at the value.
    for bad in ["10.0.0.300", "hub..example.net", "hub example"] {
        let e = parse(
            &GOOD.replace("\"10.0.0.2\"", &format!("\"{bad}\"")),
            "bad.toml",
        )
        .expect_err(bad);
        assert!(
            e.message.contains("neither an IP address nor a host name"),
            "{bad}: {e}"
        );
        assert_eq!(e.line, 25, "{e}");
    }
}

#[test]
fn resolve_interval_is_a_bounded_duration() {
    let with = |v: &str| {
        GOOD.replace(
            "control = \"/tmp/x.sock\"",
            &format!("control = \"/tmp/x.sock\"\nresolve_interval = \"{v}\""),
        )
    };
    let c = parse(&with("2s"), "i.toml").expect("2s");
    assert_eq!(c.daemon.resolve_interval, Duration::from_secs(2));
    let c = parse(&with("10m"), "i.toml").expect("10m");
    assert_eq!(c.daemon.resolve_interval, Duration::from_secs(600));
    for bad in ["500ms", "2000m"] {
        let e = parse(&with(bad), "i.toml").expect_err(bad);
        assert!(e.message.contains("resolve_interval"), "{e}");
    }
}

#[test]
fn mss_clamp_can_be_turned_off_and_wants_a_bool() {
    let off = GOOD.replace("mtu = 1400\n", "mtu = 1400\nmss_clamp = false\n");
    assert!(!parse(&off, "off.toml").expect("valid").tunnel.mss_clamp);
    let bad = GOOD.replace("mtu = 1400\n", "mtu = 1400\nmss_clamp = \"yes\"\n");
    let e = parse(&bad, "bad.toml").unwrap_err();
    assert!(
        e.to_string().contains("mss_clamp") || e.to_string().contains("bool"),
        "{e}"
    );
}

#[test]
fn include_refuses_files_anyone_can_write() {
    use std::os::unix::fs::PermissionsExt;
    let set = |p: &Path, mode: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap()
    };
    let d = include_dir("writable");
    let main = d.join("mptd.toml");
    write(&main, MAIN_WITH_INCLUDE);
    let client = d.join("clients.d/a.toml");
    write(&client, &client_conn("a", 2, 3));
    set(&client, 0o644);
    set(&d.join("clients.d"), 0o755);
    assert_eq!(load(&main).expect("valid").connections.len(), 1);
    // The file writable by anyone: refused, named, with the fix.
    set(&client, 0o666);
    let e = load(&main).expect_err("o+w file");
    assert!(e.file.ends_with("a.toml"), "{e}");
    assert!(
        e.message.contains("writable by anyone") && e.message.contains("chmod o-w"),
        "{e}"
    );
    // The folder writable by anyone (even with the sticky bit).
    set(&client, 0o644);
    set(&d.join("clients.d"), 0o1777);
    let e = load(&main).expect_err("o+w folder");
    assert!(e.message.contains("folder"), "{e}");
    // Group-writable is the operator's choice (a group of admins).
    set(&d.join("clients.d"), 0o775);
    set(&client, 0o664);
    assert_eq!(load(&main).expect("valid").connections.len(), 1);
    std::fs::remove_dir_all(&d).unwrap();
}
