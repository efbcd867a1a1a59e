//! nflab-lab (placeholder)
