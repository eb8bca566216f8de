"""The backend host alone (issue 13, docs/isolation.md): redisai-backend-host spawned
from Python with one end of a SOCK_SEQPACKET socketpair, no Redis yet (the core's proxy
is the next step). HELLO, an ONNX model created from a real ONNX blob, runs with tensors
in memfd arenas and sealed large regions checked against onnxruntime in this process,
the backend's errors carried verbatim, malformed messages ending the host with status 70
and a reason, the startup hardening (closed descriptors, no_new_privs, oom_score_adj,
name), and PR_SET_PDEATHSIG.
"""
from __future__ import annotations

import os
import pathlib
import signal
import socket
import struct
import subprocess
import sys
import textwrap
import time
from typing import Iterator

import numpy as np
import pytest

import iso_host_client as iso
import onnx_models

ONNX = 3  # RAI_BackendKind


@pytest.fixture
def host(host_path: pathlib.Path, onnx_backend: iso.Backend) -> Iterator[iso.HostProcess]:
    h = iso.HostProcess(host_path, onnx_backend)
    yield h
    h.close()


def _ready(h: iso.HostProcess) -> None:
    m = h.hello()
    assert m.type == iso.HELLO_OK, m.error_text() if m.type == iso.ERROR else m


def _exits_with_protocol_error(h: iso.HostProcess, reason: str) -> None:
    assert h.wait() == iso.EXIT_PROTOCOL
    err = h.stderr()
    assert "protocol error" in err and reason in err, err


def test_hello_reports_the_backend(host: iso.HostProcess) -> None:
    m = host.hello()
    assert m.type == iso.HELLO_OK, m
    d = iso.Dec(m.payload)
    pid, major, _minor, size, note_major, _note_minor = (d.u32() for _ in range(6))
    framework, version, variant = d.str(), d.str(), d.str()
    has_scripts, has_info, load_us = d.u8(), d.u8(), d.u64()
    assert d.done()
    assert pid == host.proc.pid
    assert major == note_major == 1 and size > 0
    assert version == onnx_models.onnxruntime_version()
    assert host.backend.name == f"onnxruntime-{version}-{variant}"
    assert "onnx" in framework.lower() and has_scripts == 0 and has_info == 1 and load_us > 0


def test_create_and_run_match_onnxruntime(host: iso.HostProcess) -> None:
    _ready(host)
    add = onnx_models.add()
    m = host.model_create(7, "k", add.blob)
    assert m.type == iso.MODEL_CREATED, m.error_text() if m.type == iso.ERROR else m
    d = iso.Dec(m.payload)
    assert d.u8() == 1
    ins = [d.str() for _ in range(d.u32())]
    assert d.u8() == 1
    outs = [d.str() for _ in range(d.u32())]
    assert (tuple(ins), tuple(outs)) == (add.inputs, add.outputs) and d.done()

    ch = host.open_channel()
    try:
        # Small tensors through the arenas, several runs reusing them.
        for seed in range(3):
            a = np.random.default_rng(seed).standard_normal((2, 3)).astype(np.float32)
            b = np.random.default_rng(seed + 10).standard_normal((2, 3)).astype(np.float32)
            reply, got = ch.run(7, [a, b], 1)
            assert reply.type == iso.RUN_OK, reply.error_text()
            assert not reply.fds  # everything fitted the arena
            np.testing.assert_array_equal(got[0], add.run(a, b)[0])
        # Over ISO_ARENA_TENSOR_MAX: inputs in a frozen region, output in a sealed one.
        a = np.random.default_rng(1).standard_normal((600, 600)).astype(np.float32)
        b = np.random.default_rng(2).standard_normal((600, 600)).astype(np.float32)
        reply, got = ch.run(7, [a, b], 1)
        assert reply.type == iso.RUN_OK, reply.error_text()
        np.testing.assert_array_equal(got[0], add.run(a, b)[0])
    finally:
        ch.close()


def test_blob_in_a_bulk_memfd(host: iso.HostProcess) -> None:
    _ready(host)
    cnn = onnx_models.cnn()
    m = host.model_create(1, "cnn", cnn.blob, bulk=True)
    assert m.type == iso.MODEL_CREATED, m.error_text() if m.type == iso.ERROR else m
    ch = host.open_channel()
    try:
        reply, got = ch.run(1, list(cnn.sample), len(cnn.outputs))
        assert reply.type == iso.RUN_OK, reply.error_text()
        for g, want in zip(got, cnn.run(*cnn.sample)):
            np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)
    finally:
        ch.close()


