'use strict';
/**
 * Renders driver values as text that shows every difference: types, order, exact numbers, bytes.
 * Rows read through autoprep and directly, and the rows the workload expects, compare in this form.
 */
const { types } = require('cassandra-driver');

/** One value as the driver decoded it (string, number, Long, Uuid, Date, Array, object, Buffer). */
function value(v) {
  if (v === null || v === undefined) {
    return 'null';
  }
  if (typeof v === 'string') {
    return `'${v}'`;
  }
  if (typeof v === 'number') {
    return `number:${Object.is(v, -0) ? '-0' : String(v)}`;
  }
  if (typeof v === 'boolean') {
    return `boolean:${v}`;
  }
  if (Buffer.isBuffer(v)) {
    return `0x${v.toString('hex')}`;
  }
  if (v instanceof types.Long) {
    return `Long:${v.toString()}`;
  }
  if (v instanceof types.Uuid) {
    return `Uuid:${v.toString()}`;
  }
  if (v instanceof types.InetAddress) {
    return `Inet:${v.toString()}`;
  }
  if (v instanceof Date) {
    return `Date:${v.toISOString()}`;
  }
  if (Array.isArray(v)) {
    return `[${v.map(value).join(', ')}]`;
  }
  if (v instanceof Map) {
    return `{${Array.from(v, ([k, x]) => `${value(k)}: ${value(x)}`).join(', ')}}`;
  }
  if (typeof v === 'object' && v.constructor === Object) {
    return `{${Object.keys(v).map((k) => `${value(k)}: ${value(v[k])}`).join(', ')}}`;
  }
  return `${v.constructor ? v.constructor.name : typeof v}:${String(v)}`;
}

/** A row: every column's value, in the result's column order. */
function row(r, columns) {
  return columns.map((c) => value(r[c.name])).join(' | ');
}

/** Expected values in the same form as {@link row}. */
function values(...vs) {
  return vs.map(value).join(' | ');
}

/** A result's column names and type codes (keyspace and table left out, so that the control's
 * keyspace compares equal). */
function columns(cols) {
  return (cols || []).map((c) => `${c.name} ${typeName(c.type)}`).join(', ');
}

function typeName(t) {
  const names = Object.keys(types.dataTypes).filter((k) => types.dataTypes[k] === t.code
    && typeof types.dataTypes[k] === 'number');
  let name = names.length ? names[0] : `0x${t.code.toString(16)}`;
  if (Array.isArray(t.info)) {
    name += `<${t.info.map(typeName).join(', ')}>`;
  } else if (t.info && typeof t.info === 'object' && t.info.code !== undefined) {
    name += `<${typeName(t.info)}>`;
  }
  return name;
}

module.exports = { value, row, values, columns };
