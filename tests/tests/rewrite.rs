//! The auto-prepare rewrite against the real server: literal-bearing statements become
//! EXECUTEs of prepared statements, the client sees what it would see directly, and the server
//! counts prepared executions.

use autoprep::config::Config;
use autoprep_protocol::compression::Compression;
use autoprep_protocol::envelope::ProtocolVersion;
use autoprep_tests::{proxy_ctx, upstream, Client, Response};
use std::sync::atomic::Ordering;

fn metric(c: &mut Client, name: &str) -> i64 {
    let rows = c
        .query(&format!(
            "SELECT value FROM system_views.cql_metrics WHERE name = '{name}'"
        ))
        .unwrap()
        .rows()
        .unwrap();
    let cell = rows.rows[0][0].clone().unwrap();
    // value is a double
    f64::from_be_bytes(cell.try_into().unwrap()) as i64
}

fn setup(direct: &mut Client) {
    for q in [
        "CREATE KEYSPACE IF NOT EXISTS autoprep_rw WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
        "CREATE TABLE IF NOT EXISTS autoprep_rw.ts (sensor text, at timestamp, value double, tags set<text>, PRIMARY KEY (sensor, at))",
        "CREATE TABLE IF NOT EXISTS autoprep_rw.kv (k int PRIMARY KEY, v text)",
    ] {
        direct.query(q).unwrap().ok().unwrap();
    }
}

#[test]
fn literal_statements_run_as_prepared_and_answer_as_directly() {
    let direct_addr = upstream();
    let mut direct = Client::connect(&direct_addr).unwrap();
    setup(&mut direct);
    let mut cfg = Config::for_upstream(&direct_addr);
    cfg.admission_threshold = 1;
    let (addr, ctx) = proxy_ctx(cfg);
    let addr = addr.to_string();
    for (v, c) in [
        (ProtocolVersion::V4, None),
        (ProtocolVersion::V4, Some(Compression::Lz4)),
        (ProtocolVersion::V5, None),
        (ProtocolVersion::V5, Some(Compression::Lz4)),
    ] {
        let mut through = Client::connect_with(&addr, v, c).unwrap();
        let mut again = Client::connect_with(&direct_addr, v, c).unwrap();
        through.query("USE autoprep_rw").unwrap().ok().unwrap();
        again.query("USE autoprep_rw").unwrap().ok().unwrap();
        let before = ctx.metrics.queries_rewritten.load(Ordering::Relaxed);
        let prepared_before = metric(&mut direct, "prepared_statements_executed");
        for i in 0..50 {
            let q = format!(
                "INSERT INTO ts (sensor, at, value, tags) VALUES ('s-{}', '2026-01-02 03:04:{:02}+0000', {}.5, {{'a', 'b{}'}})",
                i % 5,
                i % 60,
                i,
                i
            );
            assert_eq!(through.query(&q).unwrap(), Response::Void, "{q}");
        }
        for i in 0..5 {
            for q in [
                format!("SELECT * FROM ts WHERE sensor = 's-{i}'"),
                format!("SELECT sensor, value FROM ts WHERE sensor = 's-{i}' AND at > '2026-01-02 03:04:05+0000' LIMIT 3"),
                format!("SELECT * FROM ts WHERE sensor IN ('s-{i}', 's-{}')", i + 1),
                format!("SELECT * FROM ts WHERE sensor = 'nope-{i}'"),
                format!("SELECT * FROM ts WHERE sensor = {i}"),
                format!("SELECT * FROM missing_table WHERE k = {i}"),
            ] {
                let a = again.query(&q).unwrap();
                let b = through.query(&q).unwrap();
                assert_eq!(a, b, "{v:?} {c:?} {q}");
            }
        }
        let rewritten = ctx.metrics.queries_rewritten.load(Ordering::Relaxed) - before;
        let prepared = metric(&mut direct, "prepared_statements_executed") - prepared_before;
        assert!(
            rewritten >= 60,
            "only {rewritten} rewritten on {v:?} {c:?}: {:?} prepares ok {} failed {}",
            ctx.metrics.passthrough_reasons(),
            ctx.metrics.prepares_ok.load(Ordering::Relaxed),
            ctx.metrics.prepares_failed.load(Ordering::Relaxed)
        );
        assert!(
            prepared >= rewritten as i64,
            "server saw {prepared} prepared executions for {rewritten} rewrites"
        );
    }
    assert!(ctx.metrics.prepares_ok.load(Ordering::Relaxed) >= 3);
    assert_eq!(ctx.metrics.unprepared_recoveries.load(Ordering::Relaxed), 0);
}

