//! Assembles a running Leadline: store, worker, ingest and API on one HTTP listener.
//! Used by `leadline serve`, the desktop app and the integration tests alike.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use tokio::sync::{broadcast, watch, Notify};
use tokio::task::JoinHandle;

use crate::config::Config;
use crate::features::app::App;
use crate::features::delivery::worker::Worker;
use crate::features::ingest::{self, IngestState};
use crate::features::monitor::{LogNotifier, Notifier};
use crate::runtime::Clock;
use crate::store::Store;

/// How to start: whether the demo runs (the UI says so), where alerts are announced, the clock (the system's
/// unless a test brings a manual one), and how long before the start the monitor takes itself to have listened.
pub struct StartOptions {
    pub demo: bool,
    pub notifier: Arc<dyn Notifier>,
    pub clock: Option<Clock>,
    /// How long before this start the monitor is to take Leadline as already listening (`App::listening_since`):
    /// zero for a real run, whose restart must not count the minutes it was down as a source's silence.
    ///
    /// The demo started at a point of its schedule (`LEADLINE_DEMO_CLOCK_OFFSET`) passes that offset: its
    /// seeded per-minute history stands for the demo's timeline before the start, as if Leadline had heard it,
    /// so the monitor reads that history for the time before the start and judges a silence the timeline says
    /// began earlier (the partner API's) as soon as it has lasted long enough — not only after this process
    /// has itself listened for `silence_minutes`.
    pub listened_before: std::time::Duration,
}

impl Default for StartOptions {
    fn default() -> Self {
        Self { demo: false, notifier: Arc::new(LogNotifier), clock: None, listened_before: std::time::Duration::ZERO }
    }
}

pub struct Server {
    /// The address the HTTP server listens on (the real port when the config said 0).
    pub addr: SocketAddr,
    pub app: App,
    /// The browser token, when this start created it (first run): to be shown once.
    pub new_token: Option<String>,
    http: JoinHandle<std::io::Result<()>>,
    worker: Option<JoinHandle<anyhow::Result<()>>>,
    monitor: JoinHandle<()>,
    reconciler: JoinHandle<()>,
    poller: JoinHandle<()>,
    replays: JoinHandle<()>,
    reloader: JoinHandle<()>,
    /// Team mode: renews (or tries to take) the leader lease.
    elections: JoinHandle<()>,
    stop_http: watch::Sender<bool>,
}

impl Server {
    /// Opens the database, starts the worker (unless `worker.enabled = false`) and binds the HTTP listener.
    pub async fn start(config: Config) -> anyhow::Result<Server> {
        Self::start_with(config, StartOptions::default()).await
    }

    pub async fn start_with(config: Config, options: StartOptions) -> anyhow::Result<Server> {
        for warning in preflight(&config)? {
            tracing::warn!("{warning}");
        }
        let clock = options.clock.clone().unwrap_or_default();
        let url = config.database_url()?;
        let store = Store::open(&url).await?;
        let (worker, handle) = if config.worker.enabled {
            let w = Worker::new(store.clone(), &config, clock.clone())?;
            let h = w.handle();
            (Some(tokio::spawn(w.run())), Some(h))
        } else {
            (None, None)
        };
        let wake = handle.as_ref().map(|h| h.wake.clone()).unwrap_or_else(|| Arc::new(Notify::new()));
        let ingest_state = IngestState::new(&config, store.clone(), wake, clock.clone())?;
        let (live, _) = broadcast::channel(256);
        let (stop_http, closing) = watch::channel(false);
        let started_at = clock.now();
        let (leadership, elections) =
            crate::runtime::Leadership::start(&store, &clock, &crate::features::delivery::worker::owner_name()).await;
        let app = App {
            store,
            config: crate::runtime::SharedConfig::new(config),
            clock: clock.clone(),
            worker: handle,
            live,
            ingest: ingest_state.clone(),
            notifier: options.notifier.clone(),
            started_at,
            listening_since: started_at
                - chrono::Duration::from_std(options.listened_before).unwrap_or(chrono::TimeDelta::zero()),
            demo: options.demo,
            closing,
            leadership,
        };
        crate::shells::api::load_pauses(&app).await?;
        let new_token = crate::shells::api::http::ensure_token(&app.store, app.clock.now()).await?;
        let monitor = tokio::spawn(crate::features::monitor::run(app.clone(), options.notifier.clone()));
        let replays = tokio::spawn(crate::features::replay::runner::run(app.clone()));
        let poller =
            tokio::spawn(crate::features::poll::run(app.clone(), ingest_state.clone(), options.notifier.clone()));
        let reconciler =
            tokio::spawn(crate::features::reconcile::run(app.clone(), ingest_state.clone(), options.notifier));
        let reloader = tokio::spawn(reload_on_hangup(app.clone()));
        let elections = elections.unwrap_or_else(|| tokio::spawn(async {}));
        let router = crate::shells::api::http::protect(
            ingest::router(ingest_state)
                .merge(crate::features::contact::receipts::router(app.clone()))
                .merge(crate::shells::api::http::router(app.clone())),
            &app.config.server,
        );
        let listener = tokio::net::TcpListener::bind(app.config.server.listen)
            .await
            .with_context(|| format!("cannot listen on {} (server.listen)", app.config.server.listen))?;
        let addr = listener.local_addr()?;
        let mut stop_rx = stop_http.subscribe();
        let limits = app.config.server.clone();
        let http = tokio::spawn(async move {
            serve(listener, router, &limits, async move {
                let _ = stop_rx.wait_for(|s| *s).await;
            })
            .await
        });
        tracing::info!(%addr, database = %crate::store::postgres::redact(&url), "leadline listening");
        Ok(Server {
            addr,
            app,
            new_token,
            http,
            worker,
            monitor,
            reconciler,
            poller,
            replays,
            reloader,
            elections,
            stop_http,
        })
    }

