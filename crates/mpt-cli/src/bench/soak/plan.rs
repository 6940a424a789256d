//! The fault schedule of `mpt bench soak`: which fault when, on which
//! client, held how long. Pure, so the order and spacing are unit-tested
//! without root.
//!
//! Faults come one at a time in a fixed cycle, one per slot of
//! `hold + gap` seconds (the gap is the time left for recovery and
//! settling): one fault's recovery is measured before the next starts, so
//! a recovery time belongs to one fault. The cycle puts the server
//! restart in the middle so that a 60-second run sees every kind once, and
//! a reload that removes a client is always followed by the one that adds
//! it back. The server restarts in the first cycle only (later cycles
//! leave its slot quiet): a concentrator process that lives for the rest
//! of the run is what shows whether its memory and descriptors stay flat.

use std::time::Duration;

use serde::Serialize;

/// What goes wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// Path 0 of every client goes silent (emulator outage), no link event.
    PathSilent,
    /// One client's mptd is killed and started again.
    ClientRestart,
    /// A client's file leaves the include folder, then a reload.
    ReloadRemove,
    /// The file comes back, then a reload.
    ReloadAdd,
    /// The concentrator is stopped and started again.
    ServerRestart,
    /// Path 1's link goes down on the client side and comes back up.
    LinkDown,
    /// Forged handshake initiations from a separate namespace.
    Flood,
}

/// The cycle, in order.
pub const CYCLE: [FaultKind; 7] = [
    FaultKind::PathSilent,
    FaultKind::ClientRestart,
    FaultKind::ReloadRemove,
    FaultKind::ReloadAdd,
    FaultKind::ServerRestart,
    FaultKind::LinkDown,
    FaultKind::Flood,
];

impl FaultKind {
    /// Whether the fault lasts `hold` (else it is one action).
    pub fn holds(self) -> bool {
        matches!(
            self,
            FaultKind::PathSilent | FaultKind::LinkDown | FaultKind::Flood
        )
    }

    /// Whether it is aimed at one client.
    pub fn has_client(self) -> bool {
        matches!(
            self,
            FaultKind::ClientRestart | FaultKind::ReloadRemove | FaultKind::ReloadAdd
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            FaultKind::PathSilent => "path_silent",
            FaultKind::ClientRestart => "client_restart",
            FaultKind::ReloadRemove => "reload_remove",
            FaultKind::ReloadAdd => "reload_add",
            FaultKind::ServerRestart => "server_restart",
            FaultKind::LinkDown => "link_down",
            FaultKind::Flood => "flood",
        }
    }
}

/// Quiet before the first fault: every client is up when the schedule
/// starts.
pub const LEAD: Duration = Duration::from_secs(3);

/// One planned fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// Its number, from 0.
    pub n: usize,
    pub kind: FaultKind,
    /// Planned start since the run's start (later if a recovery ran over).
    pub at: Duration,
    /// How long it lasts (zero for one action).
    pub hold: Duration,
    /// The client it is aimed at.
    pub client: Option<usize>,
}

/// The schedule for `duration`: one fault per `hold + gap`, the first
/// after [`LEAD`] of quiet (or `gap` if shorter); `clients` clients, of which the first
/// `senders` carry the background traffic and are never removed (but may
/// be restarted). Needs `clients > senders`.
pub fn plan(
    duration: Duration,
    clients: usize,
    senders: usize,
    hold: Duration,
    gap: Duration,
) -> Vec<Fault> {
    let slot = hold + gap;
    let mut faults = Vec::new();
    let mut at = gap.min(LEAD);
    let mut n = 0;
    while at + slot <= duration
        || faults.last().map(|f: &Fault| f.kind) == Some(FaultKind::ReloadRemove)
    {
        let kind = CYCLE[n % CYCLE.len()];
        let round = n / CYCLE.len();
        if kind == FaultKind::ServerRestart && round > 0 {
            // A quiet slot.
            at += slot;
            n += 1;
            continue;
        }
        let removable = clients.saturating_sub(senders).max(1);
        let client = match kind {
            // Spread over every client, senders included.
            FaultKind::ClientRestart => Some((round * 7 + 1) % clients),
            // From the top, never a sender.
            FaultKind::ReloadRemove | FaultKind::ReloadAdd => Some(clients - 1 - round % removable),
            _ => None,
        };
        faults.push(Fault {
            n,
            kind,
            at,
            hold: if kind.holds() { hold } else { Duration::ZERO },
            client,
        });
        at += slot;
        n += 1;
    }
    faults
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn a_quick_run_sees_every_kind_once() {
        let p = plan(S(60), 50, 4, S(3), S(5));
        let kinds: HashSet<FaultKind> = p.iter().map(|f| f.kind).collect();
        assert_eq!(kinds.len(), CYCLE.len(), "{p:?}");
        assert_eq!(p.len(), 7);
        assert!(p.last().unwrap().at + S(8) <= S(60));
    }

    #[test]
    fn faults_are_spaced_by_a_slot_and_holds_only_where_they_last() {
        let p = plan(S(600), 200, 4, S(5), S(10));
        assert_eq!(p[0].at, S(3));
        for w in p.windows(2) {
            let slots = (w[1].n - w[0].n) as u32;
            assert_eq!(w[1].at - w[0].at, S(15) * slots);
            assert!(slots == 1 || w[0].kind == FaultKind::ReloadAdd, "{w:?}");
        }
        for f in &p {
            assert_eq!(f.hold > Duration::ZERO, f.kind.holds());
            assert_eq!(f.client.is_some(), f.kind.has_client());
            assert!(f.client.is_none_or(|c| c < 200));
        }
        // 39 slots, the server restart in the first cycle only.
        assert_eq!(p.len(), 35);
        let restarts: Vec<usize> = p
            .iter()
            .filter(|f| f.kind == FaultKind::ServerRestart)
            .map(|f| f.n)
            .collect();
        assert_eq!(restarts, [4]);
    }

    #[test]
    fn every_removal_is_followed_by_adding_the_same_client_back() {
        for secs in 10..200 {
            let p = plan(S(secs), 6, 4, S(1), S(2));
            for (i, f) in p.iter().enumerate() {
                if f.kind == FaultKind::ReloadRemove {
                    let next = p.get(i + 1).expect("an add after every remove");
                    assert_eq!(next.kind, FaultKind::ReloadAdd);
                    assert_eq!(next.client, f.client);
                    assert!(f.client.unwrap() >= 4, "a sender removed: {f:?}");
                }
            }
        }
    }

    #[test]
    fn restarts_and_removals_rotate_over_clients() {
        let p = plan(S(3000), 10, 2, S(1), S(1));
        let restarted: HashSet<usize> = p
            .iter()
            .filter(|f| f.kind == FaultKind::ClientRestart)
            .filter_map(|f| f.client)
            .collect();
        assert_eq!(restarted.len(), 10);
        let removed: HashSet<usize> = p
            .iter()
            .filter(|f| f.kind == FaultKind::ReloadRemove)
            .filter_map(|f| f.client)
            .collect();
        assert_eq!(removed, (2..10).collect());
    }

    #[test]
    fn too_short_a_run_has_no_fault() {
        assert!(plan(S(5), 50, 4, S(3), S(5)).is_empty());
    }
}
