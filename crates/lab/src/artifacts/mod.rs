//! What a run or study leaves besides its records: JSON and files written whole, provenance (`env.json`, kernel counter snapshots) and the study's events.

pub mod env;
pub mod events;
pub mod files;
pub mod snapshot;
