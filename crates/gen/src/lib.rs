//! nflab-gen (placeholder)
