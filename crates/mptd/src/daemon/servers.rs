//! The operator's side of the daemon: the control socket, the metrics
//! listener and the remote command port, all reading one
//! [`StatusSource`] and sending changes to the control loop.

use std::net::SocketAddr;
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context, Result};

use super::workers::spawn;
use crate::config::Config;
use crate::ops::cmd_port::CmdPort;
use crate::ops::control_socket::{self, StatusSource};

/// The running servers, stopped after the workers.
pub(super) struct Servers {
    control: JoinHandle<()>,
    control_path: PathBuf,
    metrics: Option<(JoinHandle<()>, SocketAddr)>,
    cmd_port: Option<CmdPort>,
}

impl Servers {
    /// Starts the metrics listener (when configured), the remote command
    /// port (`[daemon] cmd_port`, 0 = off) and the control socket server
    /// on `listener`.
    pub fn start(
        config: &Config,
        listener: UnixListener,
        source: StatusSource,
        shutdown: &Arc<AtomicBool>,
    ) -> Result<Servers> {
        let metrics = match config.daemon.metrics.as_str() {
            "" => None,
            addr => {
                let listener = std::net::TcpListener::bind(addr)
                    .with_context(|| format!("metrics listener on {addr}"))?;
                let local = listener.local_addr().context("metrics listener address")?;
                let src = source.clone();
                let stop = shutdown.clone();
                let handle = spawn("metrics".into(), move || {
                    crate::ops::metrics::serve(listener, src, stop)
                })?;
                tracing::info!(metrics = %local, "serving Prometheus metrics");
                Some((handle, local))
            }
        };
        let cmd_port = crate::ops::cmd_port::start(config, source.clone(), shutdown.clone())
            .with_context(|| format!("remote command port {}", config.daemon.cmd_port))?;
        let control_path = config.daemon.control.clone();
        let serve_shutdown = shutdown.clone();
        let serve_path = control_path.clone();
        let control = spawn("control-socket".into(), move || {
            control_socket::serve(listener, source, serve_shutdown, serve_path)
        })?;
        Ok(Servers {
            control,
            control_path,
            metrics,
            cmd_port,
        })
    }

    /// The control socket's path.
    pub fn control_path(&self) -> &std::path::Path {
        &self.control_path
    }

    /// Wakes the blocking accepts (the shutdown flag is already set).
    pub fn wake(&self) {
        let _ = std::os::unix::net::UnixStream::connect(&self.control_path);
    }

    /// Waits for every server to end.
    pub fn join(self) {
        let _ = self.control.join();
        if let Some((handle, addr)) = self.metrics {
            let _ = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1));
            let _ = handle.join();
        }
        if let Some(server) = self.cmd_port {
            server.join();
        }
    }
}
