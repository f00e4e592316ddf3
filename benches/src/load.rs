//! A closed-loop CQL load generator on the protocol crate: a number of connections, each
//! keeping a fixed number of requests in flight, recording every request's latency.
//!
//! A connection may also be a set of sockets, one to each node of a cluster ([`run_nodes`]):
//! then the workload names the node of every request ([`Workload::node`]), as a token-aware
//! driver sends each statement to a replica of its partition over its connection to that node.

use anyhow::{bail, Context, Result};
use autoprep_protocol::envelope::{
    Direction, Envelope, EnvelopeDecoder, Flags, Header, Opcode, ProtocolVersion, StreamId,
};
use autoprep_protocol::message::error::ErrorView;
use autoprep_protocol::message::query::{encode_query, QueryParams, Values};
use autoprep_protocol::message::result::ResultView;
use autoprep_protocol::primitives::{write_string_map, write_value, Value};
use bytes::BytesMut;
use std::collections::BTreeMap;
use std::future::poll_fn;
use std::task::Poll;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One connection with a simple request/response helper for setup.
pub struct Conn {
    sock: TcpStream,
    buf: BytesMut,
    dec: EnvelopeDecoder,
}

fn envelope(stream: i16, opcode: Opcode, body: &[u8]) -> Envelope {
    Envelope::new(
        Header {
            version: ProtocolVersion::V4,
            direction: Direction::Request,
            flags: Flags(0),
            stream: StreamId(stream),
            opcode,
            length: 0,
        },
        body,
    )
}

impl Conn {
    /// Connects with protocol v4 and sends STARTUP.
    pub async fn connect(addr: &str) -> Result<Conn> {
        let sock = TcpStream::connect(addr)
            .await
            .with_context(|| format!("connect {addr}"))?;
        sock.set_nodelay(true)?;
        let mut c = Conn {
            sock,
            buf: BytesMut::with_capacity(1 << 16),
            dec: EnvelopeDecoder::new(Direction::Response, 1 << 28),
        };
        let mut body = Vec::new();
        write_string_map(&mut body, &[("CQL_VERSION", "3.0.0")])?;
        let r = c.call(Opcode::STARTUP, &body).await?;
        if r.header().opcode != Opcode::READY {
            bail!("STARTUP was not answered with READY");
        }
        Ok(c)
    }

    async fn read_one(&mut self) -> Result<Envelope> {
        loop {
            if let Some(e) = self.dec.decode(&mut self.buf)? {
                return Ok(e);
            }
            if self.sock.read_buf(&mut self.buf).await? == 0 {
                bail!("connection closed");
            }
        }
    }

    /// Sends one request on stream 0 and waits for its answer; server errors become errors.
    pub async fn call(&mut self, opcode: Opcode, body: &[u8]) -> Result<Envelope> {
        self.sock
            .write_all(envelope(0, opcode, body).as_bytes())
            .await?;
        let e = self.read_one().await?;
        if e.header().opcode == Opcode::ERROR {
            let err = ErrorView::parse(e.body(), ProtocolVersion::V4)?;
            bail!("server error 0x{:04x}: {}", err.code, err.message);
        }
        Ok(e)
    }

    /// Sends a statement with no values at consistency ONE and waits for its answer.
    async fn call_query(&mut self, cql: &str) -> Result<Envelope> {
        let mut body = Vec::new();
        let params = QueryParams {
            consistency: 1,
            ..Default::default()
        };
        encode_query(ProtocolVersion::V4, cql.as_bytes(), &params, &mut body)?;
        self.call(Opcode::QUERY, &body).await
    }

    /// Runs a statement with no values.
    pub async fn query(&mut self, cql: &str) -> Result<()> {
        self.call_query(cql).await.map(|_| ())
    }