#[test]
fn batches_of_text_children_become_batches_of_prepared_children() {
    use autoprep_protocol::envelope::Opcode;
    use autoprep_protocol::message::batch::{encode_batch, BatchChild, BatchParams, BatchQuery};
    use autoprep_protocol::message::query::Values;
    let direct_addr = upstream();
    let mut direct = Client::connect(&direct_addr).unwrap();
    setup(&mut direct);
    let mut cfg = Config::for_upstream(&direct_addr);
    cfg.admission_threshold = 1;
    let (addr, ctx) = proxy_ctx(cfg);
    for v in [ProtocolVersion::V4, ProtocolVersion::V5] {
        let mut through = Client::connect_with(&addr.to_string(), v, None).unwrap();
        let before = ctx.metrics.queries_rewritten.load(Ordering::Relaxed);
        for round in 0..4 {
            let texts: Vec<String> = (0..3)
                .map(|i| {
                    format!(
                        "INSERT INTO autoprep_rw.kv (k, v) VALUES ({}, 'batch {round}')",
                        1000 + i
                    )
                })
                .collect();
            let raw = autoprep_tests::client::encode_values(&[Some(&7i32.to_be_bytes())]).unwrap();
            let mut children: Vec<BatchChild<'_>> = texts
                .iter()
                .map(|t| BatchChild {
                    query: BatchQuery::Text(t.as_bytes()),
                    values: Values {
                        count: 0,
                        named: false,
                        raw: &[],
                    },
                })
                .collect();
            // One child with a client marker mixed with a literal.
            children.push(BatchChild {
                query: BatchQuery::Text(b"UPDATE autoprep_rw.kv SET v = 'marker' WHERE k = ?"),
                values: Values {
                    count: 1,
                    named: false,
                    raw: &raw,
                },
            });
            let mut body = Vec::new();
            let params = BatchParams {
                consistency: 1,
                ..Default::default()
            };
            encode_batch(v, 0, &children, &params, &mut body).unwrap();
            let e = through.request(Opcode::BATCH, &body).unwrap();
            assert_eq!(through.decode(&e).unwrap(), Response::Void);
            // The text form goes through the QUERY path.
            let q = format!("BEGIN BATCH INSERT INTO autoprep_rw.kv (k, v) VALUES (2000, 'text {round}'); UPDATE autoprep_rw.kv SET v = 'u{round}' WHERE k = 2001; APPLY BATCH");
            assert_eq!(through.query(&q).unwrap(), Response::Void);
            let rows = direct
                .query(
                    "SELECT k, v FROM autoprep_rw.kv WHERE k IN (1000, 1001, 1002, 7, 2000, 2001)",
                )
                .unwrap()
                .rows()
                .unwrap();
            let vals: Vec<String> = rows
                .rows
                .iter()
                .map(|r| String::from_utf8(r[1].clone().unwrap()).unwrap())
                .collect();
            assert!(vals.contains(&format!("batch {round}")), "{vals:?}");
            assert!(vals.contains(&format!("text {round}")), "{vals:?}");
            assert!(vals.contains(&format!("u{round}")), "{vals:?}");
            assert!(vals.contains(&"marker".to_string()), "{vals:?}");
        }
        let rewritten = ctx.metrics.queries_rewritten.load(Ordering::Relaxed) - before;
        assert!(
            rewritten >= 4,
            "only {rewritten} batches rewritten on {v:?}: {:?}",
            ctx.metrics.passthrough_reasons()
        );
    }
}
