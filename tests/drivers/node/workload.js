'use strict';
/**
 * The legacy workload: schema, unprepared statements with literals of many types, paging,
 * prepared statements, batches (text and the driver's API), a schema change. Every answer is
 * checked against what the workload wrote, and recorded as an observation, so that the run
 * through autoprep can also be compared line by line with the control run against the node.
 */
const { types } = require('cassandra-driver');
const render = require('./render');

/** Rows of the paged partition. */
const ROWS = 100;
/** The page size of the paged reads. */
const PAGE = 10;
/** How often a repeated statement is sent: enough for autoprep to prepare its shape (it does so
 * in the background on the Nth sighting) and then rewrite it. */
const REPEAT = 4;

const COLUMNS = ['ck', 'name', 'n', 'big', 'd', 'id', 'at', 'tags', 'attrs', 'data'];

/** The values of row `i` (0..ROWS-1) of partition 1, in COLUMNS order. */
function row(i) {
  const name = `name-${i}${i % 7 === 0 ? " it's" : ''}`;
  const n = i * 3 - 150;
  const big = types.Long.fromNumber(5000000000).multiply(i - 50).add(i);
  const d = (i - 50) / 8;
  const id = types.Uuid.fromString(
    `00000000-0000-4000-8000-${(i * 7919 + 1).toString(16).padStart(12, '0')}`);
  const at = new Date(1700000000000 + i * 86400123);
  const tags = i % 2 === 0 ? [`tag${i}`, "x'y"] : [`tag${i}`];
  const attrs = { a: i, b: 0 - i };
  const data = Buffer.from([i & 0xff, (i + 1) & 0xff, 0xff]);
  return [i, name, n, big, d, id, at, tags, attrs, data];
}

/** A CQL literal for a value of {@link row}. */
function literal(v) {
  if (typeof v === 'string') {
    return `'${v.replace(/'/g, "''")}'`;
  }
  if (v instanceof Date) {
    // 2023-11-14 22:13:20.123+0000: with a zone, so autoprep may rewrite it.
    return `'${v.toISOString().replace('T', ' ').replace('Z', '+0000')}'`;
  }
  if (Buffer.isBuffer(v)) {
    return `0x${v.toString('hex')}`;
  }
  if (Array.isArray(v)) {
    return `[${v.map(literal).join(', ')}]`;
  }
  if (v instanceof types.Long || v instanceof types.Uuid) {
    return v.toString();
  }
  if (typeof v === 'object') {
    return `{${Object.keys(v).map((k) => `${literal(k)}: ${literal(v[k])}`).join(', ')}}`;
  }
  return String(v);
}

class Workload {
  /**
   * @param {import('cassandra-driver').Client} client
   * @param {string} ks the keyspace (dropped and created)
   * @param {import('./checks').Checks} checks
   * @param {string} label prefixes this run's check names
   */
  constructor(client, ks, checks, label) {
    this.client = client;
    this.ks = ks;
    this.checks = checks;
    this.label = label;
    this.observations = [];
  }

  /** Runs the whole workload; returns what it observed, in order. */
  async run() {
    await this.step('schema', () => this.schema());
    await this.step('unprepared writes', () => this.unpreparedWrites());
    await this.step('unprepared reads', () => this.unpreparedReads());
    await this.step('prepared', () => this.prepared());
    await this.step('batches', () => this.batches());
    await this.step('schema change', () => this.schemaChange());
    return this.observations;
  }

  async step(name, fn) {
    const t0 = process.hrtime.bigint();
    await fn();
    console.log(`${this.label}: ${name} took ${(process.hrtime.bigint() - t0) / 1000000n} ms`);
  }

  async schema() {
    const ks = this.ks;
    await this.exec(`DROP KEYSPACE IF EXISTS ${ks}`);
    await this.exec(`CREATE KEYSPACE ${ks} WITH replication = `
      + "{'class': 'SimpleStrategy', 'replication_factor': 1}");
    await this.exec(`CREATE TABLE ${ks}.items (pk int, ck int, name text, n int, big bigint,`
      + ' d double, id uuid, at timestamp, tags list<text>, attrs map<text, int>, data blob,'
      + ' PRIMARY KEY (pk, ck))');
  }

