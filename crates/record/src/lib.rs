//! nflab-record (placeholder)
