//! The congestion control of direct legs when it is `"auto"` (the
//! default): CUBIC on a clean path, BBR on a path that loses packets at
//! random. Legs inside the tunnel run BBR under `"auto"`
//! ([`inside_tunnel`]).
//!
//! Neither is right everywhere. BBR (v1, as in these kernels) paces at
//! its bandwidth estimate and takes no notice of random loss, which a
//! radio path with 1 % loss needs; but on a clean path it gives up about
//! 2 % of the rate (ProbeRTT: 200 ms at 4 packets every 10 s, and a
//! cycle that paces at 0.75 of its estimate), so BBR legs stayed at
//! 0.99-1.00 of kernel MPTCP where MPTCP's subflows run CUBIC and fill
//! both paths. CUBIC keeps a drop-tail queue full and reaches 0.99 of a
//! clean path's rate, but halves at every loss: over a path with 1 %
//! random loss it carries a fifth of the rate.
//!
//! So a leg starts with CUBIC, and its sender looks at the kernel's
//! counters (`TCP_INFO`: data segments sent, segments retransmitted)
//! every 1 MiB the set sends, judging them in windows of [`WINDOW_SEGS`]
//! segments. When [`LOSSY_WINDOWS`] windows in a row lost more than
//! [`LOSSY_PER_MILLE`] of their segments, the path is lossy: the leg
//! changes to BBR at once (the kernel takes a new congestion control on
//! a live connection) and every later leg on that path, at either end
//! of this daemon, starts with BBR, for the daemon's life.
//!
//! CUBIC's own losses at a full queue are a few segments per cycle,
//! below the threshold (on clean LTE up to 5 of 1200). Slow start's
//! overshoot is not: a fresh leg, and a leg that sends again after
//! idling (the kernel restarts slow start after an idle retransmission
//! timeout), loses a burst when slow start ends, and repairing it spills
//! into the next window. Measured on clean WiFi + LTE at every start
//! (2026-11-28): LTE's window with the burst lost 69-170 segments and
//! the next one 0-5 (the threshold is 5.1 per 1000); WiFi sent two or
//! three windows without a loss, then lost 10-14 (sometimes after a
//! window with 1-3) and 0-4; once, a restart after an idle minute crossed
//! the threshold twice and turned a clean WiFi leg to BBR. So after a
//! start, or after the leg or its set idled for [`IDLE_RESTART_MS`],
//! windows are not judged until one is lossy (the burst), nor the one
//! after it. On a lossy path the first window is lossy already: 1 % loss
//! on WiFi is found in its third and fourth windows, about 4 s into a
//! flow.

use std::collections::HashSet;
use std::net::{IpAddr, TcpStream};
use std::sync::{Arc, Mutex};

use crate::sock;

/// The congestion control name that asks for this choice.
pub const AUTO: &str = "auto";
/// An auto leg's congestion control on a clean path.
pub const CLEAN: &str = "cubic";
/// ... and on a lossy one.
pub const LOSSY: &str = "bbr";
/// Segments per window of a leg's counters (about 1.4 MB).
pub const WINDOW_SEGS: u32 = 1000;
/// Retransmitted segments per thousand sent above which a window is
/// lossy (0.5 %).
pub const LOSSY_PER_MILLE: u32 = 5;
/// Lossy windows in a row that make the path lossy.
pub const LOSSY_WINDOWS: u8 = 2;
/// A leg that sent nothing for this long restarts (the least
/// retransmission timeout, after which Linux restarts slow start).
pub const IDLE_RESTART_MS: u32 = 200;

/// A path of a peer: its tunnel address and the path's id.
pub type PathKey = (IpAddr, u8);

/// The paths found lossy so far (shared by both ends of a daemon).
#[derive(Debug, Default)]
pub struct LossyPaths(Mutex<HashSet<PathKey>>);

impl LossyPaths {
    /// The congestion control a leg on `key` starts with, given the
    /// configured `cc` (`""` when the configured one is the system's).
    pub fn resolve<'a>(&self, cc: &'a str, key: PathKey) -> &'a str {
        if cc != AUTO {
            cc
        } else if self.is_lossy(key) {
            LOSSY
        } else {
            CLEAN
        }
    }

    /// Whether the path was found lossy.
    pub fn is_lossy(&self, key: PathKey) -> bool {
        crate::lock(&self.0).contains(&key)
    }

    fn mark(&self, key: PathKey) {
        crate::lock(&self.0).insert(key);
    }
}

