#!/usr/bin/env python3
"""test_fleet: the fake LLM fleet (fakellm, fleet, client) checked on loopback.

One fleet.py process serves most tests (started once, on ephemeral ports,
with --watch-stdin so it dies with this process); every test resets the
counters, caches and faults it uses. Timing checks are lower bounds (a sleep
never ends early), except the "instant 500", whose bound is 10x loose.
"""

import contextlib
import http.client
import io
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import client  # noqa: E402
import fakellm  # noqa: E402
import fleet  # noqa: E402
import poll  # noqa: E402

B = 256  # block_chars
TIMEOUT = 10.0

CONFIG = [
    # general instance: first token headers, 10 ms per block
    {"name": "a", "models": ["fake-model", "other-model"], "prefill_ms_per_block": 10,
     "decode_ms_per_token": 2, "cache_blocks": 64, "max_running": 4, "admin_port": 0,
     "block_chars": B},
    # headers at once, before prefill (vLLM); one request at a time
    {"name": "b", "prefill_ms_per_block": 20, "decode_ms_per_token": 2,
     "header_mode": "immediate", "max_running": 1, "admin_port": 0, "block_chars": B},
    # one request at a time: 50 ms + 10 ms per token
    {"name": "q", "prefill_ms_per_block": 0, "decode_ms_per_token": 10, "base_ms": 50,
     "max_running": 1, "admin_port": 0, "block_chars": B},
    # a small cache
    {"name": "l", "prefill_ms_per_block": 1, "decode_ms_per_token": 0, "cache_blocks": 8,
     "admin_port": 0, "block_chars": B},
    # faults
    {"name": "f", "prefill_ms_per_block": 10, "decode_ms_per_token": 2, "admin_port": 0,
     "block_chars": B},
]

FLEET = {}  # name -> ready-file entry
_proc = None
_tmp = None


def wait_for(what, cond, timeout=5.0, interval=0.01):
    """poll.wait_until with this file's shorter defaults."""
    return poll.wait_until(what, cond, timeout, interval)


def start_fleet_process(args, tmpdir, ready_name="ready.json"):
    ready = os.path.join(tmpdir, ready_name)
    p = subprocess.Popen([sys.executable, os.path.join(HERE, "fleet.py"), *args,
                          "--ready-file", ready, "--watch-stdin"],
                         stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    try:
        def ready_or_dead():
            if p.poll() is not None:
                raise AssertionError(f"fleet.py exited {p.returncode}: "
                                     f"{p.stderr.read().decode(errors='replace')}")
            return os.path.exists(ready)
        wait_for("the fleet's ready file", ready_or_dead, timeout=15.0, interval=0.02)
        with open(ready, encoding="utf-8") as f:
            return p, ready, json.load(f)
    except BaseException:
        stop_process(p)
        raise


def stop_process(p, timeout=5.0):
    """SIGTERM, then SIGKILL after `timeout`; the exit code, None if killed."""
    if p is None:
        return None
    try:
        if p.poll() is not None:
            return p.returncode
        p.send_signal(signal.SIGTERM)
        try:
            return p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout)
            return None
    finally:
        for s in (p.stdin, p.stderr):
            if s and not s.closed:
                s.close()


def setUpModule():
    global _proc, _tmp
    _tmp = tempfile.TemporaryDirectory(prefix="fleet-test-")
    cfg = os.path.join(_tmp.name, "fleet.json")
    with open(cfg, "w", encoding="utf-8") as f:
        json.dump(CONFIG, f)
    try:
        _proc, _, insts = start_fleet_process(["--config", cfg], _tmp.name)
    except BaseException:
        _tmp.cleanup()
        raise
    for i in insts:
        FLEET[i["name"]] = i


def tearDownModule():
    try:
        rc = stop_process(_proc)
        if rc not in (0, None):
            print(f"fleet.py exited {rc}", file=sys.stderr)
    finally:
        _tmp.cleanup()


# --- helpers ------------------------------------------------------------------

def http_req(port, method, path, body=None, headers=None, conn=None):
    """(status, headers dict, body bytes); opens and closes its own connection
    unless `conn` is given."""
    own = conn is None
    c = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
    try:
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        h = {"content-type": "application/json"}
        h.update(headers or {})
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        if own:
            c.close()


def admin(name, path, body=None):
    inst = FLEET[name]
    st, _, data = http_req(inst["admin_port"], "POST" if body is not None else "GET",
                           "/admin/" + path, body)
    if st != 200:
        raise AssertionError(f"admin {path}: {st} {data!r}")
    return json.loads(data)


def stats(name):
    return admin(name, "stats")


