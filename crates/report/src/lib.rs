//! nflab-report (placeholder)
