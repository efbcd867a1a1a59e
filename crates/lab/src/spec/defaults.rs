//! Defaults of the spec's keys, for serde's `default = "…"`.

pub(crate) fn one() -> u32 {
    1
}
pub(crate) fn one_u64() -> u64 {
    1
}
pub(crate) fn default_frame_bytes() -> u64 {
    64
}
pub(crate) fn default_duration_s() -> f64 {
    5.0
}
pub(crate) fn default_warmup_s() -> f64 {
    1.0
}
pub(crate) fn default_drain_ms() -> u64 {
    200
}
pub(crate) fn default_anomalies() -> Vec<String> {
    vec!["2:250us".into(), "2:750us".into()]
}
