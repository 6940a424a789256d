//! Exit codes, and the error that carries one: 0 ok, 1 runtime failure,
//! 2 usage or configuration error (130, interrupted, is `mpt bench`'s
//! own).

/// A runtime failure: the daemon, the network, the machine.
pub(crate) const EXIT_RUNTIME: u8 = 1;
/// A usage or configuration error: the command line or a file given.
pub(crate) const EXIT_USAGE: u8 = 2;

/// An error with the exit code it maps to.
#[derive(Debug)]
pub(crate) struct Failure {
    /// The exit code.
    pub(crate) code: u8,
    /// What is printed.
    pub(crate) err: anyhow::Error,
}

/// A usage error.
pub(crate) fn usage(err: impl Into<anyhow::Error>) -> Failure {
    Failure {
        code: EXIT_USAGE,
        err: err.into(),
    }
}

/// A runtime failure.
pub(crate) fn runtime(err: impl Into<anyhow::Error>) -> Failure {
    Failure {
        code: EXIT_RUNTIME,
        err: err.into(),
    }
}
