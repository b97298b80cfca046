//! STUB (agent helper).
