//! The two texts `mpt client add` writes: the server's include file for
//! the branch (`clients.d/NAME.toml`, one `[[connection]]` as README's
//! "One server, many clients" describes) and the branch's whole config.
//! Both are TOML for mptd's own parser; the tests here read them back
//! through it.

use std::fmt::Write as _;
use std::net::IpAddr;
use std::path::PathBuf;

use mptd::config::Prefix;

/// The name of the connection to the concentrator in a branch's config.
pub const HUB_CONNECTION: &str = "hub";

/// A TOML string (quoted and escaped).
fn q(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// A TOML array of prefixes.
fn prefixes(list: &[Prefix]) -> String {
    let items: Vec<String> = list.iter().map(|p| q(&p.to_string())).collect();
    format!("[{}]", items.join(", "))
}

/// The server's side of a branch: its include file.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientEntry {
    /// Connection name (and file name).
    pub name: String,
    /// The branch's public key, base64.
    pub public_key: String,
    /// The branch's tunnel addresses.
    pub ipv4: Option<IpAddr>,
    /// IPv6.
    pub ipv6: Option<IpAddr>,
    /// The branch's own networks, routed to it by the server.
    pub networks: Vec<Prefix>,
    /// The server's shared port.
    pub port: u16,
}

impl ClientEntry {
    /// `clients.d/NAME.toml`.
    pub fn render(&self) -> String {
        let mut s = format!(
            "# Branch {name}: written by `mpt client add {name}`; `mpt client remove {name}` deletes it.\n[[connection]]\nname = {}\npublic_key = {}\n",
            q(&self.name),
            q(&self.public_key),
            name = self.name
        );
        if let Some(a) = self.ipv4 {
            let _ = writeln!(s, "peer_ipv4 = {}", q(&a.to_string()));
        }
        if let Some(a) = self.ipv6 {
            let _ = writeln!(s, "peer_ipv6 = {}", q(&a.to_string()));
        }
        if !self.networks.is_empty() {
            let _ = writeln!(s, "networks = {}", prefixes(&self.networks));
        }
        let _ = writeln!(s, "port = {}", self.port);
        s
    }
}

/// The branch's config, as `mpt client add` prints it.
#[derive(Debug, Clone, PartialEq)]
pub struct BranchConfig {
    /// The branch's name (for the comment).
    pub name: String,
    /// Where the branch keeps its private key.
    pub private_key_file: PathBuf,
    /// The data cipher (the server's).
    pub cipher: String,
    /// Tunnel interface name and MTU (the server's).
    pub tun_name: String,
    /// MTU.
    pub mtu: u16,
    /// The branch's tunnel addresses, with the server's prefix lengths.
    pub ipv4: Option<Prefix>,
    /// IPv6.
    pub ipv6: Option<Prefix>,
    /// The server's public key, base64.
    pub server_key: String,
    /// The server's tunnel addresses.
    pub server_ipv4: Option<IpAddr>,
    /// IPv6.
    pub server_ipv6: Option<IpAddr>,
    /// What the branch routes into the tunnel.
    pub networks: Vec<Prefix>,
    /// The concentrator's address and port.
    pub remote: IpAddr,
    /// Port.
    pub remote_port: u16,
    /// One path per uplink interface.
    pub uplinks: Vec<String>,
}

