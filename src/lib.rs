//! devipc (placeholder while the facade is written).