    /// Runs a statement with no values and returns the cells of its rows (`None` for null).
    pub async fn rows(&mut self, cql: &str) -> Result<Vec<Vec<Option<Vec<u8>>>>> {
        let e = self.call_query(cql).await?;
        match ResultView::parse(e.body(), ProtocolVersion::V4)? {
            ResultView::Rows(r) => r
                .rows()
                .map(|row| Ok(row?.into_iter().map(|c| c.map(<[u8]>::to_vec)).collect()))
                .collect(),
            _ => bail!("{cql}: the answer was not Rows"),
        }
    }

    /// Prepares a statement and returns its id.
    pub async fn prepare(&mut self, cql: &str) -> Result<Vec<u8>> {
        let mut body = Vec::new();
        autoprep_protocol::message::prepare::encode_prepare(
            ProtocolVersion::V4,
            cql.as_bytes(),
            None,
            &mut body,
        )?;
        let e = self.call(Opcode::PREPARE, &body).await?;
        match ResultView::parse(e.body(), ProtocolVersion::V4)? {
            ResultView::Prepared(p) => Ok(p.id.to_vec()),
            _ => bail!("PREPARE did not return a prepared result"),
        }
    }
}

/// One request of a workload: an opcode and its body, built for a sequence number.
pub trait Workload: Send + Sync + 'static {
    /// Appends the body of request number `seq` to `out` and returns its opcode.
    fn request(&self, seq: u64, out: &mut Vec<u8>) -> Opcode;

    /// Which of the connection's sockets request `seq` goes to (an index into the addresses
    /// given to [`run_nodes`], taken modulo their number): the first, unless the workload
    /// routes.
    fn node(&self, _seq: u64) -> usize {
        0
    }

    /// The next request of operation `seq` once `answer` (the answer to its request number
    /// `step`, 0 for the first) has arrived: appends its body to `out` and returns its opcode,
    /// or `None` when the operation is complete. It goes on the same stream and socket, and
    /// the operation's latency runs from its first request to its last answer. By default an
    /// operation is one request.
    fn next(
        &self,
        _seq: u64,
        _step: u32,
        _answer: &Envelope,
        _out: &mut Vec<u8>,
    ) -> Option<Opcode> {
        None
    }
}

/// Time-series inserts executed as a prepared statement:
/// `INSERT INTO ks.ts (sensor, at, value) VALUES (?, ?, ?)`.
pub struct PreparedInsert {
    pub id: Vec<u8>,
}

impl Workload for PreparedInsert {
    fn request(&self, seq: u64, out: &mut Vec<u8>) -> Opcode {
        let sensor = format!("s-{}", seq % 1000);
        let at = 1_767_225_600_000i64 + (seq as i64) * 10;
        let value = (seq % 10_000) as f64 / 10.0;
        let mut raw = Vec::with_capacity(48);
        let _ = write_value(&mut raw, Value::Bytes(sensor.as_bytes()));
        let _ = write_value(&mut raw, Value::Bytes(&at.to_be_bytes()));
        let _ = write_value(&mut raw, Value::Bytes(&value.to_be_bytes()));
        let params = QueryParams {
            consistency: 1,
            values: Some(Values {
                count: 3,
                named: false,
                raw: &raw,
            }),
            ..Default::default()
        };
        let _ = autoprep_protocol::message::execute::encode_execute(
            ProtocolVersion::V4,
            &self.id,
            &[],
            &params,
            out,
        );
        Opcode::EXECUTE
    }
}

/// What one load run measured.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub ops: u64,
    pub errors: u64,
    /// Requests sent for the completed operations (more than `ops` where an operation takes
    /// several, see [`Workload::next`]).
    pub requests: u64,
    /// The errors by their code.
    pub error_codes: BTreeMap<i32, u64>,
    pub elapsed: Duration,
    /// Latencies in microseconds, sorted.
    pub latencies_us: Vec<u32>,
}

impl Stats {
    /// Operations per second.
    pub fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// The latency at quantile `q` (0..=1), in microseconds.
    pub fn quantile_us(&self, q: f64) -> u32 {
        if self.latencies_us.is_empty() {
            return 0;
        }
        let i = ((self.latencies_us.len() - 1) as f64 * q).round() as usize;
        self.latencies_us[i]
    }
}

