"""The client key has one definition (``ldp.hashing.span_hashes``): the compiled kernel the block
readers run is that function under numba, and ``client_key`` runs the same function compiled or,
without numba, as Python; both are FNV-1a 64 xor the byte length."""
import subprocess
import sys

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from ldp_marginals.ldp import _compiled, _kernels, hashing
from ldp_marginals.ldp.aggregate import client_key


def fnv1a_xor_length(data: bytes) -> int:
    """The specification, as Python integers (FNV-1a 64: offset basis, xor each byte, times the prime)."""
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) % 2 ** 64
    return h ^ len(data)


def test_the_compiled_kernel_is_the_one_definition():
    assert _kernels.span_hashes.py_func is hashing.span_hashes


def test_published_fnv1a_vectors():
    # FNV-1a 64 of "", "a", "foobar" (the FNV reference test suite), each xor its length
    assert [client_key(t) for t in ("", "a", "foobar")] == [
        0xCBF29CE484222325, 0xAF63DC4C8601EC8C ^ 1, 0x85944171F73967E8 ^ 6]


@given(st.lists(st.text(max_size=40), max_size=20))
def test_compiled_and_python_paths_agree_with_the_specification(tokens):
    expected = [fnv1a_xor_length(t.encode("utf-8")) for t in tokens]
    compiled = [client_key(t) for t in tokens]
    _compiled.AVAILABLE = False   # the path of an install without numba
    try:
        python = [client_key(t) for t in tokens]
    finally:
        _compiled.AVAILABLE = True
    assert compiled == python == expected
    data = [t.encode("utf-8") for t in tokens]
    buf = np.frombuffer(b"".join(data) or b"\0", dtype=np.uint8)
    offs = np.cumsum([0] + [len(d) for d in data])[:-1].astype(np.int64)
    lens = np.array([len(d) for d in data], dtype=np.int64)
    assert _kernels.span_hashes(buf, offs, lens).tolist() == expected


def test_client_keys_without_numba_import_no_numba():
    code = ("import sys\nfrom ldp_marginals.ldp import _compiled\n_compiled.AVAILABLE = False\n"
            "from ldp_marginals.ldp.aggregate import client_key\n"
            "print(client_key('device-7'), 'numba' in sys.modules)")
    out = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == [str(fnv1a_xor_length(b"device-7")), "False"]
