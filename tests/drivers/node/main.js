'use strict';
/**
 * The Node.js cassandra-driver through autoprep: runs the legacy workload through the proxy and,
 * as a control, directly against the node; checks every answer, compares the two runs, compares
 * error messages, checks that the driver stayed on the proxy and that autoprep rewrote queries.
 *
 * Environment: AUTOPREP_DRIVER_TARGET (autoprep, host:port), AUTOPREP_DRIVER_ADMIN (its admin
 * endpoint), AUTOPREP_DRIVER_DIRECT (the node, for the control; default 127.0.0.1:9042).
 * Exit status 0 when everything matched, 1 otherwise.
 */
const cassandra = require('cassandra-driver');
const { Checks } = require('./checks');
const { Workload, neutral, REPEAT } = require('./workload');
const topology = require('./topology');

const KEYSPACE = 'drivers_node';
const APP_PROXIED = 'autoprep-drivers-node';
const APP_DIRECT = 'autoprep-drivers-node-direct';
const LOCAL_DC = 'datacenter1';

/**
 * A client with generous timeouts (the CI machine is small and busy) and the driver's default
 * load-balancing policy: through autoprep, topology rewriting alone keeps it on the proxy.
 */
function open(contact, applicationName) {
  const options = {
    contactPoints: [contact],
    localDataCenter: LOCAL_DC,
    applicationName,
    socketOptions: { connectTimeout: 15000, readTimeout: 60000 },
    protocolOptions: { maxSchemaAgreementWaitSeconds: 30 },
  };
  const client = new cassandra.Client(options);
  client.on('log', (level, className, message) => {
    if (level === 'warning' || level === 'error') {
      console.log(`[${applicationName} ${level}] ${className}: ${message}`);
    }
  });
  return client;
}

/** The error `cql` raises, as "code 0x2200 ResponseError: message", or null. */
async function error(client, cql) {
  try {
    await client.execute(cql);
    return null;
  } catch (e) {
    const code = e.code === undefined ? '' : `code 0x${e.code.toString(16)} `;
    return `${code}${e.name}: ${e.message}`;
  }
}

/** Invalid statements: through autoprep the error (code and message) is the node's own. */
async function errors(proxied, direct, checks) {
  const ks = KEYSPACE;
  const bad = [
    `SELECT nosuchcolumn FROM ${ks}.items WHERE pk = 1`,
    `INSERT INTO ${ks}.items (pk, ck, n) VALUES (1, 1, 'notanint')`,
    `SELEC * FROM ${ks}.items`,
    `SELECT * FROM ${ks}.items WHERE pk = 1 AND n = 5`,
    `INSERT INTO ${ks}.nosuchtable (pk) VALUES (1)`,
  ];
  // A shape autoprep prepares and rewrites (its valid form runs first), then a value the server
  // rejects only when it executes.
  for (let i = 0; i < REPEAT; i++) {
    await proxied.execute(`INSERT INTO ${ks}.items (pk, ck, n) VALUES (9, ${i}, 1) USING TTL 1000`);
  }
  bad.push(`INSERT INTO ${ks}.items (pk, ck, n) VALUES (9, 1, 1) USING TTL -1`);
  for (const cql of bad) {
    const expected = await error(direct, cql);
    checks.that(`direct: error for ${cql}`, expected !== null, 'no error');
    // Several times: the first sightings pass through, later ones may be rewritten.
    for (let i = 0; i < REPEAT; i++) {
      checks.equal(`autoprep: error for ${cql} (try ${i})`, expected, await error(proxied, cql));
    }
  }
}

/** The sum of autoprep's samples of `name` whose labels contain `label`. */
async function metricSum(admin, name, label) {
  const samples = await metricSamples(admin, name);
  return Object.entries(samples).filter(([k]) => k.includes(label))
    .reduce((s, [, v]) => s + v, 0);
}

