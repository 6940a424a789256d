//! Which flows are accelerated: destination prefixes, each with an
//! optional list of ports, as written in `accelerate = [...]`.
//!
//! The text form is `PREFIX` or `PREFIX:PORT,PORT,...`, where `PREFIX`
//! is `ADDRESS/LEN` (IPv4 or IPv6; the length is required, so an IPv6
//! address's colons are never taken for the port separator):
//! `"0.0.0.0/0"`, `"10.9.0.0/16:80,443"`, `"2001:db8::/32:443"`.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

/// One `accelerate` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    /// Network address (host bits cleared).
    pub addr: IpAddr,
    /// Prefix length.
    pub len: u8,
    /// Destination ports; empty: every port.
    pub ports: Vec<u16>,
}

/// Why an `accelerate` entry does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// No `/LEN`.
    #[error("`{0}`: expected ADDRESS/LEN[:PORT,...] (the prefix length is required)")]
    NoLength(String),
    /// The address part is not an IP address.
    #[error("`{0}`: not an IP address")]
    BadAddress(String),
    /// The length is not a number or too long for the family.
    #[error("`{0}`: bad prefix length (0-32 for IPv4, 0-128 for IPv6)")]
    BadLength(String),
    /// A port is not 1-65535.
    #[error("`{0}`: bad port (1-65535)")]
    BadPort(String),
}

impl FromStr for Selector {
    type Err = SelectorError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (addr, rest) = s
            .trim()
            .split_once('/')
            .ok_or_else(|| SelectorError::NoLength(s.into()))?;
        let (len, ports) = match rest.split_once(':') {
            Some((l, p)) => (l, Some(p)),
            None => (rest, None),
        };
        let addr: IpAddr = addr
            .parse()
            .map_err(|_| SelectorError::BadAddress(addr.into()))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len: u8 = len
            .parse()
            .ok()
            .filter(|l| *l <= max)
            .ok_or_else(|| SelectorError::BadLength(s.into()))?;
        let ports = match ports {
            None => Vec::new(),
            Some(p) => p
                .split(',')
                .map(|x| x.trim().parse::<u16>().ok().filter(|p| *p != 0))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| SelectorError::BadPort(s.into()))?,
        };
        Ok(Selector {
            addr: mask(addr, len),
            len,
            ports,
        })
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)?;
        if !self.ports.is_empty() {
            let p: Vec<String> = self.ports.iter().map(|p| p.to_string()).collect();
            write!(f, ":{}", p.join(","))?;
        }
        Ok(())
    }
}

impl Selector {
    /// Whether a flow to `dst` is selected.
    pub fn matches(&self, dst: SocketAddr) -> bool {
        let ip = match dst.ip() {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
            v4 => v4,
        };
        ip.is_ipv4() == self.addr.is_ipv4()
            && mask(ip, self.len) == self.addr
            && (self.ports.is_empty() || self.ports.contains(&dst.port()))
    }
}

fn mask(ip: IpAddr, len: u8) -> IpAddr {
    match ip {
        IpAddr::V4(a) => {
            let m = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            IpAddr::V4((u32::from(a) & m).into())
        }
        IpAddr::V6(a) => {
            let m = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
            IpAddr::V6((u128::from(a) & m).into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_matches() {
        let all: Selector = "0.0.0.0/0".parse().unwrap();
        assert!(all.matches("1.2.3.4:5".parse().unwrap()));
        assert!(!all.matches("[2001:db8::1]:5".parse().unwrap()));
        let web: Selector = "10.9.1.7/16:80,443".parse().unwrap();
        assert_eq!(web.to_string(), "10.9.0.0/16:80,443");
        assert!(web.matches("10.9.200.1:443".parse().unwrap()));
        assert!(!web.matches("10.9.200.1:22".parse().unwrap()));
        assert!(!web.matches("10.8.0.1:80".parse().unwrap()));
        let v6: Selector = "2001:db8::/32:443".parse().unwrap();
        assert!(v6.matches("[2001:db8:5::1]:443".parse().unwrap()));
        assert!(!v6.matches("[2001:db9::1]:443".parse().unwrap()));
        let any6: Selector = "::/0".parse().unwrap();
        assert!(any6.matches("[fd00::1]:1".parse().unwrap()));
    }

    #[test]
    fn refuses_bad_entries() {
        for (s, want) in [
            ("10.0.0.0", "prefix length is required"),
            ("10.0.0/8", "not an IP address"),
            ("10.0.0.0/33", "bad prefix length"),
            ("::/129", "bad prefix length"),
            ("10.0.0.0/8:0", "bad port"),
            ("10.0.0.0/8:80,x", "bad port"),
            ("10.0.0.0/8:", "bad port"),
        ] {
            let e = s.parse::<Selector>().unwrap_err().to_string();
            assert!(e.contains(want), "{s}: {e}");
        }
    }
}
