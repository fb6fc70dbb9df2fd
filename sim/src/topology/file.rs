//! Topology files (TOML) → [`super::Topology`].
