//! The worker's one writer: completions and claims in shared transactions.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, Notify};

use crate::model::Job;
use crate::store::{ClaimRequest, Completion, Store};

/// A claim for the writer, and where its jobs go once committed.
pub(super) type Claim = (ClaimRequest, oneshot::Sender<anyhow::Result<Vec<Job>>>);

/// Asks the writer for a claim; the jobs come back once their claim is committed.
pub(super) async fn claim(claim_tx: &mpsc::Sender<Claim>, request: ClaimRequest) -> anyhow::Result<Vec<Job>> {
    let (reply, answer) = oneshot::channel();
    claim_tx.send((request, reply)).await.map_err(|_| anyhow::anyhow!("the writer has stopped"))?;
    answer.await.map_err(|_| anyhow::anyhow!("the writer has stopped"))?
}

/// Most completions written in one transaction.
const WRITE_BATCH: usize = 1024;

/// The worker's one writer: completions and claims in shared transactions. Whatever has arrived while the
/// previous transaction was being committed — finished jobs and the dispatcher's claims — is written in the next
/// one, completions first (a claim then sees the steps they made due): one disk sync for the group.
pub(super) async fn writer(
    store: Store,
    mut done_rx: mpsc::Receiver<Completion>,
    mut claim_rx: mpsc::Receiver<Claim>,
    wake: Arc<Notify>,
) -> anyhow::Result<()> {
    let mut batch: Vec<Completion> = Vec::with_capacity(256);
    let mut claims: Vec<Claim> = Vec::new();
    let mut claims_open = true;
    let mut delay = Duration::from_millis(50);
    loop {
        if batch.is_empty() && claims.is_empty() {
            tokio::select! {
                n = done_rx.recv_many(&mut batch, WRITE_BATCH) => if n == 0 { break },
                c = claim_rx.recv(), if claims_open => match c {
                    Some(c) => claims.push(c),
                    None => claims_open = false,
                },
            }
        }
        while batch.len() < WRITE_BATCH {
            match done_rx.try_recv() {
                Ok(c) => batch.push(c),
                Err(_) => break,
            }
        }
        while let Ok(c) = claim_rx.try_recv() {
            claims.push(c);
        }
        let requests: Vec<ClaimRequest> = claims.iter().map(|(r, _)| r.clone()).collect();
        match store.write_batch(&batch, &requests).await {
            Ok((_, claimed)) => {
                for ((_, reply), jobs) in claims.drain(..).zip(claimed) {
                    // A dispatcher that stopped waiting leaves its jobs leased: the rescuer returns them.
                    let _ = reply.send(Ok(jobs));
                }
                delay = Duration::from_millis(50);
                if !batch.is_empty() {
                    batch.clear();
                    // A delivered step may have made the next step of its route due, and slots are free.
                    wake.notify_one();
                }
            }
            Err(e) => {
                // Never drop a finished job: keep retrying the write (the leases protect the jobs meanwhile). The
                // claims fail (the dispatcher claims again on its next pass), so a failing claim cannot hold the
                // completions back.
                tracing::error!(error = %format!("{e:#}"), n = batch.len(), claims = claims.len(), "cannot write completions and claims; retrying");
                for (_, reply) in claims.drain(..) {
                    let _ = reply.send(Err(anyhow::anyhow!("{e:#}")));
                }
                if !batch.is_empty() {
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(5));
                    // Retry the completions alone.
                    loop {
                        match store.complete(&batch).await {
                            Ok(_) => break,
                            Err(e) => {
                                tracing::error!(error = %format!("{e:#}"), n = batch.len(), "cannot write completions; retrying");
                                tokio::time::sleep(delay).await;
                                delay = (delay * 2).min(Duration::from_secs(5));
                            }
                        }
                    }
                    batch.clear();
                    wake.notify_one();
                }
            }
        }
    }
    Ok(())
}
