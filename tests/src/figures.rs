//! The benchmarks' arithmetic: quantiles of samples, durations in ms.

use std::time::Duration;

/// The sample at quantile `q` (0 to 1) of samples sorted in order.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * q).round() as usize]
}

/// The median and the 99th percentile.
pub fn median_and_p99(mut samples: Vec<f64>) -> (f64, f64) {
    samples.sort_by(|a, b| a.total_cmp(b));
    (quantile(&samples, 0.5), quantile(&samples, 0.99))
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The median and the 95th percentile.
pub fn median_and_p95(mut samples: Vec<f64>) -> (f64, f64) {
    samples.sort_by(|a, b| a.total_cmp(b));
    (quantile(&samples, 0.5), quantile(&samples, 0.95))
}