impl BranchConfig {
    /// The whole config file.
    pub fn render(&self) -> String {
        let mut s = format!(
            "# mptd config of branch {name}, written by `mpt client add {name}` on the concentrator.\n\
             # Install as /etc/mpt/mptd.toml and the key file as {key} (mode 0600), then start mptd.\n\n\
             [daemon]\nprivate_key_file = {}\ncipher = {}\n\n[tunnel]\nname = {}\nmtu = {}\n",
            q(&self.private_key_file.display().to_string()),
            q(&self.cipher),
            q(&self.tun_name),
            self.mtu,
            name = self.name,
            key = self.private_key_file.display(),
        );
        if let Some(p) = self.ipv4 {
            let _ = writeln!(s, "ipv4 = {}", q(&p.to_string()));
        }
        if let Some(p) = self.ipv6 {
            let _ = writeln!(s, "ipv6 = {}", q(&p.to_string()));
        }
        let _ = write!(
            s,
            "\n[[connection]]\nname = {}\npublic_key = {}\n",
            q(HUB_CONNECTION),
            q(&self.server_key)
        );
        if let Some(a) = self.server_ipv4 {
            let _ = writeln!(s, "peer_ipv4 = {}", q(&a.to_string()));
        }
        if let Some(a) = self.server_ipv6 {
            let _ = writeln!(s, "peer_ipv6 = {}", q(&a.to_string()));
        }
        if !self.networks.is_empty() {
            let _ = writeln!(s, "networks = {}", prefixes(&self.networks));
        }
        let _ = writeln!(s, "remote_port = {}", self.remote_port);
        for (i, dev) in self.uplinks.iter().enumerate() {
            let path = if mpt_proto::wire::is_plain_name(dev) {
                dev.clone()
            } else {
                format!("p{i}")
            };
            let _ = write!(
                s,
                "\n[[connection.path]]\nname = {}\ninterface = {}\nremote = {}\n",
                q(&path),
                q(dev),
                q(&self.remote.to_string())
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn p(s: &str) -> Prefix {
        s.parse().unwrap()
    }

    fn tempdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("mpt-cli-render-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// A key pair written by the real writer; its public key.
    fn key(file: &Path, seed: u8) -> String {
        let secret = mpt_proto::noise::StaticSecret::from_bytes([seed; 32]);
        mptd::keys::write_private(file, &secret, true).unwrap();
        mptd::keys::encode_public(&secret.public_key())
    }

    #[test]
    fn client_file_round_trips_through_the_server_parser() {
        let d = tempdir("client");
        let server_key = key(&d.join("server.key"), 1);
        let branch_key = key(&d.join("b1.key"), 2);
        let _ = server_key;
        std::fs::create_dir(d.join("clients.d")).unwrap();
        let entry = ClientEntry {
            name: "b1".into(),
            public_key: branch_key.clone(),
            ipv4: Some("10.99.0.2".parse().unwrap()),
            ipv6: Some("fd00:99::2".parse().unwrap()),
            networks: vec![p("192.168.10.0/24"), p("fd10::/64")],
            port: 7000,
        };
        std::fs::write(d.join("clients.d/b1.toml"), entry.render()).unwrap();
        let server = format!(
            "[daemon]\nprivate_key_file = {:?}\ninclude = \"clients.d/*.toml\"\n[tunnel]\nipv4 = \"10.99.0.1/24\"\nipv6 = \"fd00:99::1/64\"\n",
            d.join("server.key").display().to_string()
        );
        std::fs::write(d.join("server.toml"), server).unwrap();
        let c = mptd::config::load(&d.join("server.toml")).unwrap();
        assert_eq!(c.connections.len(), 1);
        let b1 = &c.connections[0];
        assert!(b1.is_client());
        assert_eq!(b1.name, "b1");
        assert_eq!(b1.peer_ipv4, entry.ipv4);
        assert_eq!(b1.peer_ipv6, entry.ipv6);
        assert_eq!(b1.networks, entry.networks);
        assert_eq!(b1.port, 7000);
        assert_eq!(
            b1.public_key.map(|k| mptd::keys::encode_public(&k)),
            Some(branch_key)
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn branch_config_round_trips_through_the_parser() {
        let d = tempdir("branch");
        let server_key = key(&d.join("server.key"), 1);
        let branch_file = d.join("b1 \"quoted\".key");
        key(&branch_file, 2);
        let b = BranchConfig {
            name: "b1".into(),
            private_key_file: branch_file.clone(),
            cipher: "chacha20-poly1305".into(),
            tun_name: "mpt0".into(),
            mtu: 1380,
            ipv4: Some(p("10.99.0.2/24")),
            ipv6: Some(p("fd00:99::2/64")),
            server_key: server_key.clone(),
            server_ipv4: Some("10.99.0.1".parse().unwrap()),
            server_ipv6: Some("fd00:99::1".parse().unwrap()),
            networks: vec![p("10.99.0.0/24"), p("fd00:99::/64")],
            remote: "203.0.113.7".parse().unwrap(),
            remote_port: 7000,
            uplinks: vec!["eth0".into(), "wwan0".into()],
        };
        let text = b.render();
        let c = mptd::config::parse(&text, "branch.toml").unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(
            c.daemon.private_key_file.as_deref(),
            Some(branch_file.as_path())
        );
        assert_eq!(c.daemon.cipher.name(), "chacha20-poly1305");
        assert_eq!(
            (c.tunnel.mtu, c.tunnel.ipv4, c.tunnel.ipv6),
            (1380, b.ipv4, b.ipv6)
        );
        let hub = &c.connections[0];
        assert_eq!(hub.name, HUB_CONNECTION);
        assert_eq!(
            hub.public_key.map(|k| mptd::keys::encode_public(&k)),
            Some(server_key)
        );
        assert_eq!(
            (hub.peer_ipv4, hub.peer_ipv6),
            (b.server_ipv4, b.server_ipv6)
        );
        assert_eq!(hub.networks, b.networks);
        assert_eq!(hub.remote_port, 7000);
        assert_eq!(hub.paths.len(), 2);
        for (path, dev) in hub.paths.iter().zip(["eth0", "wwan0"]) {
            assert_eq!(path.name, dev);
            assert_eq!(path.interface.as_deref(), Some(dev));
            assert_eq!(path.local, None);
            assert_eq!(path.remote, Some(b.remote));
        }
        std::fs::remove_dir_all(&d).unwrap();
    }
}
