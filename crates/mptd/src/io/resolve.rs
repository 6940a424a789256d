//! Host names to addresses, on a thread of their own.
//!
//! A lookup goes through the system resolver (`getaddrinfo`, by std's
//! `ToSocketAddrs`), so it honours `/etc/hosts`, nsswitch and the
//! configured DNS servers as every other program on the host does, and
//! `ip netns exec`'s per-namespace `/etc/netns/NAME/hosts`. It blocks for
//! as long as the DNS servers take (seconds when they do not answer):
//! neither the control loop nor a data-plane worker may wait for it. So
//! one small thread takes [`Lookup`]s from a channel, one at a time, and
//! sends each [`Answer`] back on another, waking the control loop as the
//! netlink listener does. What to look up and when, and what an answer
//! means for a path, is `crate::control::names`'s business.

use std::net::{IpAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::Duration;

/// How often the thread looks at the shutdown flag while idle.
const IDLE_WAKE: Duration = Duration::from_millis(200);

/// A name to look up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lookup {
    /// The host name.
    pub name: String,
}

/// The addresses of a name, or why there are none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The name looked up.
    pub name: String,
    /// Its addresses (A and AAAA, in the resolver's order, without
    /// repeats), or the resolver's error.
    pub result: Result<Vec<IpAddr>, String>,
}

/// Looks `name` up through the system resolver (blocks).
pub fn lookup(name: &str) -> Result<Vec<IpAddr>, String> {
    let found = (name, 0u16).to_socket_addrs().map_err(|e| e.to_string())?;
    let mut out: Vec<IpAddr> = Vec::new();
    for a in found {
        if !out.contains(&a.ip()) {
            out.push(a.ip());
        }
    }
    if out.is_empty() {
        return Err("no address".into());
    }
    Ok(out)
}

/// Serves `requests` until `stop` is set or the requesting side is gone:
/// each lookup's answer goes to `answers`, then `wake` is called.
pub fn run(
    requests: Receiver<Lookup>,
    answers: Sender<Answer>,
    wake: impl Fn(),
    stop: Arc<AtomicBool>,
) {
    serve(requests, answers, wake, stop, lookup)
}

/// [`run`] with the lookup given (tests answer without a resolver).
fn serve(
    requests: Receiver<Lookup>,
    answers: Sender<Answer>,
    wake: impl Fn(),
    stop: Arc<AtomicBool>,
    resolve: impl Fn(&str) -> Result<Vec<IpAddr>, String>,
) {
    while !stop.load(Relaxed) {
        let req = match requests.recv_timeout(IDLE_WAKE) {
            Ok(r) => r,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => return,
        };
        let result = resolve(&req.name);
        if answers
            .send(Answer {
                name: req.name,
                result,
            })
            .is_err()
        {
            return;
        }
        wake();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::mpsc::channel;

    #[test]
    fn every_request_gets_its_answer_and_a_wake() {
        let (req_tx, req_rx) = channel();
        let (ans_tx, ans_rx) = channel();
        let wakes = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let w = wakes.clone();
        let fake = |name: &str| match name {
            "hub.test" => Ok(vec!["192.0.2.7".parse().unwrap()]),
            _ => Err("no address".to_string()),
        };
        let t = std::thread::spawn(move || {
            serve(
                req_rx,
                ans_tx,
                move || {
                    w.fetch_add(1, Relaxed);
                },
                stop,
                fake,
            )
        });
        for name in ["hub.test", "nowhere.test"] {
            req_tx.send(Lookup { name: name.into() }).unwrap();
        }
        let a = ans_rx.recv_timeout(Duration::from_secs(5)).unwrap();
        let b = ans_rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(a.name, "hub.test");
        assert_eq!(a.result, Ok(vec!["192.0.2.7".parse().unwrap()]));
        assert_eq!(b.name, "nowhere.test");
        assert!(b.result.is_err());
        // The requesting side gone: the thread ends.
        drop(req_tx);
        t.join().unwrap();
        assert_eq!(wakes.load(Relaxed), 2);
    }

    #[test]
    fn localhost_resolves_through_the_system_resolver() {
        let addrs = lookup("localhost").expect("localhost");
        assert!(addrs.iter().all(|a| a.is_loopback()), "{addrs:?}");
        let ip = lookup("192.0.2.9").expect("a literal");
        assert_eq!(ip, vec!["192.0.2.9".parse::<IpAddr>().unwrap()]);
    }
}
