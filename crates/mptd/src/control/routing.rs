//! Applying the routing plan (`crate::control::routing_plan`) to the
//! kernel, following its changes, and taking everything out again.
//!
//! [`Routing::apply`] computes the plan from the current [`NetTable`] and
//! installs the difference from what is installed: new rules and routes
//! first (a changed gateway replaces the default route of mptd's own
//! table in one step, so an uplink is never without one), then the ones
//! no longer planned are deleted. It runs at start, before any thread,
//! and then from the control loop whenever a link, address or route
//! event came in (`crate::control::links::Links::poll`): a DHCP renewal
//! with a new gateway, a new WiFi network, an interface that appears.
//! Our own changes come back as events too; the plan they give is the
//! same, so nothing happens.
//!
//! What is installed is kept in [`Installed`], shared with the daemon's
//! guard, which removes it all on every way out (a stop by signal, a
//! fatal error, an error at start after the first rule). What a `kill -9`
//! leaves is found at the next start by its protocol number and the
//! configured tables and priorities (`crate::io::policy::remove_leftovers`):
//! no state file to lose or go stale.
//!
//! A route mptd did not create is never replaced or deleted: `networks`
//! routes go into the main table with "create, exclusive", the uplinks'
//! and the tunnel's into mptd's own tables only.

use std::sync::{Arc, Mutex};

use crate::config::Config;
use crate::control::net_table::NetTable;
use crate::control::routing_plan::{self, Plan};
use crate::io::policy::{self, RouteSpec, RuleSpec, TABLE_MAIN};
use crate::io::routes::RouteError;
use crate::plane::routing::{RoutingView, SharedRouting};
use crate::sync::lock_unpoisoned;

/// What mptd has installed, in the order it was installed.
#[derive(Debug, Default)]
pub struct Installed {
    rules: Vec<RuleSpec>,
    routes: Vec<RouteSpec>,
}

impl Installed {
    /// Removes every rule (first: traffic stops being steered) and route
    /// installed. Failures are logged; the rest is still removed.
    pub fn remove_all(&mut self) {
        let (rules, routes) = (self.rules.len(), self.routes.len());
        for r in self.rules.drain(..).rev() {
            if let Err(e) = policy::del_rule(&r) {
                tracing::error!(rule = %r, error = %e, "cannot remove a rule mptd added");
            }
        }
        for r in self.routes.drain(..).rev() {
            if let Err(e) = policy::del_route(&r) {
                tracing::error!(route = %r, error = %e, "cannot remove a route mptd added");
            }
        }
        if rules + routes > 0 {
            tracing::info!(rules, routes, "policy routing removed");
        }
    }
}

/// Removes what is installed when dropped: the daemon holds one from the
/// first rule on, so every return from `run` (and the unwinding of a
/// panic) cleans up.
pub struct CleanupGuard(pub Arc<Mutex<Installed>>);

impl Drop for CleanupGuard {
    fn drop(&mut self) {
        lock_unpoisoned(&self.0).remove_all();
    }
}

/// Follows the kernel and keeps the plan installed.
pub struct Routing {
    config: Config,
    tun: u32,
    installed: Arc<Mutex<Installed>>,
    view: SharedRouting,
    /// Warnings and conflicts already logged (each is logged when it
    /// appears, not at every event).
    logged: Vec<String>,
}

impl Routing {
    /// Routing for `config` through tun interface `tun`, recording what it
    /// installs in `installed` and publishing to `view`.
    pub fn new(
        config: Config,
        tun: u32,
        installed: Arc<Mutex<Installed>>,
        view: SharedRouting,
    ) -> Routing {
        Routing {
            config,
            tun,
            installed,
            view,
            logged: Vec::new(),
        }
    }

    /// The prefixes whose routes the [`NetTable`] must keep for the plan.
    pub fn watched(&self) -> Vec<(std::net::IpAddr, u8)> {
        routing_plan::watched(&self.config)
    }