/// Where a leg is after its (re)start: slow start ends with a burst of
/// losses, whose repair spills into the next window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Grace {
    /// No window has been lossy yet: not judged.
    UntilBurst,
    /// The last window was lossy (the burst): the next is not judged.
    OneMore,
    /// Windows are judged.
    Over,
}

/// The verdict on a leg's counters, window by window.
#[derive(Debug)]
struct Windows {
    /// Data segments sent and segments retransmitted at the start of the
    /// current window (`None`: not read yet).
    base: Option<(u32, u32)>,
    /// Lossy windows in a row so far.
    lossy_in_a_row: u8,
    /// Whether windows are judged yet (slow start's overshoot passes).
    grace: Grace,
    /// The window completed at the last look, if one was: segments,
    /// lost, whether it was judged (for the trace).
    completed: Option<(u32, u32, bool)>,
}

impl Default for Windows {
    fn default() -> Windows {
        Windows {
            base: None,
            lossy_in_a_row: 0,
            grace: Grace::UntilBurst,
            completed: None,
        }
    }
}

impl Windows {
    /// Takes the leg's counters now; whether [`LOSSY_WINDOWS`] whole
    /// windows in a row have been lossy.
    fn observe(&mut self, segs_total: u32, lost_total: u32) -> bool {
        let Some((segs0, lost0)) = self.base else {
            self.base = Some((segs_total, lost_total));
            return false;
        };
        let segs = segs_total.wrapping_sub(segs0);
        if segs < WINDOW_SEGS {
            return false;
        }
        self.base = Some((segs_total, lost_total));
        let lost = lost_total.wrapping_sub(lost0);
        self.completed = Some((segs, lost, self.grace == Grace::Over));
        match self.grace {
            Grace::UntilBurst if window_is_lossy(segs, lost) => self.grace = Grace::OneMore,
            Grace::UntilBurst => {}
            Grace::OneMore => self.grace = Grace::Over,
            Grace::Over => {}
        }
        if self.completed.is_some_and(|(_, _, judged)| !judged) {
            return false;
        }
        if window_is_lossy(segs, lost) {
            self.lossy_in_a_row = self.lossy_in_a_row.saturating_add(1);
        } else {
            self.lossy_in_a_row = 0;
        }
        self.lossy_in_a_row >= LOSSY_WINDOWS
    }

    /// The leg starts again (after idling): judging starts over, after
    /// slow start's burst.
    fn restart(&mut self) {
        *self = Windows::default();
    }
}

/// Watches one auto leg's losses, from its sender.
pub struct Watch {
    key: PathKey,
    paths: Arc<LossyPaths>,
    windows: Windows,
    /// It runs BBR now: nothing more to watch.
    done: bool,
}

impl Watch {
    /// A watch over a leg on `key` that runs `cc` now (a leg that already
    /// runs the lossy choice needs none).
    pub fn new(key: PathKey, paths: Arc<LossyPaths>, cc: &str) -> Option<Watch> {
        (cc == CLEAN).then_some(Watch {
            key,
            paths,
            windows: Windows::default(),
            done: false,
        })
    }

    /// Looks at `leg`'s counters; changes it to BBR once its path is
    /// lossy (found by this leg or by another).
    pub fn check(&mut self, leg: &TcpStream) {
        if self.done {
            return;
        }
        let Ok(info) = sock::tcp_info(leg) else {
            return;
        };
        // Idle now (the set sends on other legs): it restarts when next
        // picked.
        let found_here = if info.last_data_sent_ms >= IDLE_RESTART_MS {
            self.windows.restart();
            false
        } else {
            self.windows.observe(info.data_segs_out, info.total_retrans)
        };
        if let Some((segs, lost, judged)) = self.windows.completed.take() {
            tracing::trace!(peer = %self.key.0, path = self.key.1, segs, lost, judged,
                "acceleration leg's loss window");
        }
        if !found_here && !self.paths.is_lossy(self.key) {
            return;
        }
        self.done = true;
        self.paths.mark(self.key);
        let changed = socket2::SockRef::from(leg).set_tcp_congestion(LOSSY.as_bytes());
        tracing::info!(peer = %self.key.0, path = self.key.1, found_here,
            changed = changed.is_ok(), "acceleration legs on a lossy path: BBR from now on");
    }

    /// The leg's set sends again after idling for [`IDLE_RESTART_MS`] or
    /// more (or the set was just taken from the pool).
    pub fn restart(&mut self) {
        self.windows.restart();
    }
}