    /// Stops accepting requests, lets the worker finish or release in-flight jobs, and closes the database.
    pub async fn shutdown(self) -> anyhow::Result<()> {
        let _ = self.stop_http.send(true);
        // Open connections get a few seconds to finish; a client that never lets go does not block shutdown.
        let mut http = self.http;
        if tokio::time::timeout(std::time::Duration::from_secs(5), &mut http).await.is_err() {
            tracing::warn!("HTTP connections still open after 5 s: closing them");
            http.abort();
        }
        self.monitor.abort();
        self.reconciler.abort();
        self.poller.abort();
        self.replays.abort();
        self.reloader.abort();
        self.elections.abort();
        if let (Some(handle), Some(task)) = (&self.app.worker, self.worker) {
            handle.shutdown();
            task.await.context("worker task panicked")??;
        }
        // Another process of the team takes the once-only duties at once instead of after the lease runs out.
        if self.app.store.is_shared() && self.app.leadership.is_leader() {
            let _ = self.app.store.give_up_lease(crate::runtime::leadership::ROLE, self.app.leadership.owner()).await;
        }
        self.app.store.close().await;
        Ok(())
    }
}

/// Reloads secrets at every SIGHUP (what `leadline reload` and systemd's `ExecReload` send), until aborted.
async fn reload_on_hangup(app: App) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let Ok(mut hangup) = signal(SignalKind::hangup()) else {
            tracing::warn!("cannot listen for SIGHUP: reload secrets from the UI instead");
            return;
        };
        while hangup.recv().await.is_some() {
            // Each target's outcome is logged by reload_secrets itself.
            if let Err(e) = crate::shells::api::reload_secrets(&app, "SIGHUP").await {
                tracing::warn!(error = %e, "secrets not reloaded");
            }
        }
    }
    #[cfg(not(unix))]
    let _ = app;
}

/// Every check `serve` makes before it opens the database (`check-config` and the settings page run the same).
pub use crate::features::settings::{preflight, unsigned_source_warnings};

/// Largest read buffer of one connection: bounds what a client can make the server hold in request headers.
const MAX_CONNECTION_BUFFER: usize = 64 * 1024;

/// Serves `router` over HTTP/1.1 with limits that keep slow or numerous clients from holding memory without
/// bound (`axum::serve` has neither a header timeout nor a connection cap): at most `max_connections` open
/// connections (further ones are closed at once), headers within `header_timeout_seconds` (an idle keep-alive
/// connection is closed after the same time), at most [`MAX_CONNECTION_BUFFER`] bytes buffered per connection.
/// Webhook bodies are bounded in `ingest` (size per source, minimum rate, read time, large bodies in flight, bodies
/// per sender). Every request carries its connection's address as `ConnectInfo<SocketAddr>`, as `axum::serve`
/// would add it: ingest counts bodies per sender with it.
async fn serve(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    limits: &crate::config::ServerConfig,
    stop: impl std::future::Future<Output = ()>,
) -> std::io::Result<()> {
    use hyper_util::rt::{TokioIo, TokioTimer};
    let connections = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut http1 = hyper::server::conn::http1::Builder::new();
    http1
        .timer(TokioTimer::new())
        .header_read_timeout(std::time::Duration::from_secs(limits.header_timeout_seconds))
        .max_buf_size(MAX_CONNECTION_BUFFER);
    let mut last_refusal_logged: Option<tokio::time::Instant> = None;
    tokio::pin!(stop);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors, or a connection reset before it was accepted: keep serving.
                    tracing::warn!(error = %e, "cannot accept a connection");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut stop => break,
        };
        let Ok(permit) = connections.clone().try_acquire_owned() else {
            drop(stream);
            if last_refusal_logged.is_none_or(|t| t.elapsed() > std::time::Duration::from_secs(10)) {
                last_refusal_logged = Some(tokio::time::Instant::now());
                tracing::warn!(
                    limit = limits.max_connections,
                    "connection limit reached (server.max_connections): closing new connections"
                );
            }
            continue;
        };
        let _ = stream.set_nodelay(true);
        let service = tower::ServiceExt::map_request(router.clone(), move |mut request: axum::extract::Request<_>| {
            request.extensions_mut().insert(axum::extract::ConnectInfo(peer));
            request
        });
        let service = hyper_util::service::TowerToHyperService::new(service);
        let connection = graceful.watch(http1.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            let _ = connection.await;
            drop(permit);
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// Resolves on Ctrl-C or SIGTERM: the signal to shut down cleanly.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}
