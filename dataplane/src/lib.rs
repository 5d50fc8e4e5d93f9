//! Xoff data plane.