    /// Computes the plan for `kernel` and installs the difference. An
    /// error leaves what was installed so far recorded (and so removed at
    /// exit).
    pub fn apply(&mut self, kernel: &NetTable) -> Result<Plan, RouteError> {
        let plan = routing_plan::plan(&self.config, Some(self.tun), kernel);
        let mut installed = lock_unpoisoned(&self.installed);
        let mut result = Ok(());
        for r in &plan.rules {
            if !installed.rules.contains(r) {
                if let Err(e) = policy::add_rule(r) {
                    tracing::error!(rule = %r, error = %e, "cannot add a routing rule");
                    result = Err(e);
                    continue;
                }
                tracing::debug!(rule = %r, "rule added");
                installed.rules.push(r.clone());
            }
        }
        for r in plan.routes.iter().chain(&plan.main_routes) {
            if installed.routes.contains(r) {
                continue;
            }
            // Only in mptd's own tables may a route with the same key be
            // replaced; in the main table an existing one is not ours.
            let own_table = r.table != TABLE_MAIN;
            match policy::add_route(r, own_table) {
                Ok(()) => {
                    tracing::debug!(route = %r, "route added");
                    installed.routes.push(r.clone());
                }
                Err(RouteError::Refused { errno, .. }) if errno == libc::EEXIST => {
                    tracing::error!(route = %r, "a route to this prefix that mptd did not create is in the main table: left alone, the prefix is not routed into the tunnel");
                }
                Err(e) => {
                    // E.g. an uplink whose link went down meanwhile: the
                    // next event applies the plan again.
                    tracing::warn!(route = %r, error = %e, "cannot add a route; retried at the next change");
                }
            }
        }
        // What is no longer planned. A replaced default route of an own
        // table is gone already: its deletion (by gateway) finds nothing.
        let stale_routes: Vec<RouteSpec> = installed
            .routes
            .iter()
            .filter(|r| !plan.routes.contains(r) && !plan.main_routes.contains(r))
            .cloned()
            .collect();
        for r in &stale_routes {
            let replaced = plan.routes.iter().any(|n| {
                (n.table, n.dst, n.len) == (r.table, r.dst, r.len) && r.table != TABLE_MAIN
            });
            if !replaced {
                if let Err(e) = policy::del_route(r) {
                    tracing::warn!(route = %r, error = %e, "cannot remove a route no longer planned");
                }
            }
            installed.routes.retain(|o| o != r);
        }
        let stale_rules: Vec<RuleSpec> = installed
            .rules
            .iter()
            .filter(|r| !plan.rules.contains(r))
            .cloned()
            .collect();
        for r in &stale_rules {
            if let Err(e) = policy::del_rule(r) {
                tracing::warn!(rule = %r, error = %e, "cannot remove a rule no longer planned");
            }
            installed.rules.retain(|o| o != r);
        }
        let (rules, routes) = (installed.rules.len(), installed.routes.len());
        drop(installed);
        self.log(&plan);
        *crate::sync::write_unpoisoned(&self.view) = RoutingView {
            paths: plan.paths.clone(),
            warnings: plan.warnings.clone(),
            conflicts: plan.conflicts.clone(),
            full_v4: plan.full_v4,
            full_v6: plan.full_v6,
            ipv6_not_tunnelled: plan.ipv6_not_tunnelled,
            rules,
            routes,
        };
        result.map(|()| plan)
    }

    /// Logs the plan's warnings and conflicts that are new, and where each
    /// path leaves when that changed.
    fn log(&mut self, plan: &Plan) {
        let mut now = Vec::new();
        for w in &plan.warnings {
            if !self.logged.contains(w) {
                tracing::warn!("{w}");
            }
            now.push(w.clone());
        }
        for c in &plan.conflicts {
            if !self.logged.contains(c) {
                tracing::error!("{c}");
            }
            now.push(c.clone());
        }
        for p in &plan.paths {
            let line = format!(
                "path {}/{} leaves by {} gateway {}",
                p.conn,
                p.path,
                p.uplink.as_deref().unwrap_or("?"),
                p.gateway
            );
            if !self.logged.contains(&line) {
                tracing::info!(conn = %p.conn, path = %p.path, uplink = p.uplink.as_deref().unwrap_or("?"), gateway = %p.gateway, mark = p.mark, table = p.table.unwrap_or(TABLE_MAIN), "path routing");
            }
            now.push(line);
        }
        self.logged = now;
    }
}
