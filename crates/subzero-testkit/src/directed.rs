//! A model server whose every answer is computed from the request itself.
//!
//! [`ScriptedServer`](crate::ScriptedServer) answers in arrival order, which is right for
//! one child but not for many children calling at once in an order nobody chose. A
//! [`DirectedServer`] hands each request to a responder that decides from the request
//! alone (the prompt carries the plan, the conversation says how far along it is), so the
//! same workload gets the same answers whatever the interleaving.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use axum::extract::{Request, State};
use axum::response::Response;

use crate::{RecordedRequest, Reply, http};

/// Decides the answer to one request.
pub type Responder = Arc<dyn Fn(&RecordedRequest) -> Reply + Send + Sync>;

struct Shared {
    responder: Responder,
    served: AtomicU64,
}

/// The running server; stops when dropped.
pub struct DirectedServer {
    shared: Arc<Shared>,
    loopback: http::Loopback,
}

impl std::fmt::Debug for DirectedServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectedServer")
            .field("addr", &self.loopback.addr())
            .finish()
    }
}

impl DirectedServer {
    /// Serves on `127.0.0.1` at a free port, answering each request with `responder`.
    pub fn start(responder: Responder) -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            responder,
            served: AtomicU64::new(0),
        });
        let app = Router::new().fallback(handle).with_state(shared.clone());
        let loopback = http::Loopback::serve(app, "subzero-testkit-directed")?;
        Ok(Self { shared, loopback })
    }

    /// `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.loopback.addr())
    }

    /// `http://127.0.0.1:PORT`, the origin a credential is bound to.
    pub fn origin(&self) -> String {
        format!("http://{}", self.loopback.addr())
    }

    /// Requests answered so far.
    pub fn served(&self) -> u64 {
        self.shared.served.load(Ordering::Relaxed)
    }
}

async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let recorded = http::record(request).await;
    shared.served.fetch_add(1, Ordering::Relaxed);
    let reply = (shared.responder)(&recorded);
    crate::answer(reply).await
}