/// The congestion control of a leg inside the tunnel, single or pinned:
/// `"auto"` is BBR there, as before there was a choice. The tunnel's loss
/// repair hides a path's random loss from such a leg (it sees late
/// packets, not lost ones), so its counters cannot tell a lossy path,
/// and a CUBIC leg over the repaired path measured 44.8 Mbit/s where BBR
/// carried 61.7 (lossy WiFi + LTE, pinned, 2026-11-28).
pub fn inside_tunnel(cc: &str) -> &str {
    if cc == AUTO {
        LOSSY
    } else {
        cc
    }
}

/// Whether `lost` of `segs` is above [`LOSSY_PER_MILLE`].
pub fn window_is_lossy(segs: u32, lost: u32) -> bool {
    u64::from(lost) * 1000 > u64::from(segs) * u64::from(LOSSY_PER_MILLE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_resolves_by_what_the_path_showed() {
        let paths = LossyPaths::default();
        let key: PathKey = ("10.0.0.1".parse().unwrap(), 1);
        assert_eq!(paths.resolve("bbr", key), "bbr");
        assert_eq!(paths.resolve("", key), "");
        assert_eq!(paths.resolve(AUTO, key), CLEAN);
        paths.mark(key);
        assert_eq!(paths.resolve(AUTO, key), LOSSY);
        assert_eq!(paths.resolve(AUTO, (key.0, 2)), CLEAN);
        assert_eq!(paths.resolve("cubic", key), "cubic");
    }

    #[test]
    fn the_threshold_is_half_a_percent() {
        assert!(!window_is_lossy(2000, 10));
        assert!(window_is_lossy(2000, 11));
        assert!(window_is_lossy(2000, 20));
        assert!(!window_is_lossy(2000, 0));
        assert!(!window_is_lossy(u32::MAX, 1000));
    }

    /// Counters a leg shows window by window, after its start.
    struct Leg {
        w: Windows,
        segs: u32,
        lost: u32,
    }

    impl Leg {
        fn new(segs: u32, lost: u32) -> Leg {
            let mut w = Windows::default();
            assert!(!w.observe(segs, lost), "the first look only sets the base");
            let mut leg = Leg { w, segs, lost };
            // Slow start: clean windows, then the burst far above the
            // rate, repaired in the next window: none judged.
            assert!(!leg.window(0));
            assert!(!leg.window(0));
            assert!(!leg.window(70));
            assert!(!leg.window(30));
            assert_eq!(leg.w.grace, Grace::Over);
            leg
        }

        /// [`Leg::window`] for each of `lost`.
        fn windows(&mut self, lost: &[u32]) -> Vec<bool> {
            lost.iter().map(|&l| self.window(l)).collect()
        }

        /// Idle, then sending again: the next look sets the base anew.
        fn restart(&mut self) {
            self.w.restart();
            assert!(!self.w.observe(self.segs, self.lost));
        }

        /// One window that lost `lost` segments, in two looks; the
        /// verdict at its end.
        fn window(&mut self, lost: u32) -> bool {
            self.segs = self.segs.wrapping_add(WINDOW_SEGS / 2);
            self.lost = self.lost.wrapping_add(lost / 2);
            assert!(
                !self.w.observe(self.segs, self.lost),
                "a verdict mid-window"
            );
            self.segs = self.segs.wrapping_add(WINDOW_SEGS - WINDOW_SEGS / 2);
            self.lost = self.lost.wrapping_add(lost - lost / 2);
            self.w.observe(self.segs, self.lost)
        }
    }

    #[test]
    fn two_lossy_windows_in_a_row_make_a_path_lossy() {
        let mut leg = Leg::new(100, 50);
        assert!(!leg.window(12));
        assert!(leg.window(12));
        // Lossy, clean, lossy: no.
        let mut leg = Leg::new(100, 50);
        assert!(!leg.window(12));
        assert!(!leg.window(1));
        assert!(!leg.window(6));
        assert!(leg.window(6));
        // At the threshold (0.5 %), never.
        let mut leg = Leg::new(100, 50);
        for _ in 0..5 {
            assert!(!leg.window(5));
        }
        // Windows shorter than WINDOW_SEGS are not judged.
        let mut w = Windows {
            grace: Grace::Over,
            ..Windows::default()
        };
        assert!(!w.observe(0, 0));
        assert!(!w.observe(WINDOW_SEGS - 1, 100));
        assert!(!w.observe(WINDOW_SEGS, 100));
        assert!(!w.observe(2 * WINDOW_SEGS - 1, 200));
        assert!(w.observe(2 * WINDOW_SEGS, 200));
    }

    #[test]
    fn a_restart_burst_is_forgiven_and_random_loss_is_found_after_it() {
        let mut leg = Leg::new(5000, 7);
        assert!(!leg.window(0));
        // Idle, then slow start again: its overshoot and repair pass,
        // even when the burst starts late in a window.
        leg.restart();
        let (f, t) = (false, true);
        assert_eq!(leg.windows(&[0, 2, 13, 3]), [f, f, f, f]);
        // A few losses before the burst do not end slow start's grace.
        leg.restart();
        assert_eq!(leg.windows(&[1, 3, 12, 6, 3]), [f, f, f, f, f]);
        // ... random loss after them is found as usual.
        assert_eq!(leg.windows(&[12, 12]), [f, t]);
        // A restart also forgets a lossy window before it; on a lossy
        // path the first window loses: two unjudged ones.
        let mut leg = Leg::new(0, 0);
        assert!(!leg.window(12));
        leg.restart();
        assert_eq!(leg.windows(&[12, 12, 12, 12]), [f, f, f, t]);
    }

    #[test]
    fn the_counters_may_wrap() {
        let mut leg = Leg::new(u32::MAX - 5000, u32::MAX - 50);
        assert!(!leg.window(12));
        assert!(leg.window(12));
        assert!(leg.segs < WINDOW_SEGS * 2 && leg.lost < 100);
    }

    #[test]
    fn a_watch_is_only_for_legs_on_the_clean_choice() {
        let paths = Arc::new(LossyPaths::default());
        let key: PathKey = ("10.0.0.1".parse().unwrap(), 0);
        assert!(Watch::new(key, paths.clone(), CLEAN).is_some());
        assert!(Watch::new(key, paths.clone(), LOSSY).is_none());
        assert!(Watch::new(key, paths, "reno").is_none());
    }

    /// A live loopback leg that sent nothing for longer than
    /// IDLE_RESTART_MS starts its windows over at the next look; one that
    /// just sent does not.
    #[test]
    fn an_idle_leg_starts_its_windows_over() {
        use std::io::Write;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut leg = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let _far = l.accept().unwrap();
        let paths = Arc::new(LossyPaths::default());
        let key: PathKey = ("10.0.0.1".parse().unwrap(), 4);
        let mut w = Watch::new(key, paths, CLEAN).unwrap();
        let judging = |w: &mut Watch| {
            w.windows.grace = Grace::Over;
            w.windows.lossy_in_a_row = 1;
        };
        leg.write_all(&[1u8; 1000]).unwrap();
        judging(&mut w);
        w.check(&leg);
        assert_eq!(
            (w.windows.grace, w.windows.lossy_in_a_row),
            (Grace::Over, 1)
        );
        assert!(w.windows.base.is_some());
        std::thread::sleep(std::time::Duration::from_millis(
            u64::from(IDLE_RESTART_MS) + 50,
        ));
        w.check(&leg);
        assert_eq!(w.windows.grace, Grace::UntilBurst, "idle: a restart");
        assert_eq!((w.windows.lossy_in_a_row, w.windows.base), (0, None));
        // The set's own restart does the same.
        leg.write_all(&[1u8; 1000]).unwrap();
        judging(&mut w);
        w.restart();
        assert_eq!(w.windows.grace, Grace::UntilBurst);
    }

    /// A live loopback leg: a watch on a path another leg found lossy
    /// changes it to BBR at its next look, whatever its own counters say.
    #[test]
    fn a_leg_follows_its_path_once_found_lossy() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let leg = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let _far = l.accept().unwrap();
        socket2::SockRef::from(&leg)
            .set_tcp_congestion(CLEAN.as_bytes())
            .unwrap();
        let paths = Arc::new(LossyPaths::default());
        let key: PathKey = ("10.0.0.1".parse().unwrap(), 3);
        let mut w = Watch::new(key, paths.clone(), CLEAN).unwrap();
        w.check(&leg);
        w.check(&leg);
        assert!(!w.done, "a clean, idle leg stays as it is");
        paths.mark(key);
        w.check(&leg);
        assert!(w.done);
        let now = socket2::SockRef::from(&leg).tcp_congestion().unwrap();
        let name = String::from_utf8_lossy(&now);
        let name = name.trim_end_matches('\0');
        // BBR where the kernel has it, else unchanged.
        let available =
            std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
                .unwrap_or_default();
        let want = if available.split_whitespace().any(|c| c == LOSSY) {
            LOSSY
        } else {
            CLEAN
        };
        assert_eq!(name, want);
    }
}
