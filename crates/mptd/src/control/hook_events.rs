//! What the control loop tells the operator's hook (see
//! [`crate::io::hook`]): every path state change, and a connection
//! gaining its first or losing its last live path.
//!
//! A connection is *up* while at least one of its paths is alive (up,
//! suspect, or a backup, which carries traffic when nothing else can);
//! `connection-up` and `connection-down` fire on the edges only, so a
//! second path coming up or one of two going down is a `path-change`
//! alone. Events are queued and never wait (the hook runs on its own
//! thread).

use mpt_proto::path::PathState;
use mpt_proto::Session;

use crate::control::control_loop::ControlLoop;
use crate::io::hook::HookEvent;
use crate::plane::ConnShared;

/// Whether a path in `state` carries (or can carry) the connection.
fn alive(state: PathState) -> bool {
    matches!(
        state,
        PathState::Up | PathState::Suspect | PathState::Backup
    )
}

/// Whether any path of `session` is alive.
pub(super) fn connection_alive(session: &Session) -> bool {
    session.paths().any(|(_, p)| alive(p.state()))
}

impl ControlLoop {
    /// Tells the hook that `path` of connection `ci` went from `from` to
    /// `to`, and whether the connection came up or went down with it.
    pub(super) fn hook_path_change(
        &mut self,
        ci: usize,
        conn: &ConnShared,
        path: usize,
        from: PathState,
        to: PathState,
    ) {
        let Some(hooks) = &self.hooks else {
            return;
        };
        let table = conn.paths();
        let mut event = HookEvent::new("path-change")
            .with("MPT_CONN", &conn.name)
            .with("MPT_FROM", from.as_str())
            .with("MPT_STATE", to.as_str());
        if let Some(p) = table.get(path) {
            event = event.with("MPT_PATH", &p.name).with("MPT_LOCAL", p.local);
            if let Some((remote, _)) = p.remote() {
                event = event.with("MPT_REMOTE", remote);
            }
            if let Some(i) = &p.interface {
                event = event.with("MPT_INTERFACE", i);
            }
        }
        hooks.send(event);

        if self.conn_alive.len() <= ci {
            self.conn_alive.resize(ci + 1, false);
        }
        let now_alive = connection_alive(&self.sessions[ci]);
        if now_alive != self.conn_alive[ci] {
            self.conn_alive[ci] = now_alive;
            let name = if now_alive {
                "connection-up"
            } else {
                "connection-down"
            };
            let live = self.sessions[ci]
                .paths()
                .filter(|(_, p)| alive(p.state()))
                .count();
            hooks.send(
                HookEvent::new(name)
                    .with("MPT_CONN", &conn.name)
                    .with("MPT_PATHS_ALIVE", live),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alive_states() {
        assert!(alive(PathState::Up));
        assert!(alive(PathState::Suspect));
        assert!(alive(PathState::Backup));
        assert!(!alive(PathState::Down));
        assert!(!alive(PathState::Probing));
    }
}
