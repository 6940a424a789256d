//! A path's `remote`: an IP address, as always, or a host name that the
//! daemon resolves at start and again while it runs
//! (`crate::control::names`). An IP literal is taken exactly as before;
//! anything else must be a plausible DNS name, so a mistyped address
//! ("10.0.0.300") is still an error at its position rather than a name
//! that never resolves.

use std::net::IpAddr;

use serde::de::{self, Deserializer};
use serde::Deserialize;

/// Longest host name (RFC 1035, without the final dot).
pub const MAX_HOST_NAME: usize = 253;

/// A `remote` value as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum RawRemote {
    /// An IP literal.
    Addr(IpAddr),
    /// A host name, resolved at run time.
    Name(String),
}

/// Whether `name` can be a DNS host name: 1 to 253 characters in labels
/// of 1 to 63 letters, digits and hyphens (an underscore is accepted, as
/// resolvers do), no label starting or ending with a hyphen, and a last
/// label that is not all digits (that would be a broken IPv4 address). A
/// final dot is allowed.
pub fn is_host_name(name: &str) -> bool {
    let name = name.strip_suffix('.').unwrap_or(name);
    if name.is_empty() || name.len() > MAX_HOST_NAME {
        return false;
    }
    let labels_ok = name.split('.').all(|l| {
        (1..=63).contains(&l.len())
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    });
    let last_numeric = name
        .rsplit('.')
        .next()
        .is_some_and(|l| l.bytes().all(|b| b.is_ascii_digit()));
    labels_ok && !last_numeric
}

/// Reads `s` as a `remote`: an IP literal first, else a host name.
pub(super) fn parse_remote(s: &str) -> Result<RawRemote, String> {
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Ok(RawRemote::Addr(ip));
    }
    if is_host_name(s) {
        return Ok(RawRemote::Name(s.to_ascii_lowercase()));
    }
    Err(format!(
        "`{s}` is neither an IP address nor a host name (e.g. remote = \"192.0.2.7\" or remote = \"hub.example.net\")"
    ))
}

impl<'de> Deserialize<'de> for RawRemote {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        parse_remote(&s).map_err(de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ip_literals_stay_addresses_and_names_are_checked() {
        assert_eq!(
            parse_remote("10.0.0.2"),
            Ok(RawRemote::Addr("10.0.0.2".parse().unwrap()))
        );
        assert_eq!(
            parse_remote("fd00::2"),
            Ok(RawRemote::Addr("fd00::2".parse().unwrap()))
        );
        assert_eq!(
            parse_remote("Hub.Example.net"),
            Ok(RawRemote::Name("hub.example.net".into()))
        );
        assert_eq!(parse_remote("hub"), Ok(RawRemote::Name("hub".into())));
        assert_eq!(
            parse_remote("hub.example.net."),
            Ok(RawRemote::Name("hub.example.net.".into()))
        );
        for bad in [
            "",
            "10.0.0.300",
            "1.2.3",
            "hub..example",
            "-hub.example",
            "hub-.example",
            "hub example",
            "hub/x",
            "[fd00::1]",
            "10.0.0.2:65022",
            &"a".repeat(64),
            &format!("{}.net", "a.".repeat(130)),
        ] {
            assert!(parse_remote(bad).is_err(), "{bad:?} accepted");
        }
    }
}
