//! What `mpt client add` checks of its arguments before touching a file:
//! the branch's name (it becomes a file name and a connection name) and
//! the endpoint the branch dials.

use std::net::{IpAddr, SocketAddr};

/// Longest branch name: it names a file and a connection in `mpt status`.
pub const MAX_NAME_LEN: usize = 32;

/// Checks that `name` can be a file name in the include folder and a
/// connection name: 1 to [`MAX_NAME_LEN`] ASCII letters, digits, `-`,
/// `_` or `.`, starting with a letter or digit (so never `.`, `..`, a
/// hidden file or an option).
pub fn check_name(name: &str) -> Result<(), String> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return Err(format!(
            "name `{name}` must be 1 to {MAX_NAME_LEN} characters long"
        ));
    }
    if !name.starts_with(|c: char| c.is_ascii_alphanumeric()) || !name.chars().all(ok_char) {
        return Err(format!(
            "name `{}` is not a safe file name: use ASCII letters, digits, '-', '_' and '.', starting with a letter or digit (e.g. branch-17)",
            name.escape_default()
        ));
    }
    Ok(())
}

/// `HOST[:PORT]` as `--endpoint` takes it: an IPv4 address, an IPv6
/// address (in brackets when a port follows), and an optional port.
pub fn parse_endpoint(s: &str) -> Result<(IpAddr, Option<u16>), String> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        if a.port() == 0 {
            return Err(format!("endpoint `{s}`: port 0 is not a usable port"));
        }
        return Ok((a.ip(), Some(a.port())));
    }
    let bare = s
        .strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .unwrap_or(s);
    bare.parse::<IpAddr>().map(|ip| (ip, None)).map_err(|_| {
        format!(
            "endpoint `{s}` is not IP[:PORT] (e.g. 203.0.113.7, 203.0.113.7:65022 or [2001:db8::7]:65022): a branch's `remote` is an address, host names are not supported yet"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for good in ["b1", "branch-17", "Site_A.lyon", "7", &"x".repeat(32)] {
            assert_eq!(check_name(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            ".",
            "..",
            ".hidden",
            "-rf",
            "a/b",
            "../etc",
            "a b",
            "é",
            "a\nb",
            "name*",
            &"x".repeat(33),
        ] {
            let e = check_name(bad).unwrap_err();
            assert!(e.contains("name"), "{bad:?}: {e}");
        }
        assert!(check_name("a\nb").unwrap_err().contains("a\\nb"));
    }

    #[test]
    fn endpoints() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(parse_endpoint("203.0.113.7"), Ok((ip("203.0.113.7"), None)));
        assert_eq!(
            parse_endpoint("203.0.113.7:7000"),
            Ok((ip("203.0.113.7"), Some(7000)))
        );
        assert_eq!(parse_endpoint("2001:db8::7"), Ok((ip("2001:db8::7"), None)));
        assert_eq!(
            parse_endpoint("[2001:db8::7]"),
            Ok((ip("2001:db8::7"), None))
        );
        assert_eq!(
            parse_endpoint("[2001:db8::7]:65022"),
            Ok((ip("2001:db8::7"), Some(65022)))
        );
        for bad in [
            "gw.example.net",
            "gw.example.net:65022",
            "1.2.3.4:0",
            "1.2.3.4:x",
            "",
        ] {
            assert!(parse_endpoint(bad).is_err(), "{bad}");
        }
        assert!(parse_endpoint("gw.example.net")
            .unwrap_err()
            .contains("host names"));
    }
}
