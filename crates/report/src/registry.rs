//! Every figure of the report, in the order the report shows them: the one list a
//! new figure registers in. Each figure function returns `None` where its figure
//! does not apply.

use crate::figures::{anomaly, gen, latency, model, stages, sweep, timeseries, Ctx, Figure};
use crate::load::Experiment;

/// Every figure that applies to `e`.
pub fn all(e: &Experiment) -> Vec<Figure> {
    let ctx = Ctx::new(e);
    let mut out = Vec::new();
    out.extend(latency::hdr(&ctx));
    out.extend(latency::cdf(&ctx, false));
    out.extend(latency::cdf(&ctx, true));
    out.extend(latency::histogram(&ctx));
    out.extend(timeseries::over_time(&ctx));
    out.extend(timeseries::windows(&ctx));
    out.extend(anomaly::timeline(&ctx));
    out.extend(sweep::sweep(&ctx));
    out.extend(sweep::throughput(&ctx));
    out.extend(model::overlay(&ctx));
    out.extend(gen::selfcheck(&ctx));
    out.extend(crate::prrt::figures(e));
    out.extend(stages::stacked(&ctx));
    out.extend(crate::ncs::figures(e));
    out.extend(crate::komon::figures(e));
    out
}
