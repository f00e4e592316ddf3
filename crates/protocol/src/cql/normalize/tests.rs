//! Unit tests of the normalizer.
use super::*;

#[test]
fn explore() {
    let cases = [
        "INSERT INTO ks.t (a, b, c) VALUES (1, 'x''y', null);",
        "insert into t (a,b) values (?, 5) using ttl 10 and timestamp 123",
        "SELECT a, b + 1, 'lit' FROM t WHERE k = 'x' AND c IN (1, 2, 3) LIMIT 10",
        "SELECT * FROM t WHERE (a, b) IN ((1, 2), (3, 4)) AND token(k) > -5",
        "UPDATE t SET c = c -1 WHERE k = 1",
        "UPDATE t SET c = c + 1, l = [1, 2] + l, m['k'] = 'v', u.f = 3 WHERE k = 1 IF x = null",
        "DELETE m['a'], l[0] FROM t USING TIMESTAMP 5 WHERE k = 1 IF EXISTS",
        "BEGIN BATCH INSERT INTO t (a) VALUES (1) UPDATE t SET b = 2 WHERE a = 1; APPLY BATCH;",
        "SELECT * FROM t WHERE k = now() AND v = [1, ?, 3] AND m = {'a': 1, 'b': :x}",
        "INSERT INTO t JSON '{\"a\": 1}' DEFAULT UNSET",
        "SELECT * FROM t WHERE u = {a: 1, \"B\": 'x'} AND t = (1, 'a') ORDER BY v ANN OF [1.0, 2.0] LIMIT 3",
        "USE \"MyKs\"",
        "CREATE TABLE x (a int PRIMARY KEY)",
        "SELECT * FROM t",
        "SELECT * FROM t WHERE k = (int) 5 AND c = -5 AND d = - 5 AND e = 1 + 2",
        "SELECT count(*) FROM t WHERE k = 0x00ff AND d = 1h30m AND u = 550e8400-e29b-41d4-a716-446655440000",
    ];
    for c in cases {
        println!("{c}\n  => {:?}", normalize_str(c));
    }
}