def test_backend_errors_come_back_and_the_host_stays(host: iso.HostProcess) -> None:
    _ready(host)
    bad = host.model_create(1, "bad", b"this is not an onnx model")
    # The backend's own text, verbatim (the core adds its prefixes as in-process).
    assert bad.type == iso.ERROR and "protobuf parsing failed" in bad.error_text(), bad
    add = onnx_models.add()
    assert host.model_create(2, "k", add.blob).type == iso.MODEL_CREATED
    ch = host.open_channel()
    try:
        a = np.ones((2, 2), np.float32)
        reply, _ = ch.run(2, [a], 1)  # one input of two: ONNX Runtime's own refusal
        assert reply.type == iso.ERROR and "input" in reply.error_text().lower(), reply
        reply, got = ch.run(2, [a, a], 1)
        assert reply.type == iso.RUN_OK and (got[0] == 2).all()
        host.model_free(2)
        host.sync()  # the free is handled on the control thread, the run on the channel's
        reply, _ = ch.run(2, [a, a], 1)
        assert reply.type == iso.ERROR and "no such model" in reply.error_text()
        assert host.proc.poll() is None
    finally:
        ch.close()


def test_malformed_header_ends_the_host(host: iso.HostProcess) -> None:
    _ready(host)
    host.ctl.send(struct.pack("<IHHQIIQ", 0xDEADBEEF, iso.INFO, 0, 1, 8, 0, 0) + bytes(8))
    _exits_with_protocol_error(host, "bad magic 0xdeadbeef")


def test_lying_length_ends_the_host(host: iso.HostProcess) -> None:
    _ready(host)
    # MODEL_CREATE whose key length promises more bytes than the message has.
    payload = iso.Enc().u64(1).u32(1 << 19).bytes() + b"short"
    iso.send(host.ctl, iso.MODEL_CREATE, 5, payload)
    _exits_with_protocol_error(host, "MODEL_CREATE: a string runs past the end")


def test_anything_before_hello_ends_the_host(host: iso.HostProcess) -> None:
    iso.send(host.ctl, iso.INFO, 1, iso.Enc().u64(1).bytes())
    _exits_with_protocol_error(host, "INFO before HELLO")


def test_tensor_outside_its_arena_ends_the_host(host: iso.HostProcess) -> None:
    _ready(host)
    assert host.model_create(3, "k", onnx_models.add().blob).type == iso.MODEL_CREATED
    ch = host.open_channel()
    try:
        e = iso.Enc().u64(3).u32(0).str("k").u32(2)
        e.tensor(2, 32, 0, 0, 16, [4])
        e.tensor(2, 32, 0, iso.ARENA_SIZE - 64, 128, [32])  # runs past the arena's end
        e.u32(1)
        iso.send(ch.sock, iso.MODEL_RUN, 9, e.bytes())
        _exits_with_protocol_error(host, "outside its region")
    finally:
        ch.close()


def test_unsealed_arena_is_refused(host: iso.HostProcess) -> None:
    _ready(host)
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    loose = os.memfd_create("loose", os.MFD_CLOEXEC)  # no seals: could shrink under the host
    os.ftruncate(loose, iso.ARENA_SIZE)
    sealed = iso.arena_memfd()
    try:
        iso.send(host.ctl, iso.OPEN_CHANNEL, 4, iso.Enc().u64(1).bytes(),
                 [theirs.fileno(), loose, sealed])
        _exits_with_protocol_error(host, "OPEN_CHANNEL")
    finally:
        for fd in (loose, sealed):
            os.close(fd)
        mine.close()
        theirs.close()


def test_another_build_is_refused(host: iso.HostProcess) -> None:
    m = host.hello(build="0.0.0 notthis")
    assert m.type == iso.ERROR and "from another build" in m.error_text(), m
    assert host.wait() == iso.EXIT_PROTOCOL


def test_startup_hardening(host_path: pathlib.Path, onnx_backend: iso.Backend) -> None:
    # An extra descriptor handed over by mistake must be closed by the host.
    r, w = os.pipe()
    h = iso.HostProcess(host_path, onnx_backend, extra_fds=[r])
    try:
        _ready(h)
        pid = h.proc.pid
        fds = {int(n): os.readlink(f"/proc/{pid}/fd/{n}") for n in os.listdir(f"/proc/{pid}/fd")}
        leaked = os.readlink(f"/proc/self/fd/{r}")
        assert leaked not in fds.values(), (leaked, fds)
        assert fds[3].startswith("socket:"), fds
        status = pathlib.Path(f"/proc/{pid}/status").read_text()
        assert "NoNewPrivs:\t1" in status
        assert pathlib.Path(f"/proc/{pid}/oom_score_adj").read_text().strip() == "1000"
        assert pathlib.Path(f"/proc/{pid}/comm").read_text().strip() == "rai-host-ONNX"
        environ = pathlib.Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert b"REDISAI_BACKEND_HOST=1" not in environ  # set in-process, after exec
    finally:
        os.close(r)
        os.close(w)
        h.close()