  async unpreparedWrites() {
    const ks = this.ks;
    for (let i = 0; i < ROWS; i++) {
      await this.exec(`INSERT INTO ${ks}.items (pk, ${COLUMNS.join(', ')}) VALUES (1, `
        + `${row(i).map(literal).join(', ')})`);
    }
    // UPDATE and DELETE with literals, on rows of their own.
    for (let i = 0; i < REPEAT; i++) {
      await this.exec(`INSERT INTO ${ks}.items (pk, ck, name, n) VALUES (6, ${i}, 'u${i}', ${i})`);
      await this.exec(`UPDATE ${ks}.items SET n = ${i * 1000}, name = 'updated ${i}' `
        + `WHERE pk = 6 AND ck = ${i}`);
    }
    await this.exec(`DELETE FROM ${ks}.items WHERE pk = 6 AND ck = 1`);
    await this.exec(`DELETE name FROM ${ks}.items WHERE pk = 6 AND ck = 2`);
    this.checks.equal(`${this.label}: UPDATE/DELETE with literals`, [
      render.values(0, 'updated 0', 0),
      render.values(2, null, 2000),
      render.values(3, 'updated 3', 3000),
    ], this.rows(await this.exec(`SELECT ck, name, n FROM ${ks}.items WHERE pk = 6`)));
  }

  async unpreparedReads() {
    const ks = this.ks;
    const all = [];
    for (let i = 0; i < ROWS; i++) {
      all.push(render.values(...row(i)));
    }
    for (let round = 0; round < REPEAT; round++) {
      await this.paged(`${this.label}: paged unprepared SELECT (round ${round})`,
        `SELECT ${COLUMNS.join(', ')} FROM ${ks}.items WHERE pk = 1`, [], { fetchSize: PAGE },
        all);
    }
    // Ranges and IN lists with literals: one shape, different literals each time.
    for (let j = 0; j < REPEAT; j++) {
      const from = 10 + 20 * j;
      let rs = await this.exec(`SELECT ck, n FROM ${ks}.items WHERE pk = 1 AND ck >= ${from} `
        + `AND ck < ${from + 5}`);
      let expected = [];
      for (let i = from; i < from + 5; i++) {
        expected.push(render.values(i, row(i)[2]));
      }
      this.checks.equal(`${this.label}: SELECT range ${from}`, expected, this.rows(rs));
      const inList = [j, j + 30, j + 60, j + 90];
      rs = await this.exec(`SELECT ck, big, at FROM ${ks}.items WHERE pk = 1 `
        + `AND ck IN (${inList.join(', ')})`);
      expected = inList.map((i) => render.values(i, row(i)[3], row(i)[6]));
      this.checks.equal(`${this.label}: SELECT IN ${inList}`, expected, this.rows(rs));
      const r = row(j * 7);
      rs = await this.exec(`SELECT ck FROM ${ks}.items WHERE pk = 1 AND ck = ${j * 7} `
        + `AND name = ${literal(r[1])} ALLOW FILTERING`);
      this.checks.equal(`${this.label}: SELECT with a text literal`, [render.values(j * 7)],
        this.rows(rs));
    }
  }

  async prepared() {
    const ks = this.ks;
    const insert = `INSERT INTO ${ks}.items (pk, ${COLUMNS.join(', ')}) `
      + 'VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)';
    for (let i = 0; i < 20; i++) {
      await this.client.execute(insert, [2, ...row(i)], { prepare: true });
    }
    const point = `SELECT ${COLUMNS.join(', ')} FROM ${ks}.items WHERE pk = ? AND ck = ?`;
    const all = [];
    for (let i = 0; i < 20; i++) {
      all.push(render.values(...row(i)));
      const rs = await this.client.execute(point, [2, i], { prepare: true });
      this.checks.equal(`${this.label}: prepared point SELECT ${i}`, [all[i]], this.rows(rs));
    }
    await this.paged(`${this.label}: paged prepared SELECT`,
      `SELECT ${COLUMNS.join(', ')} FROM ${ks}.items WHERE pk = ?`, [2],
      { prepare: true, fetchSize: 7 }, all);
  }

