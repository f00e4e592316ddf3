//! Instructions autoprep spends per request it forwards, for callgrind: deterministic, unlike a
//! count taken from a proxy under load (whose figure moves with how many requests each socket
//! read brings).
//!
//! `hop_icount KIND TARGET N`: on one current-thread tokio runtime, a stand-in node
//! ([`autoprep_benches::standin`], answering every request at once), autoprep in front of it
//! (started as the tests and the binary start it, [`autoprep::server::spawn`], defaults of
//! [`autoprep::config::Config::for_upstream`]: rewrite and routing on) and a client that sends
//! lockstep batches of [`BATCH`] requests over loopback: one write of the whole batch, then every
//! answer read before the next batch. TARGET `proxy` sends them through autoprep, `direct`
//! straight to the stand-in. After a warm-up (the handshake, the cluster view's reads, the
//! shape's PREPARE, buffers grown), the function [`measured`] sends N requests (a multiple of
//! [`BATCH`]); run under `valgrind --tool=callgrind --collect-atstart=no
//! --toggle-collect=hop_icount::measured`, only it is counted, on the runtime's thread, with
//! every task the runtime runs meanwhile (the client, autoprep, the stand-in).
//!
//! Run with N and 2N and take the difference over N: what happens once (the runtime entered,
//! the last answers' bookkeeping) cancels out. The same difference `direct` is the client's
//! and the stand-in's own cost: `proxy` less `direct` is autoprep's instructions per request.
//! `scripts/hop-icount.sh` does exactly that.
//!
//! KIND:
//! - `execute`: an EXECUTE of an id the client prepared elsewhere (never through autoprep), with
//!   four bound values: passed through;
//! - `query`: a QUERY of a literal INSERT whose shape autoprep has already prepared (during the
//!   warm-up; the stand-in answers its PREPARE with bind-variable metadata): rewritten into an
//!   EXECUTE. The example checks that every measured QUERY reached the stand-in as an EXECUTE.
//!
//! The stand-in answers QUERY and EXECUTE with a void RESULT, so the client reads the same
//! answers on both paths. Unlike the `autoprep` binary, this process allocates with the system
//! allocator and has no tracing subscriber.
//!
//! With `OTEL_EXPORTER_OTLP_ENDPOINT` set, request tracing is on, configured by the standard
//! variables (`OTEL_TRACES_SAMPLER`, `_ARG`) with no slow-request rule. The exporter runs on a
//! thread of its own, outside [`measured`]: the count is the requests' path only (noting each
//! request's facts, the sampling decision, building the sampled spans and queuing them).
//!
//! `HOP_BATCH=1` sends each request on its own (see [`batch_len`]). `HOP_IDLE_THREAD=1` starts
//! a second thread that sleeps, standing for the admin server's thread of a deployed autoprep
//! (the Helm chart always has one): a process of one thread takes the kernel's single-threaded
//! fast path for file descriptors (no atomic reference count per system call), and the trace
//! exporter's thread would otherwise be charged with leaving it (about 600 ns per request when
//! each request is a read and a write of its own).
//!
//! With `HOP_CPU` set (and run natively), it also prints the process's CPU time per request
//! over the measured region, every thread's, kernel time included, and with tracing on the
//! export of the region's spans (flushed before the time is read): `scripts/hop-cpu.sh`
//! compares settings with it.

use autoprep::config::Config;
use autoprep_benches::procfs;
use autoprep_benches::standin::{self, COLUMNS, TABLE};
use autoprep_protocol::envelope::{Opcode, HEADER_LEN};
use autoprep_protocol::message::result::kind;
use bytes::{BufMut, BytesMut};
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::runtime::Runtime;

/// Requests per lockstep batch.
const BATCH: usize = 64;

/// Requests per batch: [`BATCH`], or `HOP_BATCH` (1 to 64; 1: each request written and
/// answered on its own, as from an application with one request in flight: every request
/// then costs autoprep its own reads and writes).
fn batch_len() -> usize {
    static LEN: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *LEN.get_or_init(|| {
        std::env::var("HOP_BATCH")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|n| (1..=BATCH).contains(n))
            .unwrap_or(BATCH)
    })
}

/// Batches before the measured ones.
const WARMUP_BATCHES: usize = 20;

/// The id the client EXECUTEs in `execute`: prepared "elsewhere", unknown to autoprep.
const CLIENT_ID: [u8; 16] = *b"client-prepared!";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Execute,
    Query,
}

