//! mptd's parsers of what it reads from files, the kernel and the
//! network: the config, rtnetlink datagrams (links, addresses, routes)
//! and the remote command port's answers.
//!
//! Not here: hook events. They are formatted (`MPT_*` variables from
//! names the config already checked), never parsed.

use std::sync::OnceLock;

use mpt_proto::crypto::cmdauth::CmdKey;
use mpt_proto::crypto::Psk;
use mptd::config::MAX_WEIGHT;
use proptest::prelude::*;

use crate::harness::fuzz;

const BASE: &str = r#"[daemon]
control = "/tmp/fuzz.sock"
handshake_rate = 600
[tunnel]
name = "mpt0"
mtu = 1400
ipv4 = "192.168.200.1/24"
ipv6 = "fd00:de:200::1/64"
[[connection]]
name = "site-b"
peer_ipv4 = "192.168.200.2"
networks = ["10.20.0.0/16"]
port = 65022
keepalive = "500ms"
dead_timer = "2s"
[[connection.path]]
name = "eth1"
local = "10.0.0.1"
remote = "10.0.0.2"
weight_out = 100
status = "backup"
[[connection.path]]
name = "v6"
local = "fd77::1"
remote = "fd77::2"
"#;

/// A replacement for a line, or for the value after its `=`.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("0".to_string()),
        Just("-1".to_string()),
        Just("4294967296".to_string()),
        Just("\"\"".to_string()),
        Just("\"2s\"".to_string()),
        Just("\"0s\"".to_string()),
        Just("\"10.0.0.9\"".to_string()),
        Just("\"::\"".to_string()),
        Just("true".to_string()),
        Just("[]".to_string()),
        Just("{}".to_string()),
        Just("\"a/b\"".to_string()),
        Just("handshake_queue = 3".to_string()),
        Just("[[connection.path]]".to_string()),
        Just("[[connection]]".to_string()),
        Just("[security]".to_string()),
        Just("mtu = 70000".to_string()),
        Just("include = \"/nonexistent/*.toml\"".to_string()),
        (0u64..100_000).prop_map(|n| n.to_string()),
        "[ -~]{0,30}",
    ]
}

#[derive(Debug, Clone)]
enum Edit {
    Delete(usize),
    Duplicate(usize),
    Value(usize, String),
    Insert(usize, String),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        any::<usize>().prop_map(Edit::Delete),
        any::<usize>().prop_map(Edit::Duplicate),
        (any::<usize>(), text()).prop_map(|(i, t)| Edit::Value(i, t)),
        (any::<usize>(), text()).prop_map(|(i, t)| Edit::Insert(i, t)),
    ]
}

fn apply(edits: &[Edit]) -> String {
    let mut lines: Vec<String> = BASE.lines().map(str::to_string).collect();
    for e in edits {
        let n = lines.len().max(1);
        match e {
            Edit::Delete(i) if !lines.is_empty() => {
                lines.remove(i % n);
            }
            Edit::Duplicate(i) if !lines.is_empty() => {
                let l = lines[i % n].clone();
                lines.insert(i % n, l);
            }
            Edit::Value(i, t) if !lines.is_empty() => {
                let l = &mut lines[i % n];
                *l = match l.split_once('=') {
                    Some((k, _)) => format!("{k}= {t}"),
                    None => t.clone(),
                };
            }
            Edit::Insert(i, t) => lines.insert(i % (lines.len() + 1), t.clone()),
            _ => {}
        }
    }
    lines.join("\n")
}

#[test]
fn config() {
    assert!(
        mptd::config::parse(BASE, "base.toml").is_ok(),
        "the base config is valid"
    );
    let input = prop_oneof![
        1 => "(?s).{0,200}".prop_map(|s| s),
        4 => prop::collection::vec(edit(), 1..5).prop_map(|e| apply(&e)),
    ];
    fuzz("config", 384, input, |text| {
        let Ok(c) = mptd::config::parse(&text, "fuzz.toml") else {
            return Ok(());
        };
        prop_assert!((576..=9000).contains(&c.tunnel.mtu));
        let h = c.daemon.handshake;
        prop_assert!(
            (1..=10_000).contains(&h.source_rate) && (1..=10_000).contains(&h.source_burst)
        );
        prop_assert!(h.rate >= h.source_rate && h.rate <= 100_000);
        prop_assert!((16..=65_536).contains(&h.queue));
        prop_assert!(!c.connections.is_empty());
        for conn in &c.connections {
            for p in &conn.paths {
                prop_assert!(
                    (1..=MAX_WEIGHT).contains(&p.weight_out),
                    "{:?}",
                    p.weight_out
                );
            }
        }
        Ok(())
    });
}

