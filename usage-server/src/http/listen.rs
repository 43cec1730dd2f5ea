//! Serving the API on a listener: the store's poller and the webhook deliveries beside the
//! connections, an optional metrics listener, and the graceful shutdown that drains
//! in-flight requests (up to [`DRAIN_TIMEOUT`]) and closes the store.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use super::{App, Config, conn, metrics_routes, routes};
use crate::store::Store;

/// How long in-flight requests may take to finish after a shutdown signal.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves the API on `listener` until `shutdown` resolves, then stops accepting, lets
/// in-flight requests finish (up to [`DRAIN_TIMEOUT`]) and closes the store.
pub async fn serve(
    store: Arc<dyn Store>,
    config: Config,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    serve_with(store, config, listener, None, shutdown).await;
}

/// [`serve`], with `GET /metrics` on a listener of its own when `metrics` is given (and
/// then not on the API's).
pub async fn serve_with(
    store: Arc<dyn Store>,
    config: Config,
    listener: tokio::net::TcpListener,
    metrics: Option<tokio::net::TcpListener>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let (tx, rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = tx.send(true);
    });
    let poller = {
        let store = store.clone();
        let every = config.poll_interval;
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                if let Err(e) = store.refresh().await {
                    tracing::warn!(error = %e, "refreshing from the store failed");
                }
            }
        })
    };
    let deliveries = tokio::spawn(crate::webhooks::run(store.clone(), config.webhooks));
    let timeouts = config.timeouts;
    let app = Arc::new(App {
        metrics_on_api: metrics.is_none(),
        ..App::new(store.clone(), config)
    });
    let metrics_server = metrics.map(|l| {
        let app = app.clone();
        let mut stop = rx.clone();
        tokio::spawn(conn::serve(
            l,
            warp::service(metrics_routes(app)),
            timeouts,
            async move {
                let _ = stop.wait_for(|v| *v).await;
            },
        ))
    });
    let mut stop = rx.clone();
    let run = conn::serve(listener, warp::service(routes(app)), timeouts, async move {
        let _ = stop.wait_for(|v| *v).await;
    });
    let mut stop = rx;
    tokio::select! {
        () = run => {}
        () = async move {
            let _ = stop.wait_for(|v| *v).await;
            tokio::time::sleep(DRAIN_TIMEOUT).await;
        } => {
            tracing::warn!("in-flight requests did not finish within {DRAIN_TIMEOUT:?}");
        }
    }
    poller.abort();
    deliveries.abort();
    if let Some(m) = metrics_server {
        m.abort();
    }
    if let Err(e) = store.close().await {
        tracing::warn!(error = %e, "closing the store failed");
    }
}

/// A server running in this process (tests, embedding).
pub struct Handle {
    /// The address it listens on.
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Handle {
    /// The base URL, `http://ADDR`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops the server and waits until it has drained and closed its store.
    pub async fn shutdown(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        let _ = (&mut self.task).await;
    }
}

/// Binds `addr` and serves on it in a task.
///
/// # Errors
/// When the address cannot be bound.
pub async fn spawn(
    store: Arc<dyn Store>,
    config: Config,
    addr: SocketAddr,
) -> std::io::Result<Handle> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(serve(store, config, listener, async move {
        let _ = rx.await;
    }));
    Ok(Handle {
        addr,
        stop: Some(tx),
        task,
    })
}