/// A client on protocol v4 that sends the same batch again and again.
struct Client {
    sock: TcpStream,
    batch: Vec<u8>,
    input: BytesMut,
}

impl Client {
    async fn connect(addr: SocketAddr, kind: Kind) -> std::io::Result<Client> {
        let sock = TcpStream::connect(addr).await?;
        sock.set_nodelay(true)?;
        let mut c = Client {
            sock,
            batch: batch(kind),
            input: BytesMut::with_capacity(64 * 1024),
        };
        let mut startup = Vec::new();
        startup.put_u16(1);
        put_string(&mut startup, "CQL_VERSION");
        put_string(&mut startup, "3.0.0");
        let mut frame = Vec::new();
        put_frame(&mut frame, 0, Opcode::STARTUP, &startup);
        c.sock.write_all(&frame).await?;
        let answer = c.next_answer().await?;
        assert_eq!(answer[4], Opcode::READY.0, "STARTUP not answered READY");
        Ok(c)
    }

    /// The next whole answer.
    async fn next_answer(&mut self) -> std::io::Result<BytesMut> {
        loop {
            if let Some(head) = self.input.get(..HEADER_LEN) {
                let len = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) as usize;
                if self.input.len() >= HEADER_LEN + len {
                    return Ok(self.input.split_to(HEADER_LEN + len));
                }
            }
            if self.sock.read_buf(&mut self.input).await? == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
        }
    }

    /// Sends the batch `batches` times, each after every answer to the previous one came.
    async fn run(&mut self, batches: usize) -> std::io::Result<()> {
        for _ in 0..batches {
            self.sock.write_all(&self.batch).await?;
            for _ in 0..batch_len() {
                let a = self.next_answer().await?;
                let void = a.len() == HEADER_LEN + 4
                    && a[4] == Opcode::RESULT.0
                    && a[HEADER_LEN..] == kind::VOID.to_be_bytes();
                assert!(void, "not a void RESULT: {:?}", &a[..]);
            }
        }
        Ok(())
    }
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    out.put_u16(s.len() as u16);
    out.put_slice(s.as_bytes());
}

fn put_frame(out: &mut Vec<u8>, stream: i16, opcode: Opcode, body: &[u8]) {
    out.put_u8(0x04);
    out.put_u8(0);
    out.put_i16(stream);
    out.put_u8(opcode.0);
    out.put_u32(body.len() as u32);
    out.put_slice(body);
}

/// The [`batch_len`] requests of one batch, on streams 0 to 63, each with values of its own (of
/// the same lengths, so that every request costs the same).
fn batch(kind: Kind) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..batch_len() {
        let key = format!("s-{i:06}");
        let ts = 1_798_761_600_000i64 + i as i64;
        let value = 20.0 + i as f64 / 8.0;
        let n = 10 + i as i32;
        let mut body = Vec::new();
        let opcode = match kind {
            Kind::Execute => {
                body.put_u16(CLIENT_ID.len() as u16);
                body.put_slice(&CLIENT_ID);
                body.put_u16(0x0001); // ONE
                body.put_u8(0x01); // values
                body.put_u16(COLUMNS.len() as u16);
                for cell in [
                    key.as_bytes(),
                    &ts.to_be_bytes(),
                    &value.to_be_bytes(),
                    &n.to_be_bytes(),
                ] {
                    body.put_i32(cell.len() as i32);
                    body.put_slice(cell);
                }
                Opcode::EXECUTE
            }
            Kind::Query => {
                let names: Vec<&str> = COLUMNS.iter().map(|c| c.0).collect();
                let text = format!(
                    "INSERT INTO {}.{} ({}) VALUES ('{key}', {ts}, {value:.3}, {n})",
                    TABLE.0,
                    TABLE.1,
                    names.join(", ")
                );
                body.put_u32(text.len() as u32);
                body.put_slice(text.as_bytes());
                body.put_u16(0x0001); // ONE
                body.put_u8(0);
                Opcode::QUERY
            }
        };
        put_frame(&mut out, i as i16, opcode, &body);
    }
    out
}

/// The measured region: `batches` batches, everything the runtime runs meanwhile included.
#[inline(never)]
fn measured(rt: &Runtime, client: &mut Client, batches: usize) -> std::io::Result<()> {
    rt.block_on(client.run(batches))
}