/// A netlink attribute: type and payload.
fn attribute() -> impl Strategy<Value = (u16, Vec<u8>)> {
    (
        prop_oneof![0u16..12, any::<u16>()],
        prop::collection::vec(any::<u8>(), 0..20),
    )
}

/// One netlink message: type, fixed header bytes, attributes, and a
/// length error to frame it wrongly now and then.
fn message() -> impl Strategy<Value = Vec<u8>> {
    let kind = prop_oneof![
        Just(16u16),
        Just(17),
        Just(20),
        Just(21),
        Just(24),
        Just(25),
        Just(2),
        Just(3),
        Just(4),
        any::<u16>(),
    ];
    (
        kind,
        prop::collection::vec(any::<u8>(), 0..20),
        prop::collection::vec(attribute(), 0..5),
        prop_oneof![8 => Just(0i32), 1 => -8i32..8],
    )
        .prop_map(|(kind, head, attrs, skew)| {
            let mut body = head;
            while body.len() % 4 != 0 {
                body.push(0);
            }
            for (t, data) in attrs {
                let len = 4 + data.len() as u16;
                body.extend(len.to_ne_bytes());
                body.extend(t.to_ne_bytes());
                body.extend(&data);
                while body.len() % 4 != 0 {
                    body.push(0);
                }
            }
            let len = (16 + body.len()) as i64 + i64::from(skew);
            let mut m = Vec::new();
            m.extend((len.max(0) as u32).to_ne_bytes());
            m.extend(kind.to_ne_bytes());
            m.extend(0u16.to_ne_bytes());
            m.extend(7u32.to_ne_bytes());
            m.extend(0u32.to_ne_bytes());
            m.extend(body);
            m
        })
}

#[test]
fn netlink() {
    let input = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..128),
        prop::collection::vec(message(), 1..4).prop_map(|ms| ms.concat()),
    ];
    fuzz("netlink", 512, input, |dgram| {
        let mut seen = 0u64;
        let bad = mptd::io::netlink::parse(&dgram, |_| seen += 1);
        // Every message takes at least its 16-byte header; a tail that is
        // no header counts once, as one bad message.
        prop_assert!(seen + bad <= dgram.len() as u64 / 16 + 1);
        // A route body alone (what the policy routing watcher reads).
        let _ = mptd::io::policy::parse_route(&dgram);
        if dgram.len() > 16 {
            let _ = mptd::io::policy::parse_route(&dgram[16..]);
        }
        Ok(())
    });
}

fn cmd_key() -> &'static CmdKey {
    static K: OnceLock<CmdKey> = OnceLock::new();
    K.get_or_init(|| CmdKey::derive(&Psk::from_bytes([7; 32]), "site-b").expect("key"))
}

#[test]
fn cmd_port_answer() {
    let field = prop_oneof![
        Just("version"),
        Just("connection"),
        Just("nonce"),
        Just("response"),
        Just("mac"),
        Just("ok"),
        Just("error"),
    ];
    let object = prop::collection::vec((field, "[ -~]{0,48}"), 0..6).prop_map(|f| {
        let m: serde_json::Map<String, serde_json::Value> = f
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.into()))
            .collect();
        serde_json::to_vec(&m).expect("json")
    });
    let input = prop_oneof![prop::collection::vec(any::<u8>(), 0..96), object];
    fuzz("cmd_port_answer", 512, input, |data| {
        // Only the plain refusal (`{"ok":false,...}`, no mac) is taken
        // without a signature; nothing random is signed.
        if let Ok(a) = mptd::ops::cmd_port::open_answer(cmd_key(), &data) {
            let v: serde_json::Value = serde_json::from_slice(&data).expect("it was JSON");
            prop_assert!(v.get("mac").is_none(), "a forged answer opened: {:?}", a);
        }
        Ok(())
    });
}
