//! The process's lifecycle: which client connections are admitted, and the drain that SIGTERM
//! or SIGINT starts.
//!
//! Phases, in order ([`Phase`]):
//! - **Serving**: the listener accepts up to `max_client_connections` connections.
//! - **Draining** (the first signal): the listener stops accepting (new connections are
//!   refused by the kernel), `/ready` answers 503, and open connections keep being served —
//!   in a sidecar the application is shutting down too and may still need the database. The
//!   process exits as soon as the last client connection closes.
//! - **Closing** (`drain_grace_seconds` later): each session stops reading requests, lets the
//!   responses to requests it already forwarded reach the client (at most [`CLOSE_WAIT`]),
//!   then closes. The process exits when the last one has, and at most [`EXIT_WAIT`] after
//!   the deadline in any case.
//!
//! A second signal at any point exits at once ([`Outcome::Forced`]).
//!
//! With a hand-over socket (`handover_socket`, see [`crate::handover`]) and a new process
//! answering there, the drain hands connections over instead: plain-TCP sessions stop reading
//! requests at once (their token is cancelled with the hand-over's start as well as with the
//! grace period's end), and once what they forwarded is answered, pass their client socket to
//! the new process. TLS sessions, whose token is only the grace period's, are drained as above.
//!
//! Design justification: the phase is a `tokio::sync::watch` value, so that the listener, the
//! drain and the admin server observe one source of truth without polling; the sessions, which
//! check on every read, wait on child tokens of a `CancellationToken` instead (each with its
//! own waiter, where a watch channel would have every session's reads share one). Open
//! connections are permits of a semaphore, so that the count of open connections and "every
//! connection has closed" are one count and cannot drift apart. The semaphore holds the
//! largest limit there can be ([`MAX_CLIENT_CONNECTIONS`]) and the limit in force is an
//! atomic the listener compares with before it takes a permit, so that a configuration reload
//! can raise or lower it while connections are open (a lower limit refuses new connections
//! until enough have closed; none is closed for it).

use crate::config::MAX_CLIENT_CONNECTIONS;
use std::future::Future;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// How long a session, once closing, waits for the responses to requests already forwarded.
pub const CLOSE_WAIT: Duration = Duration::from_secs(3);

/// How long after the grace period the process waits for the last sessions to close before it
/// exits anyway (a session also flushes what it queued toward the client).
pub const EXIT_WAIT: Duration = Duration::from_secs(5);

/// Where the process is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    Serving,
    Draining,
    Closing,
}

/// How the drain ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Every client connection closed (by its client, or by the proxy after the grace period).
    Drained,
    /// The grace period and [`EXIT_WAIT`] passed with connections still open.
    TimedOut { open: usize },
    /// A second signal.
    Forced,
}

/// The admission and drain state every session shares (in [`crate::context::Context`]).
#[derive(Debug)]
pub struct Lifecycle {
    phase: watch::Sender<Phase>,
    /// Cancelled with `phase` reaching Closing. Each session waits on a child token of its own,
    /// so that sessions do not contend on one waiter list.
    closing: CancellationToken,
    /// A child of `closing`, cancelled too when a hand-over starts: the parent of the tokens of
    /// sessions whose connection can be handed over (plain TCP).
    handing_over: CancellationToken,
    /// A hand-over started (see [`crate::handover`]).
    handover_started: AtomicBool,
    /// One permit per open client connection; [`Lifecycle::capacity`] in all.
    slots: Arc<Semaphore>,
    capacity: u32,
    /// The connection limit in force (`max_client_connections`, reloadable).
    limit: AtomicUsize,
}

/// Held by a session for as long as its client connection is open.
#[derive(Debug)]
pub struct Admitted {
    _permit: OwnedSemaphorePermit,
}

