use std::fs::File;
use std::os::fd::AsRawFd;
use std::process::Command;

use netlink_packet_core::{NetlinkPayload, NLMSG_DONE, NLM_F_DUMP};

use super::*;

#[test]
fn refusals_say_what_went_wrong() {
    let missing = RouteError::Refused {
        action: "delete",
        errno: libc::ESRCH,
        message: None,
    };
    assert_eq!(
        missing.to_string(),
        "the kernel refused to delete the route: No such process (no such route)"
    );
    let down = RouteError::Refused {
        action: "replace",
        errno: libc::ENETDOWN,
        message: Some("Nexthop device is not up".into()),
    };
    assert_eq!(
        down.to_string(),
        "the kernel refused to replace the route: Network is down (the interface is down): \
         Nexthop device is not up"
    );
}

#[test]
fn kernel_message_is_read_from_the_extended_ack() {
    // Capped: the echoed header (16 bytes), then NLMSGERR_ATTR_MSG.
    let mut echoed = vec![0u8; 16];
    let text = b"Nexthop device is not up\0";
    echoed.extend_from_slice(&((4 + text.len()) as u16).to_ne_bytes());
    echoed.extend_from_slice(&1u16.to_ne_bytes());
    echoed.extend_from_slice(text);
    echoed.resize(echoed.len().next_multiple_of(4), 0);
    let flags = NLM_F_CAPPED | NLM_F_ACK_TLVS;
    assert_eq!(
        kernel_message(flags, &echoed).as_deref(),
        Some("Nexthop device is not up")
    );
    assert_eq!(kernel_message(NLM_F_CAPPED, &echoed), None);
    assert_eq!(kernel_message(flags, &echoed[..8]), None);
}

#[test]
fn unknown_interface_is_named() {
    let net: Prefix = "10.99.0.0/24".parse().unwrap();
    let err = add_route(&net, "mptd-no-such0").unwrap_err();
    assert!(matches!(err, RouteError::NoInterface(ref d) if d == "mptd-no-such0"));
    assert_eq!(err.to_string(), "no interface named `mptd-no-such0`");
}

/// A network namespace of our own, removed on every way out of the test.
struct Netns {
    name: String,
}

impl Netns {
    fn add() -> Netns {
        let name = format!("mptd-routes-{}", std::process::id());
        ip(&["netns", "add", &name]);
        Netns { name }
    }

    /// `ip -n NAME ARGS...`
    fn ip(&self, args: &[&str]) {
        let mut all = vec!["-n", &self.name];
        all.extend_from_slice(args);
        ip(&all);
    }

    /// Runs `f` on a thread that has entered the namespace (sockets it
    /// opens live there); the test's own thread stays where it was.
    fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        let path = format!("/run/netns/{}", self.name);
        std::thread::scope(|s| {
            s.spawn(|| {
                let ns = File::open(&path).expect("opening the namespace");
                // SAFETY: setns only reads the descriptor, which is open
                // for the call; it changes this thread's namespace alone.
                let rc = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
                assert_eq!(rc, 0, "setns: {}", io::Error::last_os_error());
                f()
            })
            .join()
            .expect("the namespace thread panicked")
        })
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("running ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The main table's routes through interface `index`, read back with a
/// route dump.
fn routes_through(index: u32) -> Vec<Prefix> {
    let socket = Socket::new(NETLINK_ROUTE).unwrap();
    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST | NLM_F_DUMP;
    header.sequence_number = 7;
    let dump = RouteNetlinkMessage::GetRoute(RouteMessage::default());
    let mut m = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(dump));
    m.finalize();
    let mut buf = vec![0; m.buffer_len()];
    m.serialize(&mut buf);
    socket.send(&buf, 0).unwrap();
    let mut found = Vec::new();
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        let n = socket.recv(&mut &mut buf[..], 0).unwrap();
        let mut datagram = &buf[..n];
        while !datagram.is_empty() {
            let answer = NetlinkBuffer::new_checked(&datagram).unwrap();
            if answer.message_type() == NLMSG_DONE {
                return found;
            }
            let len = answer.length() as usize;
            let msg = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&datagram[..len]);
            if let Ok(NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewRoute(r))) =
                msg.map(|m| m.payload)
            {
                let through = r.attributes.contains(&RouteAttribute::Oif(index));
                let dst = r.attributes.iter().find_map(|a| match a {
                    RouteAttribute::Destination(RouteAddress::Inet(a)) => Some(IpAddr::V4(*a)),
                    RouteAttribute::Destination(RouteAddress::Inet6(a)) => Some(IpAddr::V6(*a)),
                    _ => None,
                });
                if let (true, RouteHeader::RT_TABLE_MAIN, Some(addr)) =
                    (through, r.header.table, dst)
                {
                    found.push(Prefix {
                        addr,
                        len: r.header.destination_prefix_length,
                    });
                }
            }
            datagram = datagram.get(len.next_multiple_of(4)..).unwrap_or(&[]);
        }
    }
}