/// Runs `workload` against `addr` over `connections` connections with `in_flight` requests
/// outstanding on each, for `duration` or `max_ops` operations, whichever comes first.
pub async fn run<W: Workload>(
    addr: &str,
    workload: std::sync::Arc<W>,
    connections: usize,
    in_flight: usize,
    duration: Duration,
    max_ops: u64,
) -> Result<Stats> {
    run_paced(
        addr,
        workload,
        connections,
        in_flight,
        duration,
        max_ops,
        None,
    )
    .await
}

/// [`run`], optionally paced: with `rate` (operations per second over all connections) each
/// connection sends on a fixed schedule instead of as soon as a response frees a slot, up to
/// `in_flight` outstanding; a schedule that falls more than 50 ms behind drops the backlog
/// rather than bursting. Pacing compares modes at the same offered load.
pub async fn run_paced<W: Workload>(
    addr: &str,
    workload: std::sync::Arc<W>,
    connections: usize,
    in_flight: usize,
    duration: Duration,
    max_ops: u64,
    rate: Option<f64>,
) -> Result<Stats> {
    run_nodes(
        &[addr.to_owned()],
        workload,
        connections,
        in_flight,
        duration,
        max_ops,
        rate,
    )
    .await
}

/// [`run_paced`] where each of the `connections` is a socket to every address of `addrs`:
/// each request goes to the socket [`Workload::node`] names, and the `in_flight` slots (and
/// stream ids) of a connection are shared by its sockets, so the concurrency is the same
/// whatever the node count.
pub async fn run_nodes<W: Workload>(
    addrs: &[String],
    workload: std::sync::Arc<W>,
    connections: usize,
    in_flight: usize,
    duration: Duration,
    max_ops: u64,
    rate: Option<f64>,
) -> Result<Stats> {
    if addrs.is_empty() {
        bail!("no address to send the load to");
    }
    let started = Instant::now();
    let deadline = started + duration;
    let per_conn = max_ops / connections.max(1) as u64;
    let interval = rate
        .filter(|r| *r > 0.0)
        .map(|r| Duration::from_secs_f64(connections.max(1) as f64 / r));
    let mut tasks = Vec::new();
    for c in 0..connections {
        let mut conns = Vec::with_capacity(addrs.len());
        for addr in addrs {
            conns.push(Conn::connect(addr).await?);
        }
        let w = workload.clone();
        tasks.push(tokio::spawn(drive(
            conns,
            w,
            c as u64,
            in_flight.clamp(1, 32000),
            deadline,
            per_conn,
            interval,
        )));
    }
    let mut total = Stats::default();
    for t in tasks {
        let s = t.await??;
        total.ops += s.ops;
        total.errors += s.errors;
        total.requests += s.requests;
        for (code, n) in s.error_codes {
            *total.error_codes.entry(code).or_default() += n;
        }
        total.latencies_us.extend(s.latencies_us);
    }
    total.elapsed = started.elapsed();
    total.latencies_us.sort_unstable();
    Ok(total)
}

/// Reads from whichever of `conns` has bytes (at least one read), into its buffer.
async fn read_any(conns: &mut [Conn]) -> Result<()> {
    if let [conn] = conns {
        if conn.sock.read_buf(&mut conn.buf).await? == 0 {
            bail!("connection closed during the load");
        }
        return Ok(());
    }
    poll_fn(|cx| {
        let mut read = false;
        for conn in conns.iter_mut() {
            // Until a socket is not ready (which registers the waker) or gave bytes.
            loop {
                match conn.sock.poll_read_ready(cx) {
                    Poll::Pending => break,
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e.into())),
                    Poll::Ready(Ok(())) => match conn.sock.try_read_buf(&mut conn.buf) {
                        Ok(0) => {
                            return Poll::Ready(Err(anyhow::anyhow!(
                                "connection closed during the load"
                            )))
                        }
                        Ok(_) => {
                            read = true;
                            break;
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                        Err(e) => return Poll::Ready(Err(e.into())),
                    },
                }
            }
        }
        if read {
            Poll::Ready(Ok(()))
        } else {
            Poll::Pending
        }
    })
    .await
}

