//! `mpt client add|list|remove`: a new branch in one command.
//!
//! On the concentrator, the server config (read by mptd's own parser,
//! never a second one) says everything a branch needs: the tunnel
//! prefixes and the addresses in use, the shared port, the server's key
//! pair, the cipher, and the folder its `[daemon] include` reads client
//! files from. [`Server::plan`] turns it and the command line into the
//! server's include file for the branch and the branch's whole config
//! (`render`); the binary writes them. The addresses come from `alloc`,
//! the argument checks from `check`.
//!
//! Nothing here writes a file: what is planned can be checked by tests
//! without a file system.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use mptd::config::{Config, ConfigError, Prefix};

pub mod alloc;
pub mod check;
pub mod render;

pub use render::{BranchConfig, ClientEntry, HUB_CONNECTION};

/// The shared port when the server has no client yet to take it from
/// (mptd's default `port`).
pub const DEFAULT_PORT: u16 = mptd::config::DEFAULT_SHARED_PORT;

/// Why a branch cannot be added as asked: always the operator's to fix
/// (exit code 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PlanError(pub String);

fn err<T>(msg: impl Into<String>) -> Result<T, PlanError> {
    Err(PlanError(msg.into()))
}

/// What `mpt client add` was asked for.
#[derive(Debug, Clone)]
pub struct AddRequest {
    /// The branch's name.
    pub name: String,
    /// The concentrator's address as the branch reaches it, and a port
    /// if it differs from the shared port (a NAT's forwarded port).
    pub endpoint: (IpAddr, Option<u16>),
    /// The branch's uplink interfaces: one path each.
    pub uplinks: Vec<String>,
    /// The branch's own networks (routed to it by the server).
    pub networks: Vec<Prefix>,
    /// What the branch routes into the tunnel; `None`: the server's
    /// tunnel prefixes.
    pub routes: Option<Vec<Prefix>>,
    /// Tunnel addresses asked for instead of the next free ones.
    pub ipv4: Option<IpAddr>,
    /// IPv6.
    pub ipv6: Option<IpAddr>,
    /// Where the branch will keep its private key.
    pub key_path: PathBuf,
}

/// What `mpt client add` writes and prints.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The server's include file for the branch.
    pub file: PathBuf,
    /// Its content.
    pub entry: ClientEntry,
    /// The branch's config.
    pub branch: BranchConfig,
}

/// A server config, read by mptd's parser.
#[derive(Debug, Clone)]
pub struct Server {
    /// The main file.
    pub file: PathBuf,
    /// What it (and the files it includes) says.
    pub config: Config,
}

impl Server {
    /// Reads the server config; one without any client yet is fine.
    pub fn load(file: &Path) -> Result<Server, ConfigError> {
        Ok(Server {
            file: file.to_path_buf(),
            config: mptd::config::load_without_peers(file)?,
        })
    }

    /// The server's client connections (no paths: served on the shared
    /// port).
    pub fn clients(&self) -> impl Iterator<Item = &mptd::config::ConnectionConfig> {
        self.config.connections.iter().filter(|c| c.is_client())
    }

    /// The include file a branch named `name` gets: the include
    /// pattern's file-name part with its one `*` replaced by the name.
    pub fn include_file(&self, name: &str) -> Result<PathBuf, PlanError> {
        let pattern = &self.config.daemon.include;
        if pattern.is_empty() {
            return err(format!(
                "{} has no [daemon] include, so a client file would not be read: add `include = \"clients.d/*.toml\"` to its [daemon] section, then run this again",
                self.file.display()
            ));
        }
        let base = self.file.parent().unwrap_or(Path::new(""));
        let full = base.join(pattern);
        let file_part = full.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if file_part.matches('*').count() != 1 || file_part.contains('?') {
            return err(format!(
                "[daemon] include = \"{pattern}\": `mpt client add` needs one `*` in the file name (e.g. \"clients.d/*.toml\") to name the new file"
            ));
        }
        Ok(full.with_file_name(file_part.replace('*', name)))
    }

    /// The server's public key, base64.
    pub fn public_key(&self) -> Result<String, PlanError> {
        match self.config.daemon.public_key {
            Some(k) => Ok(mptd::keys::encode_public(&k)),
            None => err(format!(
                "{} has no [daemon] private_key_file: a server's clients need its key pair (`mpt keypair /etc/mpt/private.key`, then private_key_file = \"/etc/mpt/private.key\" in [daemon])",
                self.file.display()
            )),
        }
    }

    /// The shared port: that of the server's clients (the first's), or
    /// mptd's default when it has none.
    pub fn shared_port(&self) -> u16 {
        self.clients().next().map_or(DEFAULT_PORT, |c| c.port)
    }

    /// Addresses taken in the tunnel: the server's and every peer's.
    fn used(&self) -> Vec<IpAddr> {
        let t = &self.config.tunnel;
        t.ipv4
            .iter()
            .chain(t.ipv6.iter())
            .map(|p| p.addr)
            .chain(
                self.config
                    .connections
                    .iter()
                    .flat_map(|c| c.peer_ipv4.into_iter().chain(c.peer_ipv6)),
            )
            .collect()
    }