def test_wrong_parent_is_refused(host_path: pathlib.Path, onnx_backend: iso.Backend) -> None:
    h = iso.HostProcess(host_path, onnx_backend, ppid=1)
    try:
        assert h.wait() == iso.EXIT_PROTOCOL
        assert "parent 1 is gone" in h.stderr()
    finally:
        h.close()


def _gone(pid: int) -> bool:
    try:
        state = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")


def test_host_dies_with_its_parent(host_path: pathlib.Path, onnx_backend: iso.Backend,
                                   tmp_path: pathlib.Path) -> None:
    """A middle process spawns the host (as Redis would) and is killed with SIGKILL:
    PR_SET_PDEATHSIG must take the host down with it."""
    support = pathlib.Path(iso.__file__).parent  # tests/support/, for the child's imports
    script = textwrap.dedent(f"""
        import os, pathlib, sys, time
        sys.path.insert(0, {str(support)!r})
        import iso_host_client as iso
        b = iso.Backend("ONNX", {ONNX}, {onnx_backend.name!r}, pathlib.Path({str(onnx_backend.so)!r}),
                        pathlib.Path({str(onnx_backend.backends_path)!r}))
        h = iso.HostProcess(pathlib.Path({str(host_path)!r}), b)
        assert h.hello().type == iso.HELLO_OK
        # A keeper holds the control socket open: the host must die of the death
        # signal, not of EOF on its connection.
        keeper = subprocess.Popen(["sleep", "600"], pass_fds=[h.ctl.fileno()])
        print(h.proc.pid, keeper.pid, flush=True)
        time.sleep(600)
    """).replace("import os,", "import subprocess, os,")
    middle = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                              text=True)
    try:
        line = middle.stdout.readline()
        assert len(line.split()) == 2, f"middle process printed {line!r}"
        host_pid, keeper_pid = map(int, line.split())
        assert not _gone(host_pid)
        middle.send_signal(signal.SIGKILL)
        middle.wait(60)
        # Liveness, not timing: wait (bounded) for the kernel to deliver the death signal.
        deadline = time.monotonic() + 60
        while not _gone(host_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _gone(host_pid), f"host {host_pid} outlived its parent"
        assert not _gone(keeper_pid)  # the socket was still open: no EOF helped
    finally:
        if "keeper_pid" in locals() and not _gone(keeper_pid):
            os.kill(keeper_pid, signal.SIGKILL)
        if middle.poll() is None:
            middle.kill()
            middle.wait(60)
        middle.stdout.close()


def _next_note(h: iso.HostProcess) -> iso.Msg:
    while True:
        m = iso.recv(h.ctl)
        assert m is not None, f"EOF before a note; stderr: {h.stderr()}"
        if m.type != iso.LOG:
            return m


def test_fatal_signal_sends_dying_then_dies_of_it(host: iso.HostProcess) -> None:
    _ready(host)
    host.proc.send_signal(signal.SIGSEGV)
    m = _next_note(host)
    assert m.type == iso.DYING, m
    d = iso.Dec(m.payload)
    sig, _code, _addr = d.u32(), d.u32(), d.u64()
    assert sig == signal.SIGSEGV and d.done()
    assert host.wait() == -signal.SIGSEGV  # re-raised: the status tells the signal


def test_sigterm_and_shutdown_say_why(host_path: pathlib.Path, onnx_backend: iso.Backend) -> None:
    for how, want in (("SIGTERM", "SIGTERM"), ("SHUTDOWN", "SHUTDOWN")):
        h = iso.HostProcess(host_path, onnx_backend)
        try:
            _ready(h)
            assert h.model_create(1, "k", onnx_models.add().blob).type == iso.MODEL_CREATED
            if how == "SIGTERM":
                h.proc.send_signal(signal.SIGTERM)
            else:
                iso.send(h.ctl, iso.SHUTDOWN, 99)
            m = _next_note(h)
            assert m.type == iso.EXITING and iso.Dec(m.payload).str() == want, m
            assert h.wait() == 0
        finally:
            h.close()


def test_memory_limit_is_the_hosts_rlimit_data(host_path: pathlib.Path,
                                               onnx_backend: iso.Backend) -> None:
    h = iso.HostProcess(host_path, onnx_backend)
    try:
        m = h.hello(memory_limit_mb=3000)
        assert m.type == iso.HELLO_OK, m
        limits = pathlib.Path(f"/proc/{h.proc.pid}/limits").read_text().splitlines()
        [data] = [line for line in limits if line.startswith("Max data size")]
        # The setting plus the host's headroom for thread stacks and runtime data
        # (HOST_DATA_HEADROOM_MB in host_main.c).
        assert data.split()[3:5] == [str((3000 + 512) << 20)] * 2, data
        [core] = [line for line in limits if line.startswith("Max core file size")]
        assert core.split()[4:6] == ["0", "0"], core
    finally:
        h.close()


def test_mutated_hellos_never_crash_the_host(host_path: pathlib.Path,
                                             onnx_backend: iso.Backend) -> None:
    """Truncated and bit-flipped HELLOs (seeded, so reproducible): the host answers ERROR
    or HELLO_OK, or exits with status 70 or 1 (after an ERROR or none); never dies of a
    signal or hangs."""
    probe = iso.HostProcess(host_path, onnx_backend)
    e = iso.Enc().u32(iso.PROTOCOL_VERSION).str(iso.build_id(host_path)).u32(ONNX)
    e.str(onnx_backend.name).str(os.path.realpath(onnx_backend.so))
    e.str(str(onnx_backend.backends_path)).u8(1)
    for v in (1, 1, 1, 5000, 0):
        e.i64(v)
    good = e.u64(1).u32(2).bytes()
    probe.close()
    rng = np.random.default_rng(13)
    for i in range(40):
        payload = bytearray(good)
        if i % 2:
            payload = payload[:int(rng.integers(0, len(payload)))]
        else:
            for _ in range(int(rng.integers(1, 4))):
                at = int(rng.integers(0, len(payload)))
                payload[at] ^= 1 << int(rng.integers(0, 8))
        h = iso.HostProcess(host_path, onnx_backend)
        try:
            iso.send(h.ctl, iso.HELLO, 1, bytes(payload))
            h.ctl.settimeout(60)  # a hang fails the test instead of stalling it
            m = iso.recv(h.ctl)
            while m is not None and m.type == iso.LOG:
                m = iso.recv(h.ctl)
            if m is not None and m.type == iso.HELLO_OK:
                continue  # a flip in a field that does not matter: the host serves
            assert m is None or m.type == iso.ERROR, (i, m)
            status = h.wait()
            assert status in (1, iso.EXIT_PROTOCOL), (i, status, h.stderr())
        finally:
            h.close()


def test_mutated_runs_never_crash_the_host(host_path: pathlib.Path,
                                           onnx_backend: iso.Backend) -> None:
    """Bit-flipped and truncated MODEL_RUN messages on a channel (seeded): each gets RUN_OK
    or ERROR with the host alive, or ends the host with status 70; never a signal."""
    add = onnx_models.add()
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    e = iso.Enc().u64(1).u32(0).str("k").u32(2)
    e.tensor(2, 32, 0, 0, a.nbytes, a.shape).tensor(2, 32, 0, 64, a.nbytes, a.shape).u32(1)
    good = e.bytes()
    rng = np.random.default_rng(1313)
    h: iso.HostProcess | None = None
    ch: iso.Channel | None = None
    exits = replies = 0
    try:
        for i in range(60):
            if h is None:
                h = iso.HostProcess(host_path, onnx_backend)
                _ready(h)
                assert h.model_create(1, "k", add.blob).type == iso.MODEL_CREATED
                ch = h.open_channel()
                ch.c2h[0:a.nbytes] = a.tobytes()
                ch.c2h[64:64 + a.nbytes] = a.tobytes()
                ch.sock.settimeout(60)
            payload = bytearray(good)
            if i % 3 == 0:
                payload = payload[:int(rng.integers(0, len(payload)))]
            else:
                for _ in range(int(rng.integers(1, 3))):
                    at = int(rng.integers(0, len(payload)))
                    payload[at] ^= 1 << int(rng.integers(0, 8))
            iso.send(ch.sock, iso.MODEL_RUN, 100 + i, bytes(payload))
            m = iso.recv(ch.sock)
            if m is not None:
                assert m.type in (iso.RUN_OK, iso.ERROR) and m.id == 100 + i, (i, m)
                for fd in m.fds:
                    os.close(fd)
                replies += 1
                continue
            status = h.wait()
            assert status == iso.EXIT_PROTOCOL, (i, status, h.stderr())
            exits += 1
            ch.close()
            h.close()
            h = ch = None
    finally:
        if ch is not None:
            ch.close()
        if h is not None:
            h.close()
    assert exits and replies  # both paths were exercised