async fn drive<W: Workload>(
    mut conns: Vec<Conn>,
    w: std::sync::Arc<W>,
    conn_no: u64,
    in_flight: usize,
    deadline: Instant,
    max_ops: u64,
    interval: Option<Duration>,
) -> Result<Stats> {
    let mut starts = vec![None::<Instant>; in_flight];
    // Per stream: the operation's sequence number and the number of its request in flight.
    let mut ops = vec![(0u64, 0u32); in_flight];
    let mut free: Vec<i16> = (0..in_flight as i16).rev().collect();
    let mut stats = Stats::default();
    let mut sent = 0u64;
    let mut outs: Vec<BytesMut> = conns
        .iter()
        .map(|_| BytesMut::with_capacity(1 << 16))
        .collect();
    let nodes = conns.len();
    let mut body = Vec::with_capacity(256);
    let mut outstanding = 0usize;
    // Paced connections start at staggered offsets within one interval.
    let mut next_send = Instant::now()
        + interval.map_or(Duration::ZERO, |iv| {
            iv.mul_f64((conn_no % 64) as f64 / 64.0)
        });
    loop {
        let now = Instant::now();
        let open = now < deadline && sent < max_ops;
        if interval.is_some() && next_send + Duration::from_millis(50) < now {
            next_send = now;
        }
        while open && sent < max_ops {
            if interval.is_some() && next_send > now {
                break;
            }
            let Some(stream) = free.pop() else { break };
            body.clear();
            let seq = sent * 64 + conn_no;
            let op = w.request(seq, &mut body);
            let node = if nodes == 1 { 0 } else { w.node(seq) % nodes };
            outs[node].extend_from_slice(envelope(stream, op, &body).as_bytes());
            starts[stream as usize] = Some(now);
            ops[stream as usize] = (seq, 0);
            sent += 1;
            outstanding += 1;
            if let Some(iv) = interval {
                next_send += iv;
            }
        }
        for (conn, out) in conns.iter_mut().zip(&mut outs) {
            if !out.is_empty() {
                conn.sock.write_all(out).await?;
                out.clear();
            }
        }
        let paced_wait = interval.is_some() && open && !free.is_empty();
        if outstanding == 0 {
            if paced_wait {
                tokio::time::sleep_until(next_send.min(deadline).into()).await;
                continue;
            }
            break;
        }
        if paced_wait {
            tokio::select! {
                r = read_any(&mut conns) => r?,
                _ = tokio::time::sleep_until(next_send.min(deadline).into()) => continue,
            }
        } else {
            read_any(&mut conns).await?;
        }
        let done = Instant::now();
        for (conn, out) in conns.iter_mut().zip(&mut outs) {
            while let Some(e) = conn.dec.decode(&mut conn.buf)? {
                let s = e.header().stream.0;
                let Some(slot) = usize::try_from(s).ok().filter(|&i| i < in_flight) else {
                    continue;
                };
                if starts[slot].is_none() {
                    continue;
                }
                let (seq, step) = ops[slot];
                stats.requests += 1;
                body.clear();
                if let Some(op) = w.next(seq, step, &e, &mut body) {
                    // Sent with the next batch of writes, on the same socket and stream.
                    out.extend_from_slice(envelope(s, op, &body).as_bytes());
                    ops[slot] = (seq, step + 1);
                    continue;
                }
                let Some(start) = starts[slot].take() else {
                    continue;
                };
                if e.header().opcode == Opcode::ERROR {
                    stats.errors += 1;
                    let code =
                        ErrorView::parse(e.body(), ProtocolVersion::V4).map_or(-1, |v| v.code);
                    *stats.error_codes.entry(code).or_default() += 1;
                }
                stats.ops += 1;
                stats
                    .latencies_us
                    .push(done.duration_since(start).as_micros().min(u32::MAX as u128) as u32);
                free.push(s);
                outstanding -= 1;
            }
        }
    }
    Ok(stats)
}