async function metricSamples(admin, name) {
  const resp = await fetch(`http://${admin}/metrics`, { signal: AbortSignal.timeout(10000) });
  if (resp.status !== 200) {
    throw new Error(`GET /metrics answered ${resp.status}`);
  }
  const out = {};
  for (const line of (await resp.text()).split('\n')) {
    if (line.startsWith('#') || !line.startsWith(name)) {
      continue;
    }
    const sp = line.lastIndexOf(' ');
    const rest = line.slice(name.length, sp);
    if (rest !== '' && !rest.startsWith('{')) {
      continue; // another metric whose name starts with this one
    }
    out[rest] = Number(line.slice(sp + 1));
  }
  return out;
}

function compare(viaProxy, control, checks) {
  checks.equal('autoprep vs direct: number of observations', control.length, viaProxy.length);
  for (let i = 0; i < Math.min(viaProxy.length, control.length); i++) {
    checks.equal(`autoprep vs direct: observation ${i}`, control[i], viaProxy[i]);
  }
}

async function main() {
  const target = process.env.AUTOPREP_DRIVER_TARGET;
  if (!target) {
    console.error('AUTOPREP_DRIVER_TARGET is unset (tests/drivers/node/run.sh sets it)');
    return 2;
  }
  const admin = process.env.AUTOPREP_DRIVER_ADMIN;
  const node = process.env.AUTOPREP_DRIVER_DIRECT || '127.0.0.1:9042';
  const checks = new Checks();
  const t0 = Date.now();
  const rewrittenBefore = admin
    ? await metricSum(admin, 'autoprep_queries_total', 'outcome="rewritten"') : 0;

  const proxied = open(target, APP_PROXIED);
  const direct = open(node, APP_DIRECT);
  try {
    await proxied.connect();
    await direct.connect();
    console.log(`sessions open after ${Date.now() - t0} ms`);
    console.log(`node cassandra-driver ${cassandra.version}, protocol `
      + `v${proxied.controlConnection.protocolVersion} through autoprep at ${target}, control `
      + `at ${node}`);
    const viaProxy = await new Workload(proxied, KEYSPACE, checks, 'autoprep').run();
    const control = await new Workload(direct, `${KEYSPACE}_direct`, checks, 'direct').run();
    compare(neutral(viaProxy, KEYSPACE), neutral(control, `${KEYSPACE}_direct`), checks);
    const te = Date.now();
    await errors(proxied, direct, checks);
    console.log(`errors took ${Date.now() - te} ms`);
    topology.driverView(proxied, target, checks);
    await topology.serverView(direct, APP_PROXIED, checks);
    await direct.execute(`DROP KEYSPACE IF EXISTS ${KEYSPACE}_direct`);
  } finally {
    await proxied.shutdown();
    await direct.shutdown();
  }
  if (!admin) {
    checks.fail('AUTOPREP_DRIVER_ADMIN is unset: cannot check that autoprep rewrote queries');
  } else {
    const rewritten = await metricSum(admin, 'autoprep_queries_total', 'outcome="rewritten"')
      - rewrittenBefore;
    console.log(`autoprep_queries_total during the run: rewritten +${rewritten}; all series now `
      + JSON.stringify(await metricSamples(admin, 'autoprep_queries_total')));
    checks.that('autoprep rewrote queries of the workload', rewritten > 0,
      'autoprep_queries_total{outcome="rewritten"} did not grow');
  }

  const ms = Date.now() - t0;
  console.log('');
  if (checks.failures.length === 0) {
    console.log(`node driver: ${checks.passed} checks passed in ${ms} ms`);
  } else {
    console.log(`node driver: ${checks.failures.length} MISMATCH(ES), ${checks.passed} checks `
      + `passed, in ${ms} ms:`);
    for (const f of checks.failures) {
      console.log(`  - ${f}`);
    }
  }
  console.log(`node: ${checks.passed} passed, ${checks.failures.length} failed`);
  return checks.failures.length === 0 ? 0 : 1;
}

main().then((code) => {
  process.exitCode = code;
}, (e) => {
  console.error('node driver: the workload failed:', e);
  process.exitCode = 1;
});
