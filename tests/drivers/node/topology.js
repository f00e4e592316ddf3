'use strict';
/**
 * Checking from both ends that the driver, with its default load-balancing policy, stayed on
 * autoprep (topology rewriting is what keeps it there).
 */
const fs = require('node:fs');

/** The driver's own view: every host it keeps connections to is autoprep. */
function driverView(client, proxy, checks) {
  const state = client.getState();
  let toProxy = 0;
  for (const host of state.getConnectedHosts()) {
    const open = state.getOpenConnections(host);
    console.log(`driver host ${host.address} open ${open}`);
    if (host.address === proxy) {
      toProxy += open;
    } else {
      checks.equal(`driver: connections to ${host.address} (not autoprep)`, 0, open);
    }
  }
  for (const host of client.hosts.values()) {
    console.log(`driver knows host ${host.address} (${host.datacenter})`);
  }
  checks.that('driver: connections to autoprep', toProxy > 0, 'none open');
}

/**
 * The server's view (system_views.clients, read over the direct client): the connections that
 * carry the proxied client's APPLICATION_NAME exist, and none of them is a socket of this process;
 * they are autoprep's upstream connections.
 */
async function serverView(direct, applicationName, checks) {
  const own = ownSockets();
  let seen = 0;
  const directOnes = [];
  const rs = await direct.execute('SELECT address, port, client_options FROM system_views.clients');
  for (const row of rs.rows) {
    const options = row.client_options || {};
    if (options.APPLICATION_NAME !== applicationName) {
      continue;
    }
    seen++;
    const key = `${row.address.toString()}:${row.port}`;
    if (own.has(key)) {
      directOnes.push(key);
    }
  }
  console.log(`server: ${seen} connection(s) of ${applicationName}, of which from this process `
    + `directly: ${JSON.stringify(directOnes)}`);
  checks.that("server: the proxied client's connections reach the node", seen > 0,
    `no connection with APPLICATION_NAME ${applicationName} in system_views.clients`);
  checks.equal('server: connections from this process straight to the node', [], directOnes);
}

/** host:port of every TCP socket this process owns (from /proc, Linux). */
function ownSockets() {
  const inodes = new Set();
  for (const fd of fs.readdirSync('/proc/self/fd')) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(fs.readlinkSync(`/proc/self/fd/${fd}`));
      if (m) {
        inodes.add(m[1]);
      }
    } catch {
      // closed meanwhile
    }
  }
  const out = new Set();
  for (const table of ['/proc/self/net/tcp', '/proc/self/net/tcp6']) {
    let lines;
    try {
      lines = fs.readFileSync(table, 'utf8').split('\n').slice(1);
    } catch {
      continue;
    }
    for (const line of lines) {
      const f = line.trim().split(/\s+/);
      if (f.length > 9 && inodes.has(f[9])) {
        out.add(procAddress(f[1]));
      }
    }
  }
  return out;
}

/** "0100007F:1F90" (little-endian words) as "127.0.0.1:8080"; IPv4-mapped v6 as v4. */
function procAddress(hex) {
  const [h, p] = hex.split(':');
  const port = parseInt(p, 16);
  const bytes = [];
  for (let w = 0; w < h.length / 8; w++) {
    for (let i = 3; i >= 0; i--) {
      bytes.push(parseInt(h.substr(w * 8 + i * 2, 2), 16));
    }
  }
  if (bytes.length === 4) {
    return `${bytes.join('.')}:${port}`;
  }
  const mapped = bytes.slice(0, 10).every((b) => b === 0) && bytes[10] === 0xff
    && bytes[11] === 0xff;
  if (mapped) {
    return `${bytes.slice(12).join('.')}:${port}`;
  }
  const groups = [];
  for (let i = 0; i < 16; i += 2) {
    groups.push(((bytes[i] << 8) | bytes[i + 1]).toString(16));
  }
  return `${groups.join(':')}:${port}`;
}

module.exports = { driverView, serverView, ownSockets, procAddress };