/// Sets and removes routes through a tun device (what the daemon routes
/// through; it also needs no driver beyond the one the daemon does, where
/// a dummy link would) in a namespace of the test's own, and reads them
/// back from the kernel. Needs root (as the
/// daemon does; CI runs as root): skipped otherwise.
#[test]
fn routes_are_replaced_and_deleted_in_a_namespace() {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: creating a network namespace needs root");
        return;
    }
    let ns = Netns::add();
    ns.ip(&["tuntap", "add", "dev", "mptd0", "mode", "tun"]);
    let v4: Prefix = "10.99.0.0/24".parse().unwrap();
    let v6: Prefix = "fd99:1::/64".parse().unwrap();
    ns.run(|| {
        let index = interface_index("mptd0").unwrap();

        // A down link takes no IPv4 route, and the kernel says why.
        match add_route(&v4, "mptd0") {
            Err(RouteError::Refused {
                errno: libc::ENETDOWN,
                ..
            }) => {}
            other => panic!("route through a down link: {other:?}"),
        }

        ns.ip(&["link", "set", "mptd0", "up"]);
        for net in [&v4, &v6] {
            add_route(net, "mptd0").unwrap();
            // Replace: the same route again is no error.
            add_route(net, "mptd0").unwrap();
        }
        let mut set = routes_through(index);
        set.retain(|p| *p == v4 || *p == v6);
        set.sort_by_key(|p| p.addr.is_ipv6());
        assert_eq!(set, vec![v4, v6]);

        // A peer's tunnel address with the legs' initial windows.
        let (peer4, peer6): (IpAddr, IpAddr) =
            ("10.99.0.2".parse().unwrap(), "fd99:1::2".parse().unwrap());
        for peer in [peer4, peer6] {
            add_leg_route(peer, "mptd0", 48).unwrap();
            // A route that is there already is left alone, and said so.
            match add_leg_route(peer, "mptd0", 20) {
                Err(RouteError::Refused {
                    errno: libc::EEXIST,
                    ..
                }) => {}
                other => panic!("a second leg route to {peer}: {other:?}"),
            }
        }
        let shown = |family: &str, dst: &str| {
            let out = Command::new("ip")
                .args(["-n", &ns.name, family, "route", "show", dst, "dev", "mptd0"])
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        for (family, dst) in [("-4", "10.99.0.2/32"), ("-6", "fd99:1::2/128")] {
            let route = shown(family, dst);
            assert!(
                route.contains("initcwnd 48") && route.contains("initrwnd 48"),
                "{dst}: {route}"
            );
        }

        for net in [&v4, &v6] {
            del_route(net, "mptd0").unwrap();
        }
        assert!(
            !routes_through(index).iter().any(|p| *p == v4 || *p == v6),
            "routes left after delete"
        );
        // Deleting a route that is not there is an error (callers log it).
        match del_route(&v4, "mptd0") {
            Err(RouteError::Refused {
                errno: libc::ESRCH, ..
            }) => {}
            other => panic!("deleting a missing route: {other:?}"),
        }
    });
}