    /// The connection that has `addr` as its peer address, if any.
    fn holder_of(&self, addr: IpAddr) -> Option<String> {
        let t = &self.config.tunnel;
        if t.ipv4.iter().chain(t.ipv6.iter()).any(|p| p.addr == addr) {
            return Some("the server itself ([tunnel])".into());
        }
        self.config
            .connections
            .iter()
            .find(|c| c.peer_ipv4 == Some(addr) || c.peer_ipv6 == Some(addr))
            .map(|c| format!("connection `{}`", c.name))
    }

    /// The branch's tunnel address in `prefix`: `asked`, checked, or the
    /// next free one.
    fn address(&self, prefix: &Prefix, asked: Option<IpAddr>) -> Result<IpAddr, PlanError> {
        let avoid: Vec<Prefix> = self
            .config
            .connections
            .iter()
            .flat_map(|c| c.networks.iter().copied())
            .collect();
        let Some(addr) = asked else {
            return alloc::next_free(prefix, &self.used(), &avoid)
                .map_err(|e| PlanError(e.to_string()));
        };
        if !prefix.contains(addr) {
            return err(format!(
                "address {addr} is outside the server's tunnel prefix {prefix}"
            ));
        }
        if let Some(who) = self.holder_of(addr) {
            return err(format!("address {addr} is already in use by {who}"));
        }
        if let Some(c) = self
            .config
            .connections
            .iter()
            .find(|c| c.networks.iter().any(|n| n.contains(addr)))
        {
            return err(format!(
                "address {addr} is inside the networks of connection `{}`",
                c.name
            ));
        }
        Ok(addr)
    }

    /// Checks the request against the server config and plans the files;
    /// `public_key` is the branch's (base64).
    pub fn plan(&self, req: &AddRequest, public_key: &str) -> Result<Plan, PlanError> {
        check::check_name(&req.name).map_err(PlanError)?;
        if let Some(c) = self.config.connections.iter().find(|c| c.name == req.name) {
            let place = self
                .config
                .includes
                .iter()
                .find(|f| f.connections.contains(&c.name))
                .map_or(self.file.clone(), |f| f.path.clone());
            return err(format!(
                "name `{}` is already in use: a connection of that name is in {}",
                req.name,
                place.display()
            ));
        }
        let file = self.include_file(&req.name)?;
        if file.exists() {
            return err(format!(
                "{} exists already: pick another name or remove it (`mpt client remove {}`)",
                file.display(),
                req.name
            ));
        }
        let server_key = self.public_key()?;
        if req.uplinks.is_empty() {
            return err(
                "give at least one --uplink IFACE: the branch's interface each path leaves by",
            );
        }
        for dev in &req.uplinks {
            if !mptd::config::is_interface_name(dev) {
                return err(format!("--uplink `{dev}` is not an interface name (1-15 characters, no '/', ':' or whitespace)"));
            }
        }
        if let Some(dup) = req
            .uplinks
            .iter()
            .enumerate()
            .find(|(i, d)| req.uplinks[..*i].contains(d))
        {
            return err(format!("--uplink {} is given twice", dup.1));
        }
        let t = &self.config.tunnel;
        if req.ipv4.is_some() && t.ipv4.is_none() {
            return err("--ipv4: the server's [tunnel] has no ipv4 prefix");
        }
        if req.ipv6.is_some() && t.ipv6.is_none() {
            return err("--ipv6: the server's [tunnel] has no ipv6 prefix");
        }
        let ipv4 = t.ipv4.map(|p| self.address(&p, req.ipv4)).transpose()?;
        let ipv6 = t.ipv6.map(|p| self.address(&p, req.ipv6)).transpose()?;
        for net in &req.networks {
            if let Some(p) = t
                .ipv4
                .iter()
                .chain(t.ipv6.iter())
                .find(|p| alloc::overlap(p, net))
            {
                return err(format!("--network {net} overlaps the tunnel prefix {p}"));
            }
            for c in &self.config.connections {
                if let Some(other) = c.networks.iter().find(|n| alloc::overlap(n, net)) {
                    return err(format!(
                        "--network {net} overlaps {other}, already routed to connection `{}`",
                        c.name
                    ));
                }
            }
        }
        let port = self.shared_port();
        let entry = ClientEntry {
            name: req.name.clone(),
            public_key: public_key.to_string(),
            ipv4,
            ipv6,
            networks: req.networks.clone(),
            port,
        };
        let with_len = |addr: Option<IpAddr>, p: Option<Prefix>| {
            addr.zip(p).map(|(addr, p)| Prefix { addr, len: p.len })
        };
        let routes = req.routes.clone().unwrap_or_else(|| {
            t.ipv4
                .iter()
                .chain(t.ipv6.iter())
                .map(alloc::network_of)
                .collect()
        });
        let branch = BranchConfig {
            name: req.name.clone(),
            private_key_file: req.key_path.clone(),
            cipher: self.config.daemon.cipher.name().to_string(),
            tun_name: t.name.clone(),
            mtu: t.mtu,
            ipv4: with_len(ipv4, t.ipv4),
            ipv6: with_len(ipv6, t.ipv6),
            server_key,
            server_ipv4: t.ipv4.map(|p| p.addr),
            server_ipv6: t.ipv6.map(|p| p.addr),
            networks: routes,
            remote: req.endpoint.0,
            remote_port: req.endpoint.1.unwrap_or(port),
            uplinks: req.uplinks.clone(),
        };
        Ok(Plan {
            file,
            entry,
            branch,
        })
    }
}

#[cfg(test)]
mod tests;
