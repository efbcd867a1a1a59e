//! nflab-analyze (placeholder)
