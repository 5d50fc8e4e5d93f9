//! Xoff MMU (see module docs).
