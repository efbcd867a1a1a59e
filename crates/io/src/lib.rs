//! nflab-io (placeholder)
