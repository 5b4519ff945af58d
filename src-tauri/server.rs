//! Assembles a running Leadline: store, worker, ingest and API on one HTTP listener.
//! Used by `leadline serve`, the desktop app and the integration tests alike.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;

use crate::api::App;
use crate::config::Config;
use crate::delivery::worker::Worker;
use crate::ingest::{self, IngestState};
use crate::store::Store;

pub struct Server {
    /// The address the HTTP server listens on (the real port when the config said 0).
    pub addr: SocketAddr,
    pub app: App,
    http: JoinHandle<std::io::Result<()>>,
    worker: Option<JoinHandle<anyhow::Result<()>>>,
    stop_http: watch::Sender<bool>,
}

impl Server {
    /// Opens the database, starts the worker (unless `worker.enabled = false`) and binds the HTTP listener.
    pub async fn start(config: Config) -> anyhow::Result<Server> {
        config.validate()?;
        let url = config.database_url()?;
        let store = Store::open(&url).await?;
        let (worker, handle) = if config.worker.enabled {
            let w = Worker::new(store.clone(), &config)?;
            let h = w.handle();
            (Some(tokio::spawn(w.run())), Some(h))
        } else {
            (None, None)
        };
        let wake = handle
            .as_ref()
            .map(|h| h.wake.clone())
            .unwrap_or_else(|| Arc::new(Notify::new()));
        let ingest_state = IngestState::new(&config, store.clone(), wake)?;
        let app = App {
            store,
            config: Arc::new(config),
            worker: handle,
        };
        let router = ingest::router(ingest_state).merge(crate::api::http::router(app.clone()));
        let listener = tokio::net::TcpListener::bind(app.config.server.listen)
            .await
            .with_context(|| {
                format!(
                    "cannot listen on {} (server.listen)",
                    app.config.server.listen
                )
            })?;
        let addr = listener.local_addr()?;
        let (stop_http, mut stop_rx) = watch::channel(false);
        let http = tokio::spawn(async move {
            axum::serve(listener, router)
                .with_graceful_shutdown(async move {
                    let _ = stop_rx.wait_for(|s| *s).await;
                })
                .await
        });
        tracing::info!(%addr, database = %url, "leadline listening");
        Ok(Server {
            addr,
            app,
            http,
            worker,
            stop_http,
        })
    }

    /// Stops accepting requests, lets the worker finish or release in-flight jobs, and closes the database.
    pub async fn shutdown(self) -> anyhow::Result<()> {
        let _ = self.stop_http.send(true);
        let _ = self.http.await;
        if let (Some(handle), Some(task)) = (&self.app.worker, self.worker) {
            handle.shutdown();
            task.await.context("worker task panicked")??;
        }
        self.app.store.close().await;
        Ok(())
    }
}
