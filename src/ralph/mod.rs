//! The ralph loop.
