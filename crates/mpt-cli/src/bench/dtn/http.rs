//! A minimal blocking HTTP/1.1 client for dtnd's local interface (`POST
//! /send`, `GET /endpoint`, `GET /status/peers`): one connection per
//! request (`Connection: close`), bodies by Content-Length, chunked or to
//! the end. The caller's thread must be in the agent's namespace; dtnd
//! answers only local clients. The response parser is pure and tested.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Upper bound of a response (a bundle of at most 2 MB plus framing).
const MAX_RESPONSE: usize = 8 << 20;

/// Sends one request to `addr` and returns (status, body).
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: &[u8],
    timeout: Duration,
) -> io::Result<(u16, Vec<u8>)> {
    let mut s = TcpStream::connect_timeout(&addr, timeout)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Content-Type: application/octet-stream\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes())?;
    s.write_all(body)?;
    let mut raw = Vec::new();
    s.take(MAX_RESPONSE as u64 + 1).read_to_end(&mut raw)?;
    if raw.len() > MAX_RESPONSE {
        return Err(io::Error::other("response too large"));
    }
    parse_response(&raw).map_err(io::Error::other)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Parses a whole HTTP/1.1 response into (status, body).
pub fn parse_response(raw: &[u8]) -> Result<(u16, Vec<u8>), String> {
    let end = find(raw, b"\r\n\r\n").ok_or("no end of headers")?;
    let head = std::str::from_utf8(&raw[..end]).map_err(|_| "headers not UTF-8")?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let mut parts = status_line.split(' ');
    let (Some(version), Some(code)) = (parts.next(), parts.next()) else {
        return Err(format!("bad status line {status_line:?}"));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(format!("bad status line {status_line:?}"));
    }
    let code: u16 = code
        .parse()
        .map_err(|_| format!("bad status code in {status_line:?}"))?;
    let (mut length, mut chunked) = (None, false);
    for l in lines {
        let Some((k, v)) = l.split_once(':') else {
            continue;
        };
        let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
        if k == "content-length" {
            length = Some(v.parse::<usize>().map_err(|_| "bad Content-Length")?);
        } else if k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked") {
            chunked = true;
        }
    }
    let body = &raw[end + 4..];
    if chunked {
        return dechunk(body).map(|b| (code, b));
    }
    match length {
        Some(n) if body.len() < n => Err(format!("body cut at {} of {n} bytes", body.len())),
        Some(n) => Ok((code, body[..n].to_vec())),
        None => Ok((code, body.to_vec())),
    }
}

fn dechunk(mut b: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let nl = find(b, b"\r\n").ok_or("chunk size line not ended")?;
        let size_s = std::str::from_utf8(&b[..nl]).map_err(|_| "chunk size not UTF-8")?;
        let size_s = size_s.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_s, 16).map_err(|_| "bad chunk size")?;
        b = &b[nl + 2..];
        if size == 0 {
            return Ok(out);
        }
        if b.len() < size + 2 {
            return Err("chunk cut".into());
        }
        out.extend_from_slice(&b[..size]);
        b = &b[size + 2..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_length_body() {
        let r = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello";
        assert_eq!(parse_response(r).unwrap(), (200, b"hello".to_vec()));
        let cut = b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nhello";
        assert!(parse_response(cut).is_err());
    }

    #[test]
    fn chunked_and_to_the_end() {
        let r = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n";
        assert_eq!(parse_response(r).unwrap(), (200, b"abcde".to_vec()));
        let r = b"HTTP/1.0 404 Not Found\r\n\r\nNo such endpoint";
        assert_eq!(
            parse_response(r).unwrap(),
            (404, b"No such endpoint".to_vec())
        );
    }

    #[test]
    fn garbage_is_an_error() {
        for bad in [&b"hello"[..], b"FTP 200\r\n\r\n", b"HTTP/1.1 abc\r\n\r\n"] {
            assert!(parse_response(bad).is_err());
        }
    }
}
