//! nflab-wire (placeholder)