impl Lifecycle {
    /// Serving, admitting at most `max_connections` (1 to [`MAX_CLIENT_CONNECTIONS`]) client
    /// connections at once.
    pub fn new(max_connections: usize) -> Lifecycle {
        let limit = max_connections.clamp(1, MAX_CLIENT_CONNECTIONS);
        let capacity = u32::try_from(MAX_CLIENT_CONNECTIONS).unwrap_or(u32::MAX);
        let closing = CancellationToken::new();
        Lifecycle {
            phase: watch::Sender::new(Phase::Serving),
            handing_over: closing.child_token(),
            handover_started: AtomicBool::new(false),
            closing,
            slots: Arc::new(Semaphore::new(capacity as usize)),
            capacity,
            limit: AtomicUsize::new(limit),
        }
    }

    /// Admits one more client connection, unless the limit is reached. Called by the one
    /// listener task only, so the check and the permit cannot race with another admission.
    pub fn admit(&self) -> Option<Admitted> {
        if self.open() >= self.limit() {
            return None;
        }
        self.slots
            .clone()
            .try_acquire_owned()
            .ok()
            .map(|p| Admitted { _permit: p })
    }

    /// Client connections open now.
    pub fn open(&self) -> usize {
        self.capacity as usize - self.slots.available_permits()
    }

    /// The connection limit in force.
    pub fn limit(&self) -> usize {
        self.limit.load(Ordering::Relaxed)
    }

    /// Changes the connection limit (clamped to 1..=[`MAX_CLIENT_CONNECTIONS`]) from the next
    /// connection on; returns the previous one. Open connections are never closed for it.
    pub fn set_limit(&self, max_connections: usize) -> usize {
        self.limit.swap(
            max_connections.clamp(1, MAX_CLIENT_CONNECTIONS),
            Ordering::Relaxed,
        )
    }

    /// The phase now.
    pub fn phase(&self) -> Phase {
        *self.phase.borrow()
    }

    /// Draining or closing: `/ready` says 503.
    pub fn is_draining(&self) -> bool {
        self.phase() >= Phase::Draining
    }

    /// The grace period is over: sessions stop reading requests.
    pub fn is_closing(&self) -> bool {
        self.closing.is_cancelled()
    }

    /// A token of one session's own, cancelled when the grace period ends, and, for a
    /// connection that can be handed over (`handable`: plain TCP), when a hand-over starts.
    pub fn session_token(&self, handable: bool) -> CancellationToken {
        if handable {
            self.handing_over.child_token()
        } else {
            self.closing.child_token()
        }
    }

    /// Starts handing connections over: the sessions that can be stop reading requests.
    pub fn start_handover(&self) {
        self.handover_started.store(true, Ordering::Release);
        self.handing_over.cancel();
    }

    /// A hand-over started: a session stopped by its token hands its connection over.
    pub fn handing_over(&self) -> bool {
        self.handover_started.load(Ordering::Acquire)
    }

    /// Starts the drain (idempotent).
    pub fn start_drain(&self) {
        self.advance(Phase::Draining);
    }

    /// Ends the grace period: every session closes (idempotent).
    pub fn close(&self) {
        self.advance(Phase::Closing);
        self.closing.cancel();
    }

    fn advance(&self, to: Phase) {
        self.phase.send_if_modified(|p| {
            let later = to > *p;
            if later {
                *p = to;
            }
            later
        });
    }

    /// Completes once the phase is `phase` or later.
    pub async fn reached(&self, phase: Phase) {
        let mut rx = self.phase.subscribe();
        // The sender lives in `self`, which outlives this borrow: no error to handle.
        let _ = rx.wait_for(|p| *p >= phase).await;
    }

    /// Completes when no client connection is open. Only meaningful once the listener has
    /// stopped admitting.
    pub async fn all_closed(&self) {
        // All permits back means no session holds one; they are returned at once.
        let _ = self.slots.acquire_many(self.capacity).await;
    }
}

