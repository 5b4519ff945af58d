//! Speed to first contact: per source, how long from a lead's arrival until the provider accepted its first
//! contact, and until the message was delivered (p50 and p95). Pure over the store's times.

use serde::Serialize;

use crate::store::ContactTimes;

/// One source's figures; `None` where no message has got that far.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
pub struct ContactSpeed {
    pub source: String,
    /// Messages accepted.
    pub accepted: usize,
    pub accepted_p50_ms: Option<i64>,
    pub accepted_p95_ms: Option<i64>,
    /// Messages with a delivery receipt.
    pub delivered: usize,
    pub delivered_p50_ms: Option<i64>,
    pub delivered_p95_ms: Option<i64>,
}

/// The `q` quantile (0–1) of `values` by the nearest-rank method; `None` for none.
pub fn quantile(values: &[i64], q: f64) -> Option<i64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

pub fn figures(times: &[ContactTimes]) -> Vec<ContactSpeed> {
    times
        .iter()
        .map(|t| ContactSpeed {
            source: t.source.clone(),
            accepted: t.accepted_ms.len(),
            accepted_p50_ms: quantile(&t.accepted_ms, 0.5),
            accepted_p95_ms: quantile(&t.accepted_ms, 0.95),
            delivered: t.delivered_ms.len(),
            delivered_p50_ms: quantile(&t.delivered_ms, 0.5),
            delivered_p95_ms: quantile(&t.delivered_ms, 0.95),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_quantiles() {
        let v: Vec<i64> = (1..=100).collect();
        assert_eq!(quantile(&v, 0.5), Some(50));
        assert_eq!(quantile(&v, 0.95), Some(95));
        assert_eq!(quantile(&[7], 0.95), Some(7));
        assert_eq!(quantile(&[], 0.5), None);
        let f =
            figures(&[ContactTimes { source: "web".into(), accepted_ms: vec![300, 100, 200], delivered_ms: vec![] }]);
        assert_eq!((f[0].accepted, f[0].accepted_p50_ms, f[0].delivered_p95_ms), (3, Some(200), None));
    }
}
