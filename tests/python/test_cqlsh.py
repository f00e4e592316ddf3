"""cqlsh (from the venv) through autoprep: the same script, run through the proxy and directly,
prints the same thing (modulo the keyspace name, which is unique per run)."""

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from conftest import scrub

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "cqlsh_script.cql"
PLACEHOLDER = "autoprep_cqlsh"
CQLSH = Path(sys.executable).parent / "cqlsh"


def run_cqlsh(host, port, script, home, extra):
    env = dict(os.environ, HOME=str(home))
    env.pop("CQLSH_HOST", None)
    env.pop("CQLSH_PORT", None)
    p = subprocess.run(
        [str(CQLSH), "--no-color", "--disable-history", *extra, host, str(port), "-f", str(script)],
        capture_output=True, text=True, env=env, timeout=90)
    return p


@pytest.mark.parametrize("extra,proto", [([], 5), (["--protocol-version=4"], 4)],
                         ids=["default-v5", "v4"])
def test_cqlsh_script(proxy, upstream, tmp_path, extra, proto):
    text = SCRIPT.read_text()
    outs = {}
    for side, (host, port) in (("proxy", (proxy.host, proxy.port)), ("direct", upstream)):
        ks = f"autoprep_cqlsh_{uuid.uuid4().hex[:8]}"
        script = tmp_path / f"{side}.cql"
        script.write_text(text.replace(PLACEHOLDER, ks))
        p = run_cqlsh(host, port, script, tmp_path, extra)
        names = {ks: PLACEHOLDER, str(script): "SCRIPT"}
        outs[side] = (p.returncode, scrub(p.stdout, names), scrub(p.stderr, names))

    rc, out, err = outs["proxy"]
    # The script ends with one deliberate error (an unknown table): cqlsh exits 2.
    assert rc == 2, (out, err)
    assert f"Native protocol v{proto}]" in out
    assert "s-1 | 2026-01-02 03:04:06.789000+0000 |" in out
    assert "550e8400-e29b-41d4-a716-446655440000 | {x: 1.5, y: -2} | {'a', 'b'} |  21.5" in out
    assert "s-3 | 2026-01-05 00:00:00.000000+0000 |     4" in out
    assert "(2 rows)" in out and "(3 rows)" in out
    assert f"CREATE TABLE {PLACEHOLDER}.readings (" in out
    assert "comment = 'autoprep cqlsh test'" in out
    assert f"CREATE TYPE {PLACEHOLDER}.point (" in out
    assert "table no_such_table does not exist" in err
    assert outs["proxy"] == outs["direct"]