/// Runs the drain, from the first signal to the moment the process may exit: stops the
/// listener (through the phase), waits for every client connection to close, closes those
/// still open after `grace`, and gives up [`EXIT_WAIT`] later. `second_signal` completing at
/// any point ends it at once. With a `handover` socket where a new process answers (tried for
/// [`crate::handover::PROBE_FOR`] while connections are served), the connections that can be
/// are handed over to it meanwhile, once `announce` has told it what the connections need
/// besides their own state (see [`crate::handover::send_statements`]).
pub async fn drain(
    lifecycle: &Lifecycle,
    grace: Duration,
    handover: Option<&Path>,
    announce: impl Future<Output = ()>,
    second_signal: impl Future<Output = ()>,
) -> Outcome {
    tokio::pin!(second_signal);
    lifecycle.start_drain();
    info!(
        open = lifecycle.open(),
        grace_seconds = grace.as_secs(),
        "draining: no new connections; open ones are served until they close or the grace period ends"
    );
    let hand_over = async {
        if let Some(path) = handover {
            // Within half the grace period at most: a hand-over needs time after it.
            let within = crate::handover::PROBE_FOR.min(grace / 2);
            if crate::handover::probe(path, within).await {
                // (No count of open connections: `all_closed`, polled beside this, holds the
                // permits it has been given while it waits, so `open()` reads high.)
                info!("a new process takes connections over: handing them over");
                announce.await;
                lifecycle.start_handover();
            } else {
                info!("no new process on the hand-over socket: connections are drained");
            }
        }
        std::future::pending::<()>().await
    };
    tokio::select! {
        () = lifecycle.all_closed() => {
            info!("every client connection has closed");
            return Outcome::Drained;
        }
        () = tokio::time::sleep(grace) => {}
        () = hand_over => {}
        () = &mut second_signal => return Outcome::Forced,
    }
    lifecycle.close();
    info!(
        open = lifecycle.open(),
        "grace period over: closing the remaining client connections once their in-flight requests are answered"
    );
    tokio::select! {
        () = lifecycle.all_closed() => {
            info!("every client connection has closed");
            Outcome::Drained
        }
        () = tokio::time::sleep(EXIT_WAIT) => {
            let open = lifecycle.open();
            warn!(open, "client connections still open; exiting anyway");
            Outcome::TimedOut { open }
        }
        () = &mut second_signal => Outcome::Forced,
    }
}

/// SIGTERM and SIGINT (Ctrl-C), as one stream of "stop" requests.
pub struct Signals {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
}

