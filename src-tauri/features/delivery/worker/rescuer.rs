//! The rescuer: returns jobs whose lease expired (their process died or hung mid-attempt) to `pending`, marked in
//! doubt, so they are looked up before any resend.

use std::time::Duration;

use super::WorkerHandle;
use crate::config::WorkerConfig;
use crate::store::Store;

pub(super) async fn rescuer(store: Store, cfg: WorkerConfig, handle: WorkerHandle) {
    let mut tick = tokio::time::interval(Duration::from_secs(cfg.rescue_interval_seconds.max(1)));
    loop {
        tick.tick().await;
        match store.rescue_expired(handle.clock.now()).await {
            Ok(0) => {}
            Ok(n) => {
                tracing::warn!(rescued = n, "returned jobs with expired leases to pending");
                handle.wake.notify_one();
            }
            Err(e) => tracing::error!(error = %format!("{e:#}"), "rescue failed"),
        }
    }
}