  async batches() {
    const ks = this.ks;
    const expected3 = [];
    const expected4 = [];
    const expected5 = [];
    for (let j = 0; j < REPEAT; j++) {
      const a = 2 * j;
      const b = 2 * j + 1;
      // Text batch: BEGIN BATCH ... APPLY BATCH with literals, one QUERY.
      await this.exec(`BEGIN BATCH INSERT INTO ${ks}.items (pk, ck, name, n) VALUES `
        + `(3, ${a}, 'text batch ${a}', ${a * 11}); INSERT INTO ${ks}.items (pk, ck, name, n) `
        + `VALUES (3, ${b}, 'text batch ${b}', ${b * 11}); APPLY BATCH`);
      expected3.push(render.values(a, `text batch ${a}`, a * 11),
        render.values(b, `text batch ${b}`, b * 11));
      // The driver's batch API with unprepared children carrying literals (a BATCH message).
      await this.client.batch([
        `INSERT INTO ${ks}.items (pk, ck, name, n) VALUES (4, ${a}, 'api batch ${a}', ${0 - a})`,
        { query: `UPDATE ${ks}.items SET name = 'api batch ${b}', n = ${-b} `
          + `WHERE pk = 4 AND ck = ${b}` },
      ], { logged: true });
      expected4.push(render.values(a, `api batch ${a}`, 0 - a),
        render.values(b, `api batch ${b}`, -b));
      // The driver's batch API with prepared children and bound values, unlogged.
      await this.client.batch([
        { query: `INSERT INTO ${ks}.items (pk, ck, name, n) VALUES (?, ?, ?, ?)`,
          params: [5, a, `prepared batch ${a}`, a] },
        { query: `INSERT INTO ${ks}.items (pk, ck, name, n) VALUES (5, ?, ?, 0)`,
          params: [b, `prepared batch ${b}`] },
      ], { prepare: true, logged: false });
      expected5.push(render.values(a, `prepared batch ${a}`, a),
        render.values(b, `prepared batch ${b}`, 0));
    }
    this.checks.equal(`${this.label}: text BEGIN BATCH rows`, expected3,
      this.rows(await this.exec(`SELECT ck, name, n FROM ${ks}.items WHERE pk = 3`)));
    this.checks.equal(`${this.label}: driver batch API rows`, expected4,
      this.rows(await this.exec(`SELECT ck, name, n FROM ${ks}.items WHERE pk = 4`)));
    this.checks.equal(`${this.label}: prepared batch rows`, expected5,
      this.rows(await this.exec(`SELECT ck, name, n FROM ${ks}.items WHERE pk = 5`)));
  }

