//! Tests of the receive stages.
