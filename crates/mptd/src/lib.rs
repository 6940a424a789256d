//! mptd library