  async schemaChange() {
    const ks = this.ks;
    const star = `SELECT * FROM ${ks}.items WHERE pk = 3 AND ck = 1`;
    const before = 'pk int, ck int, at timestamp, attrs map<varchar, int>, big bigint, '
      + 'd double, data blob, id uuid, n int, name varchar, tags list<varchar>';
    const after = 'pk int, ck int, at timestamp, attrs map<varchar, int>, big bigint, '
      + 'd double, data blob, extra varchar, id uuid, n int, name varchar, tags list<varchar>';
    const r31 = [3, 1, null, null, null, null, null, null, 11, 'text batch 1', null];
    const driverPrepared = `SELECT * FROM ${ks}.items WHERE pk = ? AND ck = ?`;
    await this.client.execute(driverPrepared, [3, 1], { prepare: true });
    for (let i = 0; i < REPEAT; i++) {
      const rs = await this.exec(star);
      this.checks.equal(`${this.label}: SELECT * columns before ALTER`, before,
        render.columns(rs.columns));
      this.checks.equal(`${this.label}: SELECT * before ALTER`, [render.values(...r31)],
        this.rows(rs));
    }
    await this.exec(`ALTER TABLE ${ks}.items ADD extra text`);
    const r31null = [3, 1, null, null, null, null, null, null, null, 11, 'text batch 1', null];
    let rs = await this.exec(star);
    this.checks.equal(`${this.label}: SELECT * columns after ALTER`, after,
      render.columns(rs.columns));
    this.checks.equal(`${this.label}: SELECT * after ALTER`, [render.values(...r31null)],
      this.rows(rs));
    // The driver's own schema metadata followed the change (SCHEMA_CHANGE came through).
    const table = await this.client.metadata.getTable(ks, 'items');
    const known = !!(table && table.columnsByName.extra);
    this.checks.that(`${this.label}: driver metadata knows the new column`, known,
      'items.extra missing from the driver\'s schema metadata');
    this.observations.push(`metadata knows extra: ${known}`);
    for (let i = 0; i < REPEAT; i++) {
      await this.exec(`UPDATE ${ks}.items SET extra = 'added ${i}' WHERE pk = 3 AND ck = 1`);
      const r = r31null.slice();
      r[7] = `added ${i}`;
      rs = await this.exec(star);
      this.checks.equal(`${this.label}: SELECT * columns after ALTER and UPDATE`, after,
        render.columns(rs.columns));
      this.checks.equal(`${this.label}: SELECT * sees the new column`, [render.values(...r)],
        this.rows(rs));
    }
    // A statement the driver prepared before the change: recorded and compared with the control
    // (protocol v4 has no way to tell the driver its result metadata changed).
    rs = await this.client.execute(driverPrepared, [3, 1], { prepare: true });
    this.observations.push(`driver-prepared SELECT * after ALTER: ${render.columns(rs.columns)}`
      + ` / ${JSON.stringify(this.rows(rs))}`);
  }

  /** Executes an unprepared statement (a QUERY with its literals inline). */
  exec(cql) {
    return this.client.execute(cql);
  }

  /** The rows of a result, rendered, also recorded as an observation. */
  rows(rs) {
    const cols = rs.columns || [];
    const out = rs.rows ? rs.rows.map((r) => render.row(r, cols)) : [];
    this.observations.push(`${render.columns(cols)} => ${JSON.stringify(out)}`);
    return out;
  }

  /**
   * Reads a statement page by page: every page but the last holds exactly the page size, the rows
   * arrive in order and are `expected`. Records the page sizes.
   */
  async paged(what, cql, params, options, expected) {
    const got = [];
    const sizes = [];
    let pageState;
    for (;;) {
      const rs = await this.client.execute(cql, params, { ...options, pageState });
      for (const r of rs.rows) {
        got.push(render.row(r, rs.columns));
      }
      sizes.push(rs.rows.length);
      pageState = rs.pageState;
      if (!pageState) {
        break;
      }
      this.checks.equal(`${what}: size of page ${sizes.length}`, options.fetchSize,
        rs.rows.length);
    }
    this.observations.push(`${what.slice(what.indexOf(': ') + 2)} pages ${sizes}`);
    this.checks.equal(`${what}: row count`, expected.length, got.length);
    for (let i = 0; i < Math.max(expected.length, got.length); i++) {
      this.checks.equal(`${what}: row ${i}`, i < expected.length ? expected[i] : '(none)',
        i < got.length ? got[i] : '(none)');
    }
    this.checks.that(`${what}: more than one page`, sizes.length > 1, `pages ${sizes}`);
  }
}

/** Observations with the keyspace name left out, so the control compares equal. */
function neutral(observations, ks) {
  return observations.map((o) => o.split(ks).join('<ks>'));
}

module.exports = { Workload, neutral, REPEAT };