fn usage() -> ! {
    eprintln!("usage: hop_icount execute|query proxy|direct N   (N a multiple of {BATCH})");
    std::process::exit(2)
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [kind, target, n] = args.as_slice() else {
        usage()
    };
    let kind = match kind.as_str() {
        "execute" => Kind::Execute,
        "query" => Kind::Query,
        _ => usage(),
    };
    let through_proxy = match target.as_str() {
        "proxy" => true,
        "direct" => false,
        _ => usage(),
    };
    let n: usize = n.parse().unwrap_or_else(|_| usage());
    let batches = n / batch_len();
    if batches == 0 || batches * batch_len() != n {
        usage();
    }
    if std::env::var_os("HOP_IDLE_THREAD").is_some_and(|v| v == "1") {
        // A second thread, as the admin server's in a deployed autoprep (see HOP_IDLE_THREAD).
        std::thread::spawn(|| loop {
            std::thread::park();
        });
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (node, seen) = rt.block_on(standin::spawn())?;
    let (addr, ctx) = if through_proxy {
        let mut cfg = Config::for_upstream(&node.to_string());
        if std::env::var_os("OTEL_EXPORTER_OTLP_ENDPOINT").is_some() {
            // Tracing on (scripts/hop-icount.sh TRACING=ratio): spans sampled by the ratio
            // alone; under callgrind every request would count as slow.
            cfg.tracing_slow_ms = 0;
        }
        let (addr, ctx) = rt.block_on(autoprep::server::spawn(cfg))?;
        (addr, Some(ctx))
    } else {
        (node, None)
    };
    let mut client = rt.block_on(Client::connect(addr, kind))?;
    rt.block_on(client.run(WARMUP_BATCHES))?;
    if let Some(ctx) = ctx.as_ref().filter(|c| c.tracing.enabled()) {
        // The warm-up's spans exported: the exporter's connection is open before the
        // measured region.
        ctx.tracing.flush(std::time::Duration::from_secs(30));
    }
    if let Some(ctx) = &ctx {
        // As in front of a one-node cluster: its view read, nothing to route.
        let nodes = ctx.cluster.current().map(|v| v.node_count());
        anyhow::ensure!(
            nodes == Some(1) && !ctx.cluster.may_route(),
            "autoprep's cluster view after the warm-up: {nodes:?} nodes"
        );
    }
    let before = seen.counts();
    let process_cpu_ns = procfs::own_cpu_ns;
    let exporter_cpu_ns = || procfs::threads_cpu_ns(std::process::id(), "autoprep-otel");
    let cpu = process_cpu_ns();
    let exporter_cpu = exporter_cpu_ns();
    measured(&rt, &mut client, batches)?;
    if let Some(ctx) = ctx.as_ref().filter(|c| c.tracing.enabled()) {
        // Every span of the measured requests exported, on the exporter's thread, before the
        // CPU time is read (HOP_CPU): the flush wakes the exporter and waits for its export.
        ctx.tracing.flush(std::time::Duration::from_secs(30));
    }
    let cpu = process_cpu_ns() - cpu;
    let exporter_cpu = exporter_cpu_ns()
        .zip(exporter_cpu)
        .map_or(0, |(b, a)| b.saturating_sub(a));
    let after = seen.counts();
    if std::env::var_os("HOP_CPU").is_some() {
        // Natively (not under callgrind): the process's CPU time per request over the
        // measured region, every thread's (the exporter's included), kernel time included.
        println!("cpu_ns_per_request {:.1}", cpu as f64 / n as f64);
        if let Some(ctx) = &ctx {
            let c = ctx.tracing.counts();
            eprintln!(
                "hop_icount: spans exported {}, dropped {}, failed {}; the exporter's thread \
                 {:.1} ns per request",
                c.exported,
                c.dropped,
                c.failed,
                exporter_cpu as f64 / n as f64
            );
        }
    }
    let (queries, prepares, executes) =
        (after.0 - before.0, after.1 - before.1, after.2 - before.2);
    eprintln!(
        "hop_icount: {n} {kind:?} {}: the stand-in saw {queries} QUERY, {prepares} PREPARE, \
         {executes} EXECUTE",
        if through_proxy {
            "through autoprep"
        } else {
            "direct"
        }
    );
    let expected = match kind {
        Kind::Query if !through_proxy => (n as u64, 0, 0),
        _ => (0, 0, n as u64),
    };
    anyhow::ensure!(
        (queries, prepares, executes) == expected,
        "the stand-in should have seen {expected:?} (QUERY, PREPARE, EXECUTE)"
    );
    Ok(())
}
