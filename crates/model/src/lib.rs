//! nflab-model (placeholder)
