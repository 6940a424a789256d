//! [`Server::plan`] against real server configs in a temp folder, read by
//! mptd's parser.

use std::path::PathBuf;

use super::*;

struct Dir(PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A server config with `tunnel` lines and `clients` as (name, ipv4)
/// include files; keys made by the real writer.
fn server(tag: &str, tunnel: &str, include: bool, clients: &[(&str, &str)]) -> (Dir, Server) {
    let d = std::env::temp_dir().join(format!("mpt-cli-branch-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(d.join("clients.d")).unwrap();
    let secret = |seed: u8| mpt_proto::noise::StaticSecret::from_bytes([seed; 32]);
    mptd::keys::write_private(&d.join("server.key"), &secret(1), true).unwrap();
    let include = if include {
        "include = \"clients.d/*.toml\"\n"
    } else {
        ""
    };
    let text = format!(
        "[daemon]\nprivate_key_file = {:?}\n{include}[tunnel]\n{tunnel}\n",
        d.join("server.key").display().to_string()
    );
    std::fs::write(d.join("server.toml"), text).unwrap();
    for (i, (name, addr)) in clients.iter().enumerate() {
        let key = mptd::keys::encode_public(&secret(10 + i as u8).public_key());
        let text = format!(
            "[[connection]]\nname = {name:?}\npublic_key = {key:?}\npeer_ipv4 = {addr:?}\nnetworks = [\"192.168.{i}.0/24\"]\nport = 7000\n"
        );
        std::fs::write(d.join(format!("clients.d/{name}.toml")), text).unwrap();
    }
    let s = Server::load(&d.join("server.toml")).unwrap();
    (Dir(d), s)
}

fn request(name: &str) -> AddRequest {
    AddRequest {
        name: name.into(),
        endpoint: ("203.0.113.7".parse().unwrap(), None),
        uplinks: vec!["eth0".into()],
        networks: Vec::new(),
        routes: None,
        ipv4: None,
        ipv6: None,
        key_path: format!("/etc/mpt/{name}.key").into(),
    }
}

const KEY: &str = "AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI=";

#[test]
fn first_client_of_an_empty_server() {
    let (d, s) = server(
        "empty",
        "ipv4 = \"10.99.0.1/24\"\nipv6 = \"fd00:99::1/64\"",
        true,
        &[],
    );
    assert_eq!(s.shared_port(), DEFAULT_PORT);
    let plan = s.plan(&request("b1"), KEY).unwrap();
    assert_eq!(plan.file, d.0.join("clients.d/b1.toml"));
    assert_eq!(plan.entry.ipv4, Some("10.99.0.2".parse().unwrap()));
    assert_eq!(plan.entry.ipv6, Some("fd00:99::2".parse().unwrap()));
    assert_eq!(plan.branch.ipv4, Some("10.99.0.2/24".parse().unwrap()));
    assert_eq!(plan.branch.ipv6, Some("fd00:99::2/64".parse().unwrap()));
    let routes: Vec<String> = plan.branch.networks.iter().map(|p| p.to_string()).collect();
    assert_eq!(routes, ["10.99.0.0/24", "fd00:99::/64"]);
    assert_eq!(plan.branch.remote_port, DEFAULT_PORT);
    assert_eq!(
        plan.branch.private_key_file,
        PathBuf::from("/etc/mpt/b1.key")
    );
}

#[test]
fn addresses_fill_gaps_and_the_port_follows_the_clients() {
    let (_d, s) = server(
        "gaps",
        "ipv4 = \"10.99.0.1/24\"",
        true,
        &[("a", "10.99.0.2"), ("c", "10.99.0.4")],
    );
    assert_eq!(s.shared_port(), 7000);
    let mut req = request("b");
    req.endpoint.1 = Some(9000);
    let plan = s.plan(&req, KEY).unwrap();
    assert_eq!(plan.entry.ipv4, Some("10.99.0.3".parse().unwrap()));
    assert_eq!(plan.entry.ipv6, None);
    assert_eq!(plan.entry.port, 7000);
    assert_eq!(plan.branch.remote_port, 9000);
}

#[test]
fn refusals_say_why() {
    let (_d, s) = server(
        "refuse",
        "ipv4 = \"10.99.0.1/29\"",
        true,
        &[("a", "10.99.0.2"), ("c", "10.99.0.4")],
    );
    let e = |req: AddRequest| s.plan(&req, KEY).unwrap_err().0;
    assert!(
        e(request("a")).contains("name `a` is already in use"),
        "{}",
        e(request("a"))
    );
    assert!(e(request("../a")).contains("not a safe file name"));
    let mut req = request("b");
    req.ipv4 = Some("10.99.0.4".parse().unwrap());
    assert!(
        e(req.clone()).contains("10.99.0.4 is already in use by connection `c`"),
        "{}",
        e(req)
    );
    req.ipv4 = Some("10.99.0.1".parse().unwrap());
    assert!(e(req.clone()).contains("the server itself"));
    req.ipv4 = Some("10.99.1.9".parse().unwrap());
    assert!(e(req.clone()).contains("outside"));
    req.ipv4 = Some("10.99.0.5".parse().unwrap());
    assert_eq!(s.plan(&req, KEY).unwrap().entry.ipv4, req.ipv4);
    req.ipv6 = Some("fd00::5".parse().unwrap());
    assert!(e(req).contains("no ipv6 prefix"));
    let mut req = request("b");
    req.networks = vec!["192.168.1.128/25".parse().unwrap()];
    assert!(e(req.clone()).contains("connection `c`"), "{}", e(req));
    req.networks = vec!["10.99.0.0/16".parse().unwrap()];
    assert!(e(req).contains("tunnel prefix"));
    let mut req = request("b");
    req.uplinks.clear();
    assert!(e(req.clone()).contains("--uplink"));
    req.uplinks = vec!["eth0".into(), "eth0".into()];
    assert!(e(req.clone()).contains("twice"));
    req.uplinks = vec!["a/b".into()];
    assert!(e(req).contains("not an interface name"));
    // A file of that name not read (yet) by the server: refused too.
    std::fs::write(s.include_file("z").unwrap(), "# hand-made\n").unwrap();
    assert!(e(request("z")).contains("exists already"));
}

#[test]
fn a_full_prefix_is_refused() {
    // /30: hosts .1 and .2, both taken.
    let (_d, s) = server(
        "full",
        "ipv4 = \"10.99.0.1/30\"",
        true,
        &[("a", "10.99.0.2")],
    );
    let e = s.plan(&request("b"), KEY).unwrap_err().0;
    assert!(
        e.contains("no free address left in 10.99.0.1/30 (2 in use)"),
        "{e}"
    );
}

#[test]
fn a_server_without_include_or_key_is_explained() {
    let (_d, s) = server("noinc", "ipv4 = \"10.99.0.1/24\"", false, &[]);
    let e = s.plan(&request("b"), KEY).unwrap_err().0;
    assert!(
        e.contains("include = \\\"clients.d/*.toml\\\"")
            || e.contains("include = \"clients.d/*.toml\""),
        "{e}"
    );
    let mut s = s;
    s.config.daemon.include = "clients.d/*.toml".into();
    s.config.daemon.public_key = None;
    let e = s.plan(&request("b"), KEY).unwrap_err().0;
    assert!(e.contains("mpt keypair"), "{e}");
    s.config.daemon.include = "clients.d/client-?.toml".into();
    assert!(s.include_file("b").unwrap_err().0.contains("one `*`"));
}
