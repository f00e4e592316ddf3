'use strict';
/**
 * Collects the outcome of every check, so that one run reports all mismatches at once.
 */
const util = require('node:util');

class Checks {
  constructor() {
    this.passed = 0;
    this.failures = [];
  }

  /** Records a check that `actual` deep-equals `expected` (strict). */
  equal(what, expected, actual) {
    if (util.isDeepStrictEqual(expected, actual)) {
      this.passed++;
    } else {
      this.fail(`${what}: expected <${show(expected)}> but got <${show(actual)}>`);
    }
  }

  /** Records a check that `ok` holds; `detail` says what was seen when it does not. */
  that(what, ok, detail) {
    if (ok) {
      this.passed++;
    } else {
      this.fail(`${what}: ${detail}`);
    }
  }

  /** Records a failed check. */
  fail(message) {
    this.failures.push(message);
    console.log(`MISMATCH ${message}`);
  }
}

function show(v) {
  return typeof v === 'string' ? v : JSON.stringify(v);
}

module.exports = { Checks };
