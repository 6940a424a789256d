//! The uplinks' routing in the status document, from what the control
//! loop last applied (`crate::plane::routing`).

use mpt_api::status::{PathRouting, Routing};

use crate::plane::routing::RoutingView;

/// The document's `routing` section.
pub(super) fn routing(v: &RoutingView) -> Routing {
    Routing {
        conflicts: Some(v.conflicts.clone()),
        full_tunnel_ipv4: Some(v.full_v4),
        full_tunnel_ipv6: Some(v.full_v6),
        ipv6_not_tunnelled: Some(v.ipv6_not_tunnelled),
        paths: Some(
            v.paths
                .iter()
                .map(|p| PathRouting {
                    conn: Some(p.conn.clone()),
                    gateway: Some(p.gateway.clone()),
                    mark: Some(p.mark),
                    path: Some(p.path.clone()),
                    table: Some(p.table.unwrap_or(crate::io::policy::TABLE_MAIN)),
                    uplink: Some(p.uplink.clone()),
                    other: Default::default(),
                })
                .collect(),
        ),
        routes: Some(v.routes as u64),
        rules: Some(v.rules as u64),
        warnings: Some(v.warnings.clone()),
        other: Default::default(),
    }
}
