//! nflab-dataplane (placeholder)