impl Signals {
    /// Installs the handlers (from then on the signals no longer kill the process). Call
    /// inside a tokio runtime.
    pub fn install() -> std::io::Result<Signals> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Ok(Signals {
                term: signal(SignalKind::terminate())?,
                int: signal(SignalKind::interrupt())?,
            })
        }
        #[cfg(not(unix))]
        Ok(Signals {})
    }

    /// Completes at the next SIGTERM or SIGINT.
    pub async fn recv(&mut self) {
        #[cfg(unix)]
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admits_up_to_the_limit() {
        let l = Lifecycle::new(2);
        let a = l.admit().unwrap();
        let b = l.admit().unwrap();
        assert!(l.admit().is_none());
        assert_eq!(l.open(), 2);
        drop(a);
        assert_eq!(l.open(), 1);
        assert!(l.admit().is_some());
        drop(b);
        assert_eq!(l.open(), 0);
    }

    #[test]
    fn the_limit_changes_while_connections_are_open() {
        let l = Lifecycle::new(2);
        let a = l.admit().unwrap();
        let b = l.admit().unwrap();
        assert!(l.admit().is_none());
        assert_eq!(l.set_limit(3), 2);
        let c = l.admit().unwrap();
        assert!(l.admit().is_none());
        // Lowered below what is open: nothing is closed, nothing new is admitted until enough
        // have closed.
        l.set_limit(1);
        assert_eq!((l.open(), l.limit()), (3, 1));
        drop(a);
        drop(b);
        assert!(l.admit().is_none());
        drop(c);
        assert!(l.admit().is_some());
        l.set_limit(0);
        assert_eq!(l.limit(), 1);
    }

    #[test]
    fn phases_only_advance() {
        let l = Lifecycle::new(1);
        assert_eq!(l.phase(), Phase::Serving);
        assert!(!l.is_draining());
        l.start_drain();
        assert!(l.is_draining() && !l.is_closing());
        l.close();
        l.start_drain();
        assert_eq!(l.phase(), Phase::Closing);
        assert!(l.is_closing());
    }

    #[test]
    fn a_hand_over_stops_only_the_sessions_that_can_be_handed_over() {
        let l = Lifecycle::new(4);
        let plain = l.session_token(true);
        let tls = l.session_token(false);
        l.start_drain();
        assert!(!plain.is_cancelled() && !l.handing_over());
        l.start_handover();
        assert!(l.handing_over() && plain.is_cancelled());
        assert!(
            !tls.is_cancelled(),
            "a TLS session is served until the grace period ends"
        );
        l.close();
        assert!(tls.is_cancelled());
    }

    #[tokio::test(start_paused = true)]
    async fn no_new_process_on_the_hand_over_socket_is_a_drain_as_before() {
        let l = Arc::new(Lifecycle::new(4));
        let conn = l.admit().unwrap();
        let token = l.session_token(true);
        let l2 = l.clone();
        let path = std::env::temp_dir().join(format!("autoprep-none-{}.sock", std::process::id()));
        let drain = tokio::spawn(async move {
            drain(
                &l2,
                Duration::from_secs(30),
                Some(&path),
                async {},
                std::future::pending(),
            )
            .await
        });
        l.reached(Phase::Closing).await;
        assert!(!l.handing_over());
        assert!(token.is_cancelled());
        drop(conn);
        assert_eq!(drain.await.unwrap(), Outcome::Drained);
    }

    #[tokio::test(start_paused = true)]
    async fn drained_when_the_last_connection_closes() {
        let l = Arc::new(Lifecycle::new(4));
        let conn = l.admit().unwrap();
        let l2 = l.clone();
        let drain = tokio::spawn(async move {
            drain(
                &l2,
                Duration::from_secs(3600),
                None,
                async {},
                std::future::pending(),
            )
            .await
        });
        l.reached(Phase::Draining).await;
        drop(conn);
        assert_eq!(drain.await.unwrap(), Outcome::Drained);
        assert_eq!(l.phase(), Phase::Draining, "never reached the deadline");
    }

    #[tokio::test(start_paused = true)]
    async fn closes_after_the_grace_period() {
        let l = Arc::new(Lifecycle::new(4));
        let conn = l.admit().unwrap();
        let l2 = l.clone();
        let drain = tokio::spawn(async move {
            drain(
                &l2,
                Duration::from_secs(30),
                None,
                async {},
                std::future::pending(),
            )
            .await
        });
        // A session that closes when told to.
        l.reached(Phase::Closing).await;
        drop(conn);
        assert_eq!(drain.await.unwrap(), Outcome::Drained);
    }

    #[tokio::test(start_paused = true)]
    async fn gives_up_on_a_connection_that_never_closes() {
        let l = Lifecycle::new(4);
        let _stuck = l.admit().unwrap();
        let out = drain(
            &l,
            Duration::from_secs(30),
            None,
            async {},
            std::future::pending(),
        )
        .await;
        assert_eq!(out, Outcome::TimedOut { open: 1 });
    }

    #[tokio::test(start_paused = true)]
    async fn a_second_signal_forces_the_exit() {
        let l = Lifecycle::new(4);
        let _open = l.admit().unwrap();
        let out = drain(&l, Duration::from_secs(3600), None, async {}, async {}).await;
        assert_eq!(out, Outcome::Forced);
    }
}