def prompt(tag, chars):
    s = f"[{tag}] "
    filler = "the quick brown fox jumps over the lazy dog "
    return (s + filler * (chars // len(filler) + 1))[:chars]


def chat_body(text, stream=False, max_tokens=4, model=None, extra=None):
    b = {"messages": [{"role": "user", "content": text}], "max_tokens": max_tokens}
    if model:
        b["model"] = model
    if stream:
        b["stream"] = True
    b.update(extra or {})
    return b


def chat(name, text, **kw):
    headers = kw.pop("headers", None)
    return http_req(FLEET[name]["port"], "POST", "/v1/chat/completions",
                    chat_body(text, **kw), headers)


def rendered_len(text):
    return len(fakellm.chat_prompt_text([{"role": "user", "content": text}]))


def raw_exchange(port, request_bytes, timeout=TIMEOUT):
    """Sends raw bytes and reads to EOF: (seconds to the first byte, bytes)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        t0 = time.monotonic()
        s.sendall(request_bytes)
        out, t_first = bytearray(), None
        deadline = t0 + timeout
        while time.monotonic() < deadline:
            b = s.recv(65536)
            if not b:
                break
            if t_first is None:
                t_first = time.monotonic() - t0
            out += b
        return t_first, bytes(out)


def raw_post(path, body, extra_headers=""):
    data = json.dumps(body).encode()
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\nConnection: close\r\n{extra_headers}\r\n").encode() + data


def sse_events(raw_body):
    """data: payloads of a de-chunked SSE body."""
    return [line[len("data: "):] for line in raw_body.decode().split("\n\n")
            if line.startswith("data: ")]


def dechunk(data):
    """(body, complete) of a chunked body; complete when the 0 chunk came."""
    out, i = bytearray(), 0
    for _ in range(100000):
        j = data.find(b"\r\n", i)
        if j < 0:
            return bytes(out), False
        size = int(data[i:j].split(b";")[0], 16)
        if size == 0:
            return bytes(out), True
        out += data[j + 2:j + 2 + size]
        if len(data) < j + 4 + size:
            return bytes(out), False
        i = j + 4 + size
    return bytes(out), False


class SlotHolder:
    """Occupies an instance's only slot with a long stream until close()."""

    def __init__(self, name, tokens=4000):
        self.sock = socket.create_connection(("127.0.0.1", FLEET[name]["port"]), timeout=TIMEOUT)
        self.sock.sendall(raw_post("/v1/chat/completions",
                                   chat_body(f"hold {time.monotonic()}", stream=True,
                                             max_tokens=tokens)))
        wait_for(f"{name} busy", lambda: stats(name)["running"] == 1)

    def close(self):
        self.sock.close()


class StreamTimer:
    """A streamed request: times to the headers and to the first data event."""

    def __init__(self, port, body, headers=None):
        self.c = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
        h = {"content-type": "application/json"}
        h.update(headers or {})
        t0 = time.monotonic()
        self.c.request("POST", "/v1/chat/completions", json.dumps(body).encode(), h)
        self.resp = self.c.getresponse()
        self.t_head = time.monotonic() - t0
        self.events = []
        self.t_first = None
        self.done = False
        for _ in range(100000):
            line = self.resp.readline()
            if not line:
                break
            if line.startswith(b"data: "):
                if self.t_first is None:
                    self.t_first = time.monotonic() - t0
                payload = line[6:].strip()
                if payload == b"[DONE]":
                    self.done = True
                    break
                self.events.append(json.loads(payload))
        self.resp.read()
        self.c.close()


# --- tests --------------------------------------------------------------------

class FleetTest(unittest.TestCase):
    def setUp(self):
        for name in FLEET:
            admin(name, "reset", {"cache": True, "fault": True})

    def tearDown(self):
        # a failed refuse test must not leave an instance down
        for name in FLEET:
            if admin(name, "fault")["mode"] != "none":
                admin(name, "fault", {"mode": "none"})
            wait_for(f"{name} listening", lambda n=name: stats(n)["listening"])

    # -- basics

    def test_models_and_health(self):
        st, h, body = http_req(FLEET["a"]["port"], "GET", "/v1/models")
        self.assertEqual(st, 200)
        self.assertEqual(h["x-served-by"], "a")
        ids = [m["id"] for m in json.loads(body)["data"]]
        self.assertEqual(ids, ["fake-model", "other-model"])
        st, _, _ = http_req(FLEET["a"]["port"], "GET", "/health")
        self.assertEqual(st, 200)
        st, _, _ = http_req(FLEET["a"]["port"], "GET", "/nope")
        self.assertEqual(st, 404)

    def test_non_streamed_chat(self):
        st, h, body = chat("a", prompt("plain", 1000), max_tokens=5)
        self.assertEqual(st, 200, body)
        self.assertEqual(h["x-served-by"], "a")
        self.assertEqual(h["content-length"], str(len(body)))
        obj = json.loads(body)
        self.assertEqual(obj["object"], "chat.completion")
        self.assertEqual(obj["model"], "fake-model")
        self.assertEqual(obj["choices"][0]["message"]["role"], "assistant")
        self.assertEqual(len(obj["choices"][0]["message"]["content"].split()), 5)
        self.assertEqual(obj["choices"][0]["finish_reason"], "length")
        self.assertEqual(obj["usage"]["completion_tokens"], 5)

    def test_completions(self):
        port = FLEET["a"]["port"]
        st, h, body = http_req(port, "POST", "/v1/completions",
                               {"model": "other-model", "prompt": "x" * 600, "max_tokens": 3})
        self.assertEqual(st, 200, body)
        obj = json.loads(body)
        self.assertEqual(obj["object"], "text_completion")
        self.assertEqual(len(obj["choices"][0]["text"].split()), 3)
        self.assertEqual(h["x-prompt-blocks"], "3")
        _, data = raw_exchange(port, raw_post("/v1/completions", {
            "prompt": "x" * 600, "max_tokens": 3, "stream": True, "model": "other-model"}))
        head, _, rest = data.partition(b"\r\n\r\n")
        self.assertIn(b"x-cache-hit-blocks: 3", head)
        body, complete = dechunk(rest)
        self.assertTrue(complete)
        ev = sse_events(body)
        self.assertEqual(ev[-1], "[DONE]")
        self.assertEqual([json.loads(e)["object"] for e in ev[:-1]], ["text_completion"] * 4)

    def test_unknown_model_and_bad_requests(self):
        st, h, body = chat("a", "hi", model="no-such-model")
        self.assertEqual(st, 404)
        self.assertEqual(json.loads(body)["error"]["code"], "model_not_found")
        self.assertEqual(h["x-served-by"], "a")
        st, _, _ = http_req(FLEET["a"]["port"], "POST", "/v1/chat/completions", b"{not json")
        self.assertEqual(st, 400)
        st, _, _ = http_req(FLEET["a"]["port"], "POST", "/v1/chat/completions", {"messages": []})
        self.assertEqual(st, 400)
        st, _, _ = http_req(FLEET["a"]["port"], "GET", "/v1/chat/completions")
        self.assertEqual(st, 405)
        _, data = raw_exchange(FLEET["a"]["port"], b"GARBAGE\r\n\r\n")
        self.assertTrue(data.startswith(b"HTTP/1.1 400"), data[:40])

    def test_keep_alive(self):
        c = http.client.HTTPConnection("127.0.0.1", FLEET["a"]["port"], timeout=TIMEOUT)
        try:
            for i in range(3):
                st, h, _ = http_req(None, "POST", "/v1/chat/completions",
                                    chat_body(f"ka {i}", stream=(i == 1)), conn=c)
                self.assertEqual(st, 200)
                self.assertNotIn("connection", h)
        finally:
            c.close()
        s = stats("a")
        self.assertEqual(s["requests"], 3)
        self.assertEqual(s["connections"], 1)

    def test_expect_continue_and_chunked_request(self):
        port = FLEET["a"]["port"]
        data = json.dumps(chat_body("continue me", max_tokens=2)).encode()
        with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as s:
            s.sendall((f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                       f"Content-Length: {len(data)}\r\nExpect: 100-continue\r\n"
                       f"Connection: close\r\n\r\n").encode())
            self.assertTrue(s.recv(100).startswith(b"HTTP/1.1 100 Continue"))
            s.sendall(data)
            out = bytearray()
            for _ in range(1000):
                b = s.recv(65536)
                if not b:
                    break
                out += b
        self.assertTrue(out.startswith(b"HTTP/1.1 200"), out[:40])
        chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data)
        _, out = raw_exchange(port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                                    b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" + chunked)
        self.assertTrue(out.startswith(b"HTTP/1.1 200"), out[:40])
        self.assertIn(b"x-cache-hit-blocks: 1", out)  # same prompt as above

    # -- the prefix cache

    def test_repeated_prompt_hits(self):
        text = prompt("repeat", 2000)
        n = -(-rendered_len(text) // B)
        st, h, _ = chat("a", text)
        self.assertEqual(st, 200)
        self.assertEqual((h["x-cache-hit-blocks"], h["x-prompt-blocks"]), ("0", str(n)))
        st, h, _ = chat("a", text)
        self.assertEqual((h["x-cache-hit-blocks"], h["x-prompt-blocks"]), (str(n), str(n)))
        # another instance has its own cache
        _, h, _ = chat("b", text)
        self.assertEqual(h["x-cache-hit-blocks"], "0")
        # and another model on the same instance too
        _, h, _ = chat("a", text, model="other-model")
        self.assertEqual(h["x-cache-hit-blocks"], "0")

    def test_different_prompts_miss(self):
        chat("a", prompt("one", 2000))
        _, h, _ = chat("a", prompt("two", 2000))
        self.assertEqual(h["x-cache-hit-blocks"], "0")
        # same text but the first character: prefix-only reuse gives nothing
        t = prompt("one", 2000)
        _, h, _ = chat("a", "X" + t[1:])
        self.assertEqual(h["x-cache-hit-blocks"], "0")

    def test_growing_conversation_reuses_prefix(self):
        msgs = [{"role": "system", "content": prompt("sys", 900)},
                {"role": "user", "content": prompt("q1", 500)}]
        port = FLEET["a"]["port"]
        expect_hits = 0
        for turn in range(3):
            st, h, body = http_req(port, "POST", "/v1/chat/completions",
                                   {"messages": msgs, "max_tokens": 6})
            self.assertEqual(st, 200)
            self.assertEqual(int(h["x-cache-hit-blocks"]), expect_hits, f"turn {turn}")
            expect_hits = len(fakellm.chat_prompt_text(msgs)) // B  # full blocks only
            msgs = msgs + [json.loads(body)["choices"][0]["message"],
                           {"role": "user", "content": prompt(f"q{turn + 2}", 300)}]
        self.assertGreater(expect_hits, 0)

    def test_lru_evicts_oldest_and_prompt_tails_first(self):
        # "l" holds 8 blocks; prompts of exactly 4 blocks
        def four(tag):
            t = prompt(tag, 4 * B - rendered_len(""))
            self.assertEqual(rendered_len(t), 4 * B)
            return t
        a, b, c = four("A"), four("B"), four("C")
        for t in (a, b, c):
            _, h, _ = chat("l", t)
            self.assertEqual(h["x-cache-hit-blocks"], "0")
        _, h, _ = chat("l", b)
        self.assertEqual(h["x-cache-hit-blocks"], "4")
        _, h, _ = chat("l", a)  # evicted by c
        self.assertEqual(h["x-cache-hit-blocks"], "0")
        # a 10-block prompt in an 8-block cache keeps its first 8 blocks
        d = prompt("D", 10 * B - rendered_len(""))
        chat("l", d)
        _, h, _ = chat("l", d)
        self.assertEqual((h["x-cache-hit-blocks"], h["x-prompt-blocks"]), ("8", "10"))
        self.assertEqual(stats("l")["cache_used_blocks"], 8)

    # -- streaming and header modes

    def test_streaming_chat(self):
        port = FLEET["a"]["port"]
        _, data = raw_exchange(port, raw_post("/v1/chat/completions", chat_body(
            prompt("stream", 700), stream=True, max_tokens=5,
            extra={"stream_options": {"include_usage": True}})))
        head, _, rest = data.partition(b"\r\n\r\n")
        self.assertTrue(head.startswith(b"HTTP/1.1 200"))
        hl = head.lower()
        self.assertIn(b"transfer-encoding: chunked", hl)
        self.assertIn(b"content-type: text/event-stream", hl)
        self.assertIn(b"x-served-by: a", hl)
        self.assertIn(b"x-prompt-blocks: 3", hl)
        body, complete = dechunk(rest)
        self.assertTrue(complete)
        ev = sse_events(body)
        self.assertEqual(ev[-1], "[DONE]")
        objs = [json.loads(e) for e in ev[:-1]]
        self.assertEqual(len(objs), 5 + 1 + 1)  # tokens, finish, usage
        self.assertEqual(objs[0]["choices"][0]["delta"]["role"], "assistant")
        self.assertTrue(all(o["object"] == "chat.completion.chunk" for o in objs))
        self.assertTrue(all(o["choices"][0]["delta"]["content"] for o in objs[:5]))
        self.assertEqual(objs[5]["choices"][0]["finish_reason"], "length")
        self.assertEqual(objs[6]["usage"]["completion_tokens"], 5)
        # the same answer as the non-streamed one (deterministic in the prompt)
        _, _, body = chat("a", prompt("stream", 700), max_tokens=5)
        text = "".join(o["choices"][0]["delta"]["content"] for o in objs[:5])
        self.assertEqual(json.loads(body)["choices"][0]["message"]["content"], text)

    def test_headers_with_first_token(self):
        text = prompt("ft", 10 * B - rendered_len(""))  # 10 blocks, 100 ms on "a"
        t = StreamTimer(FLEET["a"]["port"], chat_body(text, stream=True, max_tokens=3))
        self.assertTrue(t.done)
        self.assertGreaterEqual(t.t_head, 0.1)

    def test_headers_before_prefill(self):
        # "b" runs one request at a time: while a long stream holds it, the
        # headers of the next one come although it waits in the queue, so
        # before its prefill has begun
        text = prompt("imm", 10 * B - rendered_len(""))  # 10 blocks, 200 ms on "b"
        hold = SlotHolder("b")
        c = http.client.HTTPConnection("127.0.0.1", FLEET["b"]["port"], timeout=TIMEOUT)
        try:
            t0 = time.monotonic()
            c.request("POST", "/v1/chat/completions",
                      json.dumps(chat_body(text, stream=True, max_tokens=3)).encode(),
                      {"content-type": "application/json"})
            resp = c.getresponse()
            self.assertEqual(resp.status, 200)
            self.assertEqual(resp.getheader("x-prompt-blocks"), "10")
            s = stats("b")
            self.assertEqual((s["running"], s["queued"], s["in_flight"]), (1, 1, 2))
            hold.close()
            t_release = time.monotonic()
            body = resp.read()  # to the end of the chunked body
            t_end = time.monotonic()
        finally:
            hold.close()
            c.close()
        ev = sse_events(body)
        self.assertEqual(ev[-1], "[DONE]")
        self.assertEqual(len(ev), 3 + 1 + 1)
        self.assertGreaterEqual(t_end - t_release, 0.2)  # then the prefill ran
        self.assertGreaterEqual(t_end - t0, 0.2)
        # not streamed: headers with the body, in both modes
        t0 = time.monotonic()
        st, _, _ = chat("b", prompt("imm2", 10 * B - rendered_len("")), max_tokens=1)
        self.assertEqual(st, 200)
        self.assertGreaterEqual(time.monotonic() - t0, 0.2)

    # -- faults

    def test_fault_429(self):
        self.assertEqual(admin("f", "fault", {"mode": "429", "retry_after": 2})["mode"], "429")
        st, h, body = chat("f", "hello")
        self.assertEqual(st, 429)
        self.assertEqual(h["retry-after"], "2")
        self.assertEqual(h["x-served-by"], "f")
        self.assertEqual(json.loads(body)["error"]["type"], "rate_limit_error")
        admin("f", "fault", {"mode": "429", "retry_after": None})
        st, h, _ = chat("f", "hello")
        self.assertEqual(st, 429)
        self.assertNotIn("retry-after", h)
        admin("f", "fault", {"mode": "429", "retry_after": "Wed, 21 Oct 2026 07:28:00 GMT"})
        self.assertEqual(chat("f", "hello")[1]["retry-after"], "Wed, 21 Oct 2026 07:28:00 GMT")
        admin("f", "fault", {"mode": "none"})
        self.assertEqual(chat("f", "hello")[0], 200)

    def test_fault_503(self):
        admin("f", "fault", {"mode": "503"})
        st, h, _ = chat("f", "hello")
        self.assertEqual(st, 503)
        self.assertNotIn("retry-after", h)
        st, _, _ = http_req(FLEET["f"]["port"], "GET", "/health")
        self.assertEqual(st, 200)  # health checks see it unless told otherwise
        admin("f", "fault", {"mode": "503", "retry_after": 3, "health": 503})
        st, h, _ = chat("f", "hello")
        self.assertEqual((st, h["retry-after"]), (503, "3"))
        self.assertEqual(http_req(FLEET["f"]["port"], "GET", "/health")[0], 503)

    def test_fault_500_is_instant(self):
        text = prompt("big", 200 * B - rendered_len(""))  # 2 s of prefill when served
        admin("f", "fault", {"mode": "500"})
        t0 = time.monotonic()
        st, _, _ = chat("f", text)
        elapsed = time.monotonic() - t0
        self.assertEqual(st, 500)
        self.assertLess(elapsed, 1.0)
        s = stats("f")
        self.assertEqual(s["by_status"], {"500": 1})
        self.assertEqual(s["prompt_blocks"], 0)  # no prefill happened

    def test_fault_500_after_a_delay(self):
        admin("f", "fault", {"mode": "500", "delay": 0.3})
        t0 = time.monotonic()
        st, _, _ = chat("f", "hello")
        elapsed = time.monotonic() - t0
        self.assertEqual(st, 500)
        self.assertGreaterEqual(elapsed, 0.3)
        self.assertEqual(admin("f", "fault")["delay"], 0.3)

    def test_fault_401_for_one_key(self):
        admin("f", "fault", {"mode": "401", "key": "Bearer k1"})
        self.assertEqual(chat("f", "x", headers={"authorization": "Bearer k1"})[0], 401)
        self.assertEqual(chat("f", "x", headers={"authorization": "Bearer k2"})[0], 200)
        self.assertEqual(chat("f", "x")[0], 200)
        admin("f", "fault", {"mode": "401", "key": "k2"})  # bare key matches Bearer k2
        self.assertEqual(chat("f", "x", headers={"authorization": "Bearer k2"})[0], 401)
        self.assertEqual(chat("f", "x", headers={"authorization": "Bearer k1"})[0], 200)
        admin("f", "fault", {"mode": "401"})  # no key: everyone
        self.assertEqual(chat("f", "x")[0], 401)
        self.assertEqual(stats("f")["by_status"], {"200": 3, "401": 3})

    def test_fault_slow(self):
        n = 8  # blocks: 80 ms of prefill on "f"
        base = StreamTimer(FLEET["f"]["port"], chat_body(
            prompt("fast", n * B - rendered_len("")), stream=True, max_tokens=1))
        self.assertGreaterEqual(base.t_first, 0.075)
        admin("f", "fault", {"mode": "slow", "factor": 4})
        slow = StreamTimer(FLEET["f"]["port"], chat_body(
            prompt("slow", n * B - rendered_len("")), stream=True, max_tokens=1))
        self.assertTrue(slow.done)
        self.assertGreaterEqual(slow.t_first, 4 * 0.08)

    def test_fault_refuse_and_recover(self):
        port = FLEET["f"]["port"]
        keep = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
        try:
            self.assertEqual(http_req(None, "POST", "/v1/chat/completions",
                                      chat_body("before"), conn=keep)[0], 200)
            # asked on the main port itself: the answer comes, then the port goes
            st, h, body = http_req(port, "POST", "/admin/fault", {"mode": "refuse"})
            self.assertEqual((st, json.loads(body)["mode"]), (200, "refuse"))
            self.assertEqual(h.get("connection"), "close")
            with self.assertRaises(ConnectionRefusedError):
                socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT).close()
            # an idle keep-alive connection was dropped too
            with self.assertRaises((ConnectionError, http.client.HTTPException)):
                http_req(None, "POST", "/v1/chat/completions", chat_body("after"), conn=keep)
        finally:
            keep.close()
        self.assertFalse(stats("f")["listening"])
        admin("f", "fault", {"mode": "none"})  # through the admin port
        wait_for("port open again", lambda: stats("f")["listening"])
        self.assertEqual(chat("f", "back")[0], 200)
        # with a duration, it comes back by itself
        admin("f", "fault", {"mode": "refuse", "duration": 0.6})
        with self.assertRaises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT).close()

        def serves():
            try:
                return chat("f", "again")[0] == 200
            except ConnectionError:
                return False
        wait_for("recovery after duration", serves, timeout=5.0, interval=0.05)
        self.assertEqual(admin("f", "fault")["mode"], "none")

    def test_fault_cut(self):
        port = FLEET["f"]["port"]
        admin("f", "fault", {"mode": "cut"})
        _, data = raw_exchange(port, raw_post("/v1/chat/completions",
                                              chat_body("cut me", stream=True, max_tokens=8)))
        head, _, rest = data.partition(b"\r\n\r\n")
        self.assertTrue(head.startswith(b"HTTP/1.1 200"))
        body, complete = dechunk(rest)
        self.assertFalse(complete)
        ev = sse_events(body)
        self.assertNotIn("[DONE]", ev)
        self.assertEqual(len(ev), 4)  # half of 8
        # http.client sees an incomplete chunked body
        c = client.Client(FLEET["f"]["url"], stream=True, max_tokens=8)
        try:
            r = c.chat([{"role": "user", "content": "cut me"}])
        finally:
            c.close()
        self.assertEqual(r.status, 200)
        self.assertFalse(r.done)
        self.assertIsNotNone(r.error)
        # not streamed: fewer bytes than Content-Length
        admin("f", "fault", {"mode": "cut", "cut_after": 1})
        _, data = raw_exchange(port, raw_post("/v1/chat/completions", chat_body("cut me too")))
        head, _, rest = data.partition(b"\r\n\r\n")
        cl = int([ln.split(b":")[1] for ln in head.split(b"\r\n")
                  if ln.lower().startswith(b"content-length")][0])
        self.assertLess(len(rest), cl)
        self.assertEqual(stats("f")["cut"], 3)

    def test_fault_ratio_and_bad_specs(self):
        admin("f", "fault", {"mode": "503", "ratio": 0.0})
        self.assertEqual(chat("f", "x")[0], 200)
        for bad in ({"mode": "nope"}, {"mode": "slow", "factor": 0}, {"mode": "429", "ratio": 2},
                    {"mode": "cut", "bogus": 1}, {"mode": "500", "delay": -1},
                    {"mode": "500", "delay": 61}, [1]):
            st, _, _ = http_req(FLEET["f"]["admin_port"], "POST", "/admin/fault", bad)
            self.assertEqual(st, 400, bad)
        self.assertEqual(admin("f", "fault")["mode"], "503")  # unchanged by bad specs

    def test_fault_duration_clears(self):
        admin("f", "fault", {"mode": "429", "retry_after": 1, "duration": 0.5})
        self.assertEqual(chat("f", "x")[0], 429)
        wait_for("429 window end", lambda: chat("f", "x")[0] == 200, timeout=5.0, interval=0.03)

    # -- stats and the queue

    def test_stats_count_correctly(self):
        text = prompt("stats", 8 * B - rendered_len(""))
        chat("a", text)
        chat("a", text, stream=True)
        chat("a", "y", model="no-such-model")
        http_req(FLEET["a"]["port"], "GET", "/v1/models")  # not a generation: not counted
        s = stats("a")
        self.assertEqual(s["requests"], 3)
        self.assertEqual(s["by_status"], {"200": 2, "404": 1})
        self.assertEqual(s["cache_hit_blocks"], 8)
        self.assertEqual(s["prompt_blocks"], 16)
        self.assertAlmostEqual(s["hit_rate"], 0.5)
        self.assertEqual(s["completion_tokens"], 8)
        self.assertEqual((s["in_flight"], s["running"], s["queued"]), (0, 0, 0))
        self.assertEqual(s["max_concurrent"], 1)
        s = admin("a", "reset", {})
        self.assertEqual((s["requests"], s["by_status"], s["prompt_blocks"], s["hit_rate"]),
                         (0, {}, 0, 0.0))
        _, h, _ = chat("a", text)  # a plain reset keeps the cache
        self.assertEqual(h["x-cache-hit-blocks"], "8")
        admin("a", "reset", {"cache": True})
        _, h, _ = chat("a", text)
        self.assertEqual(h["x-cache-hit-blocks"], "0")

    def test_concurrency_cap_queues_fifo(self):
        # "q" runs one request at a time; a long stream holds it while A, B
        # and C queue up in that order, then lets go
        port = FLEET["q"]["port"]
        done = {}
        errors = []

        def send(tag):
            try:
                st, _, _ = http_req(port, "POST", "/v1/chat/completions",
                                    chat_body(tag, max_tokens=1))
                done[tag] = (st, time.monotonic())
            except Exception as e:  # reported below
                errors.append(e)

        threads = []
        hold = SlotHolder("q")
        try:
            for n, tag in enumerate("ABC", 1):
                th = threading.Thread(target=send, args=(tag,), daemon=True)
                th.start()
                threads.append(th)
                wait_for(f"{tag} queued", lambda n=n: stats("q")["queued"] == n)
            s = stats("q")
            self.assertEqual((s["running"], s["queued"], s["in_flight"]), (1, 3, 4))
            self.assertEqual(done, {})
        finally:
            hold.close()
            t_release = time.monotonic()
            for th in threads:
                th.join(TIMEOUT)
        self.assertEqual(errors, [])
        self.assertEqual([done[t][0] for t in "ABC"], [200, 200, 200])
        self.assertLess(done["A"][1], done["B"][1])
        self.assertLess(done["B"][1], done["C"][1])
        self.assertGreaterEqual(done["C"][1] - t_release, 3 * 0.05)  # one after the other
        s = stats("q")
        self.assertEqual((s["max_concurrent"], s["max_queued"], s["max_in_flight"]), (1, 3, 4))
        self.assertEqual((s["in_flight"], s["running"], s["queued"]), (0, 0, 0))
        self.assertEqual(s["client_gone"], 1)  # the holder

    def test_client_gone_frees_the_slot(self):
        hold = SlotHolder("q")
        s2 = socket.create_connection(("127.0.0.1", FLEET["q"]["port"]), timeout=TIMEOUT)
        try:
            s2.sendall(raw_post("/v1/chat/completions", chat_body("gone2", max_tokens=1)))
            wait_for("queued", lambda: stats("q")["queued"] == 1)
        finally:
            s2.close()
            hold.close()
        wait_for("both gone", lambda: stats("q")["in_flight"] == 0)
        s = stats("q")
        self.assertEqual((s["running"], s["queued"], s["client_gone"]), (0, 0, 2))
        self.assertEqual(chat("q", "after")[0], 200)

    # -- the client library and CLI

    def test_client_library(self):
        url = FLEET["a"]["url"]
        kw = dict(conversations=2, turns=3, anonymous=2, seed=7, concurrency=1,
                  system_chars=600, context_chars=600, question_chars=100, max_tokens=4)
        res = client.run_load(url, **kw)
        self.assertEqual(len(res), 2 * 3 + 2)
        self.assertTrue(all(r.ok and r.served_by == "a" for r in res), res)
        convs = [r for r in res if r.kind == "chat"]
        self.assertEqual([(r.session, r.turn) for r in convs],
                         [("sess-7-0", 1), ("sess-7-0", 2), ("sess-7-0", 3),
                          ("sess-7-1", 1), ("sess-7-1", 2), ("sess-7-1", 3)])
        self.assertEqual(convs[0].hit_blocks, 0)
        self.assertGreater(convs[3].hit_blocks, 0)  # the shared system prompt
        for r in convs[1:3] + convs[4:]:
            self.assertGreater(r.hit_blocks, 0)
        self.assertTrue(all(r.kind == "oneshot" and r.session is None for r in res[6:]))
        # a fixed seed gives the same texts, hence the same cache behaviour
        admin("a", "reset", {"cache": True})
        again = client.run_load(url, **kw)
        self.assertEqual([(r.content, r.hit_blocks, r.prompt_blocks) for r in res],
                         [(r.content, r.hit_blocks, r.prompt_blocks) for r in again])
        summ = client.summarize(res)
        self.assertEqual(summ["a"]["requests"], 8)
        self.assertEqual(summ["total"]["status"], {"200": 8})
        self.assertIn("a", client.format_table(summ).split("\n")[1])
        # streamed, with a session header and a key
        c = client.Client(url, stream=True, max_tokens=3, api_key="k9")
        try:
            r = c.chat([{"role": "user", "content": "s"}], session="abc")
        finally:
            c.close()
        self.assertTrue(r.ok and r.done)
        self.assertEqual(r.chunks, 3 + 1)
        self.assertIsNotNone(r.ttft_ms)
        self.assertEqual(len(r.content.split()), 3)

    def test_client_reports_errors_and_reasons(self):
        admin("f", "fault", {"mode": "429", "retry_after": 5})
        c = client.Client(FLEET["f"]["url"])
        try:
            r = c.chat([{"role": "user", "content": "x"}],
                       headers={"x-ignored": "1"})
        finally:
            c.close()
        self.assertEqual((r.status, r.retry_after, r.served_by), (429, "5", "f"))
        self.assertIsNone(r.reason)
        # no listener at all
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            free = s.getsockname()[1]
        c = client.Client(f"http://127.0.0.1:{free}", timeout=2)
        try:
            r = c.chat([{"role": "user", "content": "x"}])
        finally:
            c.close()
        self.assertEqual(r.status, 0)
        self.assertIn("ConnectionRefusedError", r.error)
        summ = client.summarize([r])
        self.assertEqual(summ["-"]["status"], {"error": 1})

    def test_client_cli(self):
        with tempfile.TemporaryDirectory() as d:
            ready = os.path.join(d, "ready.json")
            fleet.write_ready(ready, list(FLEET.values()))
            out = os.path.join(d, "out.json")
            p = subprocess.run([sys.executable, os.path.join(HERE, "client.py"),
                                "--url", FLEET["a"]["url"], "--conversations", "2",
                                "--turns", "2", "--anonymous", "1", "--concurrency", "2",
                                "--stream", "--seed", "3", "--json", out, "--fleet", ready],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(p.returncode, 0, p.stderr)
            lines = p.stdout.splitlines()
            self.assertIn("seed 3: 5 requests", lines[0])
            self.assertTrue(lines[1].split()[:3] == ["server", "requests", "ok"], lines[1])
            self.assertTrue(any(ln.split()[:3] == ["a", "5", "5"] for ln in lines), p.stdout)
            self.assertTrue(any(ln.startswith("instance") for ln in lines), p.stdout)
            with open(out, encoding="utf-8") as f:
                self.assertEqual(len(json.load(f)), 5)


class LauncherTest(unittest.TestCase):
    def test_generated_fleet_and_sigterm(self):
        with tempfile.TemporaryDirectory() as d:
            p, ready, insts = start_fleet_process(
                ["--n", "3", "--base-port", "0", "--slow", "1", "--prefill-ms-per-block", "1"], d)
            try:
                self.assertEqual([i["name"] for i in insts], ["s1", "s2", "s3"])
                self.assertEqual([i["speed"] for i in insts], [1.0, 1.25, 0.2])
                self.assertEqual(insts[1]["models"], ["fake-model", "fake-large"])
                self.assertEqual(insts[0]["model"], "fake-model")
                self.assertEqual(len({i["port"] for i in insts}), 3)
                for i in insts:
                    st, h, _ = http_req(i["port"], "GET", "/v1/models")
                    self.assertEqual((st, h["x-served-by"]), (200, i["name"]))
            finally:
                rc = stop_process(p)
            self.assertEqual(rc, 0)
            self.assertFalse(os.path.exists(ready))
            for i in insts:
                with self.assertRaises(ConnectionRefusedError):
                    socket.create_connection(("127.0.0.1", i["port"]), timeout=TIMEOUT).close()

    def test_exits_when_stdin_closes(self):
        with tempfile.TemporaryDirectory() as d:
            p, _, _ = start_fleet_process(["--n", "1"], d)
            try:
                p.stdin.close()
                self.assertEqual(p.wait(10), 0)
            finally:
                stop_process(p)

    def test_config_errors_and_dump(self):
        with tempfile.TemporaryDirectory() as d:
            for bad, msg in (([{"name": "x", "colour": 1}], "unknown field"),
                             ([{"name": "x", "host": "10.0.0.1"}], "loopback"),
                             ([{"name": "x"}, {"name": "x"}], "duplicate"),
                             ([{"name": "x", "header_mode": "late"}], "header_mode"),
                             ([{"name": "x", "speed": 0}], "speed"),
                             ([], "non-empty")):
                path = os.path.join(d, "bad.json")
                with open(path, "w", encoding="utf-8") as f:
                    json.dump(bad, f)
                err = io.StringIO()
                with contextlib.redirect_stderr(err):
                    self.assertEqual(fleet.main(["--config", path]), 2, bad)
                self.assertIn(msg, err.getvalue())
        # once as a process: the exit code and the generated config
        p = subprocess.run([sys.executable, os.path.join(HERE, "fleet.py"), "--n", "2",
                            "--base-port", "18000", "--dump-config"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        cfg = json.loads(p.stdout)
        self.assertEqual([(c["name"], c["port"]) for c in cfg], [("s1", 18000), ("s2", 18001)])

    def test_background_fleet_in_process(self):
        cfgs = [{"name": "x1", "prefill_ms_per_block": 1}, {"name": "x2", "speed": 2.0}]
        with fleet.BackgroundFleet(cfgs) as fl:
            self.assertEqual([i["name"] for i in fl.instances], ["x1", "x2"])
            port = fl.instances[0]["port"]
            self.assertEqual(chat_at(port, "hello")[0], 200)
            inst = fl.fleet.by_name("x1")
            fl.call(inst.set_fault, {"mode": "503"})
            self.assertEqual(chat_at(port, "hello")[0], 503)
        with self.assertRaises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT).close()


def chat_at(port, text):
    return http_req(port, "POST", "/v1/chat/completions", chat_body(text))


if __name__ == "__main__":
    unittest.main(verbosity=2)
