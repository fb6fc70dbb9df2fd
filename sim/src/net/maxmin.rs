//! Max-min fair bandwidth sharing.
