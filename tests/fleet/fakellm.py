#!/usr/bin/env python3
"""fakellm: one simulated OpenAI-compatible inference instance (stdlib only).

The model, per instance:
- a prefix cache of the prompt text in blocks of `block_chars` characters,
  LRU, `cache_blocks` blocks. Block i's identity is a hash of the model name
  and text[0:(i+1)*B] (the last, partial block: the whole text), so reuse is
  prefix-only: a block hits only when every block before it hits too. The
  blocks of a finished prefill are touched last block first, so block 0 is the
  most recently used and eviction eats prompts from their tail, as vLLM does;
- a cap on running requests (`max_running`, <= 0: none) with a FIFO queue;
- time to first token = queue wait + base_ms + uncached blocks x
  prefill_ms_per_block; then one token every decode_ms_per_token (times
  1 + batch_slowdown x (running - 1)); every duration divided by `speed` and
  multiplied by the slow-fault factor;
- response headers with the first token (`header_mode` "first_token") or at
  once on arrival, before queueing and prefill ("immediate", as vLLM does).
  Not streamed: headers always come with the whole body, at the end.

HTTP/1.1 on asyncio streams: keep-alive, Content-Length or chunked request
bodies, Expect: 100-continue, chunked SSE responses (HTTP/1.0: close-delimited).

Endpoints: POST /v1/chat/completions, POST /v1/completions, GET /v1/models,
GET /health, any method under /v1/organization/ (POST 401, others 403, to every
credential, as an upstream answers a key that may not use its admin API: a
refusal the client shapes), and under /admin/ (never faulted, never counted):
  GET  /admin/stats   counters (see Instance.stats_json)
  POST /admin/reset   clears counters; {"cache": true} also empties the cache,
                      {"fault": true} also clears the fault
  GET  /admin/fault   the current fault
  POST /admin/fault   sets the fault (replaces it), JSON:
      mode         "none" | "429" | "503" | "500" | "401" | "slow" | "refuse" | "cut"
      retry_after  429/503: Retry-After value, int seconds or a string (HTTP
                   date) sent verbatim; 429 default 1, null: no header;
                   503: only when given
      key          401: the Authorization value refused ("Bearer k1"; a bare
                   "k1" matches "Bearer k1" too); absent: every request.
                   A refused key is refused on GET /v1/models too (revoked)
      factor       slow: multiplies prefill and decode times (default 5)
      cut_after    cut: tokens sent before the stream is cut (default half)
      ratio        share of requests the fault hits, 0..1 (default 1)
      delay        429/503/500/401: seconds before the error is answered
                   (an upstream that fails after a timeout; default 0)
      duration     seconds after which the fault clears itself
      health       status GET /health answers while the fault is on
  GET  /admin/config  the instance's configuration
"refuse" closes the listening socket and every open connection (a crashed
process); the port is bound again when the fault clears: through
`duration`, or through the separate `admin_port` listener, which stays up.

Every response carries x-served-by: NAME; generation responses also
x-cache-hit-blocks and x-prompt-blocks.

`api_keys` (instance config): when non-empty, /v1/ requests whose
Authorization is none of them get 401 (a bare "k" matches "Bearer k").
The counters also hold, per Authorization value seen on /v1/ (`by_auth`),
how many requests carried it, and how many requests carried any
x-warmlane-probe-* header (`probe_headers`).

Usage: fakellm.py [--name s1] [--port 8001] [--models a,b] [--speed 1] ...
(see --help); fleet.py starts several.
"""

import argparse
import asyncio
import collections
import dataclasses
import hashlib
import http
import ipaddress
import json
import random
import signal
import sys
import time

HEADER_MODES = ("first_token", "immediate")
FAULT_MODES = ("none", "429", "503", "500", "401", "slow", "refuse", "cut")

MAX_HEAD_BYTES = 64 * 1024
MAX_HEADERS = 100
MAX_BODY_BYTES = 64 * 1024 * 1024
MAX_REQUESTS_PER_CONN = 1_000_000
GONE_POLL_S = 0.025

VOCAB = (
    "warm lane cache block prefix token prompt model route server haproxy "
    "agent latency queue decode prefill batch stream chunk answer question "
    "the a of to and in is it that for on with as be this by from at or "
    "fleet fast slow ready steady river stone cloud light north south"
).split()


# --- configuration ----------------------------------------------------------

@dataclasses.dataclass
class InstanceConfig:
    name: str = "s1"
    host: str = "127.0.0.1"
    port: int = 0  # 0: an ephemeral port, reported by Instance.port
    models: list = dataclasses.field(default_factory=lambda: ["fake-model"])
    speed: float = 1.0
    prefill_ms_per_block: float = 20.0
    decode_ms_per_token: float = 5.0
    base_ms: float = 0.0
    cache_blocks: int = 256
    block_chars: int = 256
    max_running: int = 8
    header_mode: str = "first_token"
    default_max_tokens: int = 16
    max_tokens_limit: int = 4096
    batch_slowdown: float = 0.0
    admin_port: object = None  # None: no separate admin listener; 0: ephemeral
    keepalive_timeout: float = 75.0
    seed: int = 0
    api_keys: list = dataclasses.field(default_factory=list)

    @classmethod
    def from_dict(cls, d, where="instance"):
        """Builds a config from a JSON object; raises ValueError naming the
        field for unknown keys, wrong types and out-of-range values."""
        if not isinstance(d, dict):
            raise ValueError(f"{where}: must be an object")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ValueError(f"{where}: unknown field(s) {', '.join(unknown)}")
        cfg = cls(**d)
        cfg.validate(where)
        return cfg

    def validate(self, where="instance"):
        def bad(field, msg):
            raise ValueError(f"{where}.{field}: {msg}")

        def num(field, lo, hi=None, integer=False, lo_open=False):
            v = getattr(self, field)
            if isinstance(v, bool) or not isinstance(v, (int,) if integer else (int, float)):
                bad(field, "must be an integer" if integer else "must be a number")
            if (v <= lo if lo_open else v < lo) or (hi is not None and v > hi):
                bad(field, f"out of range ({v})")

        if not isinstance(self.name, str) or not self.name or any(c.isspace() for c in self.name):
            bad("name", "must be a non-empty string without spaces")
        if not isinstance(self.host, str) or not _is_loopback(self.host):
            bad("host", "must be a loopback address")
        num("port", 0, 65535, integer=True)
        if self.admin_port is not None:
            num("admin_port", 0, 65535, integer=True)
            if self.admin_port and self.admin_port == self.port:
                bad("admin_port", "must differ from port")
        if isinstance(self.models, str):
            self.models = [self.models]
        if (not isinstance(self.models, list) or not self.models
                or not all(isinstance(m, str) and m for m in self.models)):
            bad("models", "must be a non-empty list of strings")
        num("speed", 0, lo_open=True)
        num("prefill_ms_per_block", 0)
        num("decode_ms_per_token", 0)
        num("base_ms", 0)
        num("cache_blocks", 0, integer=True)
        num("block_chars", 1, integer=True)
        num("max_running", -1, integer=True)
        if self.header_mode not in HEADER_MODES:
            bad("header_mode", f"must be one of {', '.join(HEADER_MODES)}")
        num("default_max_tokens", 1, integer=True)
        num("max_tokens_limit", 1, integer=True)
        num("batch_slowdown", 0)
        num("keepalive_timeout", 0, lo_open=True)
        num("seed", 0, integer=True)
        if (not isinstance(self.api_keys, list)
                or not all(isinstance(k, str) and k for k in self.api_keys)):
            bad("api_keys", "must be a list of non-empty strings")

    def to_dict(self):
        return dataclasses.asdict(self)


def _is_loopback(host):
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# --- the prefix cache -------------------------------------------------------

class PrefixCache:
    """LRU set of block identities; see the module comment."""

    def __init__(self, capacity, block_chars):
        self.capacity = capacity
        self.block_chars = block_chars
        self._lru = collections.OrderedDict()

    def block_ids(self, model, text):
        h = hashlib.blake2b(model.encode() + b"\0", digest_size=16)
        ids = []
        b = self.block_chars
        for i in range(0, len(text), b):
            h.update(text[i:i + b].encode("utf-8", "surrogatepass"))
            ids.append(h.copy().digest())
        return ids

    def lookup(self, ids):
        """Number of leading blocks present (prefix-only reuse)."""
        n = 0
        for bid in ids:
            if bid not in self._lru:
                break
            n += 1
        return n

    def insert(self, ids):
        if self.capacity <= 0:
            return
        for bid in reversed(ids):
            if bid in self._lru:
                self._lru.move_to_end(bid)
            else:
                self._lru[bid] = None
        while len(self._lru) > self.capacity:
            self._lru.popitem(last=False)

    def clear(self):
        self._lru.clear()

    def __len__(self):
        return len(self._lru)


# --- FIFO slots -------------------------------------------------------------

class FifoSlots:
    """A counting semaphore that admits strictly in arrival order."""

    def __init__(self, n):
        self.n = n  # <= 0: unlimited
        self.used = 0
        self.waiters = collections.deque()  # only futures not yet granted
        self.max_queued = 0

    @property
    def queued(self):
        return len(self.waiters)

    async def acquire(self):
        if (self.n <= 0 or self.used < self.n) and not self.waiters:
            self.used += 1
            return
        fut = asyncio.get_running_loop().create_future()
        self.waiters.append(fut)
        self.max_queued = max(self.max_queued, len(self.waiters))
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release()  # granted, then cancelled: hand it on
            else:
                try:
                    self.waiters.remove(fut)
                except ValueError:
                    pass
            raise

    def release(self):
        while self.waiters:
            fut = self.waiters.popleft()
            if not fut.done():
                fut.set_result(None)  # the slot passes on; used unchanged
                return
        self.used -= 1


# --- HTTP/1.1 ---------------------------------------------------------------

class HttpError(Exception):
    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


class ClientGone(Exception):
    pass


class Request:
    __slots__ = ("method", "target", "path", "version", "headers", "body", "keep_alive")

    def header(self, name, default=None):
        return self.headers.get(name.lower(), default)


class Conn:
    def __init__(self, reader, writer):
        self.reader = reader
        self.writer = writer

    def gone(self):
        return self.writer.transport.is_closing() or self.reader.at_eof()

    async def send(self, data):
        if self.writer.transport.is_closing():
            raise ClientGone()
        self.writer.write(data)
        await self.writer.drain()


async def read_request(conn):
    """Reads one request; None on a clean end of connection before one."""
    r = conn.reader
    try:
        line = await r.readuntil(b"\n")
    except asyncio.IncompleteReadError as e:
        if not e.partial.strip():
            return None
        raise HttpError(400, "truncated request line")
    except asyncio.LimitOverrunError:
        raise HttpError(431, "request line too long")
    if not line.strip():
        line = await r.readuntil(b"\n")  # one stray CRLF between requests is allowed
    parts = line.decode("latin-1").strip().split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise HttpError(400, "bad request line")
    req = Request()
    req.method, req.target, req.version = parts
    req.path = req.target.split("?", 1)[0]
    req.headers = {}
    total = len(line)
    for _ in range(MAX_HEADERS + 1):
        try:
            h = await r.readuntil(b"\n")
        except asyncio.LimitOverrunError:
            raise HttpError(431, "header too long")
        total += len(h)
        if total > MAX_HEAD_BYTES:
            raise HttpError(431, "headers too large")
        if h in (b"\r\n", b"\n"):
            break
        name, sep, value = h.decode("latin-1").partition(":")
        if not sep or not name or name != name.strip():
            raise HttpError(400, "bad header line")
        name = name.lower()
        value = value.strip()
        if name in req.headers:
            req.headers[name] += ", " + value
        else:
            req.headers[name] = value
    else:
        raise HttpError(431, "too many headers")

    conn_hdr = req.headers.get("connection", "").lower()
    if req.version == "HTTP/1.0":
        req.keep_alive = "keep-alive" in conn_hdr
    else:
        req.keep_alive = "close" not in conn_hdr

    te = req.headers.get("transfer-encoding", "").lower()
    cl = req.headers.get("content-length")
    if (te or cl) and req.headers.get("expect", "").lower() == "100-continue":
        await conn.send(b"HTTP/1.1 100 Continue\r\n\r\n")
    if te:
        if te != "chunked":
            raise HttpError(501, "unsupported transfer-encoding")
        req.body = await _read_chunked(r)
    elif cl is not None:
        if not cl.isdigit():
            raise HttpError(400, "bad content-length")
        n = int(cl)
        if n > MAX_BODY_BYTES:
            raise HttpError(413, "body too large")
        req.body = await r.readexactly(n)
    else:
        req.body = b""
    return req


async def _read_chunked(r):
    body = bytearray()
    for _ in range(1_000_000):
        line = await r.readuntil(b"\n")
        size_s = line.split(b";", 1)[0].strip()
        try:
            size = int(size_s, 16)
        except ValueError:
            raise HttpError(400, "bad chunk size")
        if size == 0:
            for _ in range(MAX_HEADERS + 1):  # trailers
                if await r.readuntil(b"\n") in (b"\r\n", b"\n"):
                    return bytes(body)
            raise HttpError(400, "too many trailers")
        if len(body) + size > MAX_BODY_BYTES:
            raise HttpError(413, "body too large")
        body += await r.readexactly(size)
        await r.readexactly(2)
    raise HttpError(400, "too many chunks")


def response_head(status, headers, version="HTTP/1.1"):
    try:
        reason = http.HTTPStatus(status).phrase
    except ValueError:
        reason = "Status"
    lines = [f"{version} {status} {reason}"]
    lines += [f"{k}: {v}" for k, v in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def chunk(data):
    return b"%x\r\n%s\r\n" % (len(data), data)


def sse(obj):
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


# --- prompts and outputs ----------------------------------------------------

def chat_prompt_text(messages):
    """Renders messages so that a conversation that grows by appending
    messages renders to a text that extends the previous one."""
    out = []
    for m in messages:
        if not isinstance(m, dict):
            raise HttpError(400, "each message must be an object")
        role = m.get("role", "user")
        content = m.get("content", "")
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content
                              if isinstance(p, dict) and isinstance(p.get("text", ""), str))
        elif content is None:
            content = ""
        elif not isinstance(content, str):
            content = json.dumps(content, sort_keys=True)
        out.append(f"<|{role}|>\n{content}\n")
    return "".join(out) + "<|assistant|>\n"


def completion_prompt_text(prompt):
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list) and all(isinstance(p, str) for p in prompt):
        return "".join(prompt)
    if isinstance(prompt, list) and all(isinstance(p, int) for p in prompt):
        return " ".join(str(p) for p in prompt)  # token ids: one "word" each
    raise HttpError(400, "prompt must be a string or a list of strings")


def output_tokens(text, n):
    """Deterministic in the prompt alone, so a conversation replayed on any
    instance grows the same text."""
    seed = int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"),
                                          digest_size=8).digest(), "big")
    rng = random.Random(seed)
    return [" " + rng.choice(VOCAB) for _ in range(n)]


def error_body(status, message, etype, code=None):
    return json.dumps({"error": {"message": message, "type": etype,
                                 "param": None, "code": code}}).encode()


# --- the instance -----------------------------------------------------------

class Instance:
    """One simulated inference server. start()/stop() on a running loop."""

    def __init__(self, cfg):
        cfg.validate(cfg.name)
        self.cfg = cfg
        self.cache = PrefixCache(cfg.cache_blocks, cfg.block_chars)
        self.slots = FifoSlots(cfg.max_running)
        self.port = cfg.port
        self.admin_port = cfg.admin_port
        self._server = None
        self._admin_server = None
        self._conns = set()  # Conn objects of the main port
        self._tasks = set()
        self._fault = {"mode": "none"}
        self._fault_timer = None
        self._rng = random.Random(cfg.seed)
        self._seq = 0
        self._stopping = False
        self._reopen_task = None
        self.in_flight = 0
        self.running = 0
        self._reset_counters()

    # -- lifecycle

    async def start(self):
        self._server = await self._listen(self.cfg.port)
        self.port = self._server.sockets[0].getsockname()[1]
        if self.cfg.admin_port is not None:
            self._admin_server = await asyncio.start_server(
                lambda r, w: self._serve(r, w, admin_only=True),
                self.cfg.host, self.cfg.admin_port, limit=MAX_HEAD_BYTES)
            self.admin_port = self._admin_server.sockets[0].getsockname()[1]
        return self

    async def _listen(self, port):
        return await asyncio.start_server(
            lambda r, w: self._serve(r, w, admin_only=False),
            self.cfg.host, port, limit=MAX_HEAD_BYTES, reuse_address=True)

    async def stop(self, timeout=2.0):
        self._stopping = True
        if self._fault_timer:
            self._fault_timer.cancel()
        if self._reopen_task:
            self._reopen_task.cancel()
        for srv in (self._server, self._admin_server):
            if srv is not None:
                srv.close()
        self._server = self._admin_server = None
        for t in list(self._tasks):
            t.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=timeout)

    @property
    def listening(self):
        return self._server is not None

    @property
    def url(self):
        host = f"[{self.cfg.host}]" if ":" in self.cfg.host else self.cfg.host
        return f"http://{host}:{self.port}"

    def info(self):
        return {"name": self.cfg.name, "host": self.cfg.host, "port": self.port,
                "url": self.url, "model": self.cfg.models[0],
                "models": list(self.cfg.models), "admin_port": self.admin_port,
                "speed": self.cfg.speed, "header_mode": self.cfg.header_mode,
                "max_running": self.cfg.max_running,
                "cache_blocks": self.cfg.cache_blocks}

    # -- faults

    @property
    def fault(self):
        return dict(self._fault)

    def set_fault(self, spec, keep=None):
        """Replaces the fault with `spec` (see the module comment); raises
        ValueError on a bad spec, leaving the fault as it was. Going into
        "refuse" aborts every connection of the main port but `keep` (the
        admin connection that asked, which the caller closes after its
        answer). Returns the new fault."""
        f = self._parse_fault(spec)
        was_refusing = self._fault["mode"] == "refuse"
        self._fault = f
        if self._fault_timer:
            self._fault_timer.cancel()
            self._fault_timer = None
        if "duration" in f:
            loop = asyncio.get_running_loop()
            self._fault_timer = loop.call_later(f["duration"], self._fault_expired, f)
        if f["mode"] == "refuse" and not was_refusing:
            self._close_main(keep=keep)
        elif f["mode"] != "refuse" and was_refusing:
            self._schedule_reopen()
        return self.fault

    @staticmethod
    def _parse_fault(spec):
        if not isinstance(spec, dict):
            raise ValueError("fault must be a JSON object")
        known = {"mode", "retry_after", "key", "factor", "cut_after", "ratio",
                 "duration", "health", "delay"}
        unknown = sorted(set(spec) - known)
        if unknown:
            raise ValueError(f"unknown fault field(s) {', '.join(unknown)}")
        mode = str(spec.get("mode", "none"))
        if mode not in FAULT_MODES:
            raise ValueError(f"mode must be one of {', '.join(FAULT_MODES)}")
        f = {"mode": mode}

        def number(k):
            v = spec[k]
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise ValueError(f"{k} must be a number")
            return float(v)

        if "retry_after" in spec:
            ra = spec["retry_after"]
            if isinstance(ra, str) or ra is None:
                f["retry_after"] = ra
            elif number("retry_after") >= 0:
                f["retry_after"] = int(ra)
            else:
                raise ValueError("retry_after must be >= 0")
        elif mode == "429":
            f["retry_after"] = 1
        if spec.get("key") is not None:
            if not isinstance(spec["key"], str):
                raise ValueError("key must be a string")
            f["key"] = spec["key"]
        if spec.get("factor") is not None:
            if number("factor") <= 0:
                raise ValueError("factor must be > 0")
            f["factor"] = number("factor")
        elif mode == "slow":
            f["factor"] = 5.0
        if spec.get("ratio") is not None:
            if not 0 <= number("ratio") <= 1:
                raise ValueError("ratio must be within 0..1")
            f["ratio"] = number("ratio")
        if spec.get("duration") is not None:
            if number("duration") <= 0:
                raise ValueError("duration must be > 0")
            f["duration"] = number("duration")
        if spec.get("delay") is not None:
            if not 0 <= number("delay") <= 60:
                raise ValueError("delay must be within 0..60")
            f["delay"] = number("delay")
        for k in ("cut_after", "health"):
            if spec.get(k) is not None:
                v = spec[k]
                if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                    raise ValueError(f"{k} must be a non-negative integer")
                f[k] = v
        if "health" in f and not 100 <= f["health"] <= 599:
            raise ValueError("health must be an HTTP status")
        return f

    def _fault_expired(self, f):
        if self._fault is f:
            self._fault_timer = None
            self.set_fault({"mode": "none"})

    def _fault_hits(self):
        ratio = self._fault.get("ratio")
        return ratio is None or self._rng.random() < ratio

    def _close_main(self, keep):
        """Closes the main listener and aborts its connections but `keep`,
        which the caller closes gracefully once its response is out."""
        if self._server is not None:
            self._server.close()
            self._server = None
        for c in list(self._conns):
            if c is not keep:
                c.writer.transport.abort()

    def _schedule_reopen(self):
        if self._stopping or self._server is not None:
            return
        if self._reopen_task is None or self._reopen_task.done():
            self._reopen_task = asyncio.get_running_loop().create_task(self._reopen())

    async def _reopen(self):
        for _ in range(200):  # about 10 s
            if self._stopping or self._fault["mode"] == "refuse" or self._server is not None:
                return
            try:
                self._server = await self._listen(self.port)
                return
            except OSError:
                await asyncio.sleep(0.05)
        print(f"fakellm {self.cfg.name}: could not bind port {self.port} again",
              file=sys.stderr)

    # -- stats

    def _reset_counters(self):
        self.requests = 0
        self.by_status = collections.Counter()
        self.hit_blocks = 0
        self.prompt_blocks = 0
        self.completion_tokens = 0
        self.cut = 0
        self.gone = 0
        self.connections = 0
        self.by_auth = collections.Counter()
        self.probe_headers = 0
        self.max_concurrent = self.running
        self.max_in_flight = self.in_flight
        self.slots.max_queued = self.slots.queued

    def stats_json(self):
        return {
            "name": self.cfg.name,
            "requests": self.requests,
            "by_status": {str(k): v for k, v in sorted(self.by_status.items())},
            "cache_hit_blocks": self.hit_blocks,
            "prompt_blocks": self.prompt_blocks,
            "hit_rate": self.hit_blocks / self.prompt_blocks if self.prompt_blocks else 0.0,
            "completion_tokens": self.completion_tokens,
            "in_flight": self.in_flight,
            "running": self.running,
            "queued": self.slots.queued,
            "max_concurrent": self.max_concurrent,
            "max_in_flight": self.max_in_flight,
            "max_queued": self.slots.max_queued,
            "cut": self.cut,
            "client_gone": self.gone,
            "connections": self.connections,
            "cache_used_blocks": len(self.cache),
            "listening": self.listening,
            "fault": self.fault,
            "by_auth": dict(self.by_auth),
            "probe_headers": self.probe_headers,
        }

    # -- connections

    async def _serve(self, reader, writer, admin_only):
        task = asyncio.current_task()
        self._tasks.add(task)
        conn = Conn(reader, writer)
        if not admin_only:
            if self._server is None:  # accepted just before "refuse" or stop
                self._tasks.discard(task)
                writer.transport.abort()
                return
            self._conns.add(conn)
            self.connections += 1
        try:
            for _ in range(MAX_REQUESTS_PER_CONN):
                try:
                    req = await asyncio.wait_for(read_request(conn), self.cfg.keepalive_timeout)
                except HttpError as e:
                    await self._reply(conn, None, e.status,
                                      error_body(e.status, str(e), "invalid_request_error"),
                                      close=True)
                    break
                except (asyncio.TimeoutError, asyncio.IncompleteReadError,
                        asyncio.LimitOverrunError):
                    break
                if req is None:
                    break
                keep = await self._dispatch(conn, req, admin_only)
                if not keep or self._stopping:
                    break
        except (ConnectionError, ClientGone, OSError):
            pass
        except asyncio.CancelledError:
            writer.transport.abort()
            raise
        finally:
            self._conns.discard(conn)
            self._tasks.discard(task)
            if not writer.transport.is_closing():
                writer.close()

    def _base_headers(self, extra=()):
        return [("server", "warmlane-fakellm"),
                ("date", time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime())),
                ("x-served-by", self.cfg.name)] + list(extra)

    async def _reply(self, conn, req, status, body, ctype="application/json",
                     extra=(), close=False, count=False):
        keep = (req is not None and req.keep_alive and not close and not self._stopping
                and not (self._fault["mode"] == "refuse" and conn in self._conns))
        headers = self._base_headers(extra)
        headers += [("content-type", ctype), ("content-length", str(len(body)))]
        if not keep:
            headers.append(("connection", "close"))
        elif req.version == "HTTP/1.0":
            headers.append(("connection", "keep-alive"))
        if count:
            self.by_status[status] += 1
        data = response_head(status, headers, "HTTP/1.1")
        if req is None or req.method != "HEAD":
            data += body
        await conn.send(data)
        return keep

    async def _dispatch(self, conn, req, admin_only):
        p = req.path
        if p.startswith("/admin/"):
            return await self._admin(conn, req)
        if admin_only:
            return await self._reply(conn, req, 404, error_body(404, "admin port", "not_found"))
        if p == "/health":
            if req.method not in ("GET", "HEAD"):
                return await self._reply(conn, req, 405, b"")
            st = self._fault.get("health") or 200
            return await self._reply(conn, req, st, b"", ctype="text/plain")
        if p.startswith("/v1/"):
            auth = req.header("authorization", "")
            self.by_auth[auth] += 1
            if any(k.startswith("x-warmlane-probe-") for k in req.headers):
                self.probe_headers += 1
            err = self._auth_error(req)
            if err is None and p.startswith("/v1/organization/"):
                # as OpenAI answers a project key: 401 for missing scopes
                # on a write, 403 otherwise
                st = 401 if req.method == "POST" else 403
                err = st, [], error_body(st, "This key may not use the organization API.",
                                         "invalid_request_error", "insufficient_permissions")
            if err is None and p == "/v1/models" and self._fault["mode"] == "401":
                err = self._error_for_fault(req)
            if err:
                st, extra, body = err
                return await self._reply(conn, req, st, body, extra=extra, count=True)
        if p == "/v1/models":
            if req.method not in ("GET", "HEAD"):
                return await self._reply(conn, req, 405, error_body(405, "use GET", "invalid_request_error"))
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "warmlane-fake"}
                    for m in self.cfg.models]
            return await self._reply(conn, req, 200, json.dumps({"object": "list", "data": data}).encode())
        if p in ("/v1/chat/completions", "/v1/completions"):
            if req.method != "POST":
                return await self._reply(conn, req, 405, error_body(405, "use POST", "invalid_request_error"))
            return await self._generate(conn, req, chat=p == "/v1/chat/completions")
        return await self._reply(conn, req, 404, error_body(404, f"no route {p}", "not_found"))

    async def _admin(self, conn, req):
        p, m = req.path, req.method
        try:
            spec = json.loads(req.body) if req.body.strip() else {}
        except ValueError:
            return await self._reply(conn, req, 400, error_body(400, "bad JSON", "invalid_request_error"))
        if p == "/admin/stats" and m in ("GET", "HEAD"):
            return await self._reply(conn, req, 200, json.dumps(self.stats_json()).encode())
        if p == "/admin/config" and m in ("GET", "HEAD"):
            return await self._reply(conn, req, 200, json.dumps(self.cfg.to_dict()).encode())
        if p == "/admin/fault" and m in ("GET", "HEAD"):
            return await self._reply(conn, req, 200, json.dumps(self.fault).encode())
        if p == "/admin/reset" and m == "POST":
            if not isinstance(spec, dict):
                return await self._reply(conn, req, 400, error_body(400, "object expected", "invalid_request_error"))
            if spec.get("cache"):
                self.cache.clear()
            if spec.get("fault"):
                self.set_fault({"mode": "none"})
            self._reset_counters()
            return await self._reply(conn, req, 200, json.dumps(self.stats_json()).encode())
        if p == "/admin/fault" and m == "POST":
            main_conn = conn in self._conns
            try:
                f = self.set_fault(spec, keep=conn if main_conn else None)
            except ValueError as e:
                return await self._reply(conn, req, 400, error_body(400, str(e), "invalid_request_error"))
            # under "refuse", _reply closes a main-port connection after this answer
            return await self._reply(conn, req, 200, json.dumps(f).encode())
        return await self._reply(conn, req, 404, error_body(404, f"no admin route {m} {p}", "not_found"))

    # -- generation

    def _scale(self):
        f = self._fault.get("factor", 1.0) if self._fault["mode"] == "slow" else 1.0
        return f / self.cfg.speed

    def _auth_error(self, req):
        """401 when api_keys is set and the request's credential is none of them."""
        if not self.cfg.api_keys:
            return None
        auth = req.header("authorization", "")
        for k in self.cfg.api_keys:
            if auth == k or auth == "Bearer " + k:
                return None
        return 401, [], error_body(401, "Incorrect API key provided.",
                                   "invalid_request_error", "invalid_api_key")

    def _error_for_fault(self, req):
        """(status, extra headers, body) when the fault answers this request."""
        f = self._fault
        mode = f["mode"]
        if mode in ("none", "slow", "cut", "refuse"):
            return None
        if mode == "401":
            key = f.get("key")
            auth = req.header("authorization", "")
            if key is not None and auth != key and auth != "Bearer " + key:
                return None
            if not self._fault_hits():
                return None
            return 401, [], error_body(401, "Incorrect API key provided.",
                                       "invalid_request_error", "invalid_api_key")
        if not self._fault_hits():
            return None
        extra = []
        if f.get("retry_after") is not None:
            ra = f["retry_after"]
            extra.append(("retry-after", ra if isinstance(ra, str) else str(int(ra))))
        if mode == "429":
            return 429, extra, error_body(429, "Rate limit reached.", "rate_limit_error",
                                          "rate_limit_exceeded")
        if mode == "503":
            return 503, extra, error_body(503, "The server is overloaded.", "server_error")
        return 500, [], error_body(500, "Internal server error.", "server_error")

    async def _generate(self, conn, req, chat):
        self.requests += 1
        delay = self._fault.get("delay", 0.0)
        err = self._error_for_fault(req)
        if err:
            st, extra, body = err
            if delay > 0:
                await asyncio.sleep(delay)
            return await self._reply(conn, req, st, body, extra=extra, count=True)
        try:
            body = json.loads(req.body)
            if not isinstance(body, dict):
                raise HttpError(400, "request body must be a JSON object")
            model = body.get("model") or self.cfg.models[0]
            if not isinstance(model, str):
                raise HttpError(400, "model must be a string")
            if chat:
                msgs = body.get("messages")
                if not isinstance(msgs, list) or not msgs:
                    raise HttpError(400, "messages must be a non-empty list")
                text = chat_prompt_text(msgs)
            else:
                text = completion_prompt_text(body.get("prompt", ""))
            n_out = body.get("max_completion_tokens", body.get("max_tokens"))
            if n_out is None:
                n_out = self.cfg.default_max_tokens
                finish = "stop"
            else:
                finish = "length"
            if isinstance(n_out, bool) or not isinstance(n_out, int) or n_out < 1:
                raise HttpError(400, "max_tokens must be a positive integer")
            n_out = min(n_out, self.cfg.max_tokens_limit)
            stream = bool(body.get("stream"))
            so = body.get("stream_options")
            include_usage = stream and isinstance(so, dict) and bool(so.get("include_usage"))
        except ValueError:
            return await self._reply(conn, req, 400, error_body(400, "bad JSON body", "invalid_request_error"),
                                     count=True)
        except HttpError as e:
            return await self._reply(conn, req, e.status, error_body(e.status, str(e), "invalid_request_error"),
                                     count=True)
        if model not in self.cfg.models:
            return await self._reply(conn, req, 404, error_body(
                404, f"The model `{model}` does not exist.", "invalid_request_error",
                "model_not_found"), count=True)

        ids = self.cache.block_ids(model, text)
        hit = self.cache.lookup(ids)
        self.prompt_blocks += len(ids)
        self.hit_blocks += hit
        self._seq += 1
        ctx = {
            "chat": chat, "model": model, "ids": ids, "hit": hit, "text": text,
            "n_out": n_out, "finish": finish, "stream": stream,
            "include_usage": include_usage,
            "id": f"{'chatcmpl' if chat else 'cmpl'}-{self.cfg.name}-{self._seq}",
            "created": int(time.time()), "head_sent": False,
            "prompt_tokens": max(1, len(text) // 4),
            "cached_tokens": min(len(text), hit * self.cfg.block_chars) // 4,
        }
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        work = asyncio.get_running_loop().create_task(self._work(conn, req, ctx))
        watch = asyncio.get_running_loop().create_task(self._watch(conn, work))
        try:
            return await work
        except asyncio.CancelledError:
            if watch.done() and not watch.cancelled() and watch.result():
                self.gone += 1
                return False  # the client went away
            raise
        except (ClientGone, ConnectionError):
            self.gone += 1
            return False
        finally:
            watch.cancel()
            if not work.done():
                work.cancel()
            self.in_flight -= 1

    async def _watch(self, conn, work):
        for _ in range(100_000_000):
            if work.done():
                return False
            await asyncio.sleep(GONE_POLL_S)
            if conn.gone() and not work.done():
                work.cancel()
                return True
        return False

    @staticmethod
    def _gen_extra(ctx):
        return [("x-cache-hit-blocks", str(ctx["hit"])),
                ("x-prompt-blocks", str(len(ctx["ids"])))]

    def _gen_headers(self, ctx):
        return self._base_headers(self._gen_extra(ctx))

    async def _send_stream_head(self, conn, req, ctx):
        headers = self._gen_headers(ctx) + [("content-type", "text/event-stream"),
                                            ("cache-control", "no-cache")]
        if req.version == "HTTP/1.0":
            headers.append(("connection", "close"))
            ctx["chunked"] = False
        else:
            headers.append(("transfer-encoding", "chunked"))
            ctx["chunked"] = True
        self.by_status[200] += 1
        ctx["head_sent"] = True
        await conn.send(response_head(200, headers))

    async def _work(self, conn, req, ctx):
        loop = asyncio.get_running_loop()
        cfg = self.cfg
        if ctx["stream"] and cfg.header_mode == "immediate":
            await self._send_stream_head(conn, req, ctx)
        await self.slots.acquire()
        try:
            self.running += 1
            self.max_concurrent = max(self.max_concurrent, self.running)
            uncached = len(ctx["ids"]) - ctx["hit"]
            t = loop.time() + (cfg.base_ms + uncached * cfg.prefill_ms_per_block) * self._scale() / 1000
            await _sleep_until(loop, t)
            self.cache.insert(ctx["ids"])
            tokens = output_tokens(ctx["text"], ctx["n_out"])
            cut_at = None
            if self._fault["mode"] == "cut" and self._fault_hits():
                cut_at = self._fault.get("cut_after", len(tokens) // 2)
            if ctx["stream"]:
                return await self._stream(conn, req, ctx, tokens, t, cut_at)
            for _ in range(len(tokens) - 1):
                t += self._decode_s()
            await _sleep_until(loop, t)
            self.completion_tokens += len(tokens)
            body = json.dumps(self._full_response(ctx, tokens)).encode()
            if cut_at is not None:
                headers = self._gen_headers(ctx) + [("content-type", "application/json"),
                                                    ("content-length", str(len(body)))]
                self.by_status[200] += 1
                self.cut += 1
                await conn.send(response_head(200, headers) + body[:len(body) // 2])
                conn.writer.close()
                return False
            return await self._reply(conn, req, 200, body, extra=self._gen_extra(ctx), count=True)
        finally:
            self.running -= 1
            self.slots.release()

    def _decode_s(self):
        batch = 1.0 + self.cfg.batch_slowdown * max(0, self.running - 1)
        return self.cfg.decode_ms_per_token * batch * self._scale() / 1000

    async def _stream(self, conn, req, ctx, tokens, t, cut_at):
        loop = asyncio.get_running_loop()
        if not ctx["head_sent"]:
            await self._send_stream_head(conn, req, ctx)
        wrap = chunk if ctx["chunked"] else (lambda b: b)
        for i, tok in enumerate(tokens):
            if i > 0:
                t += self._decode_s()
                await _sleep_until(loop, t)
            if cut_at is not None and i >= cut_at:
                self.cut += 1
                conn.writer.close()  # FIN after what was sent: no last chunk, no [DONE]
                return False
            self.completion_tokens += 1
            if ctx["chat"]:
                delta = {"content": tok}
                if i == 0:
                    delta = {"role": "assistant", "content": tok}
                choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}
                obj = {"id": ctx["id"], "object": "chat.completion.chunk",
                       "created": ctx["created"], "model": ctx["model"], "choices": [choice]}
            else:
                choice = {"index": 0, "text": tok, "logprobs": None, "finish_reason": None}
                obj = {"id": ctx["id"], "object": "text_completion",
                       "created": ctx["created"], "model": ctx["model"], "choices": [choice]}
            await conn.send(wrap(sse(obj)))
        tail = []
        if ctx["chat"]:
            choice = {"index": 0, "delta": {}, "logprobs": None, "finish_reason": ctx["finish"]}
            obj = {"id": ctx["id"], "object": "chat.completion.chunk", "created": ctx["created"],
                   "model": ctx["model"], "choices": [choice]}
        else:
            choice = {"index": 0, "text": "", "logprobs": None, "finish_reason": ctx["finish"]}
            obj = {"id": ctx["id"], "object": "text_completion", "created": ctx["created"],
                   "model": ctx["model"], "choices": [choice]}
        tail.append(wrap(sse(obj)))
        if ctx["include_usage"]:
            obj = {"id": ctx["id"], "object": obj["object"], "created": ctx["created"],
                   "model": ctx["model"], "choices": [], "usage": self._usage(ctx, len(tokens))}
            tail.append(wrap(sse(obj)))
        tail.append(wrap(b"data: [DONE]\n\n"))
        if ctx["chunked"]:
            tail.append(b"0\r\n\r\n")
        await conn.send(b"".join(tail))
        if not ctx["chunked"]:
            conn.writer.close()
            return False
        return req.keep_alive and not self._stopping and self._fault["mode"] != "refuse"

    def _usage(self, ctx, n):
        return {"prompt_tokens": ctx["prompt_tokens"], "completion_tokens": n,
                "total_tokens": ctx["prompt_tokens"] + n,
                "prompt_tokens_details": {"cached_tokens": ctx["cached_tokens"]}}

    def _full_response(self, ctx, tokens):
        text = "".join(tokens)
        if ctx["chat"]:
            choice = {"index": 0, "message": {"role": "assistant", "content": text},
                      "logprobs": None, "finish_reason": ctx["finish"]}
            obj = "chat.completion"
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": ctx["finish"]}
            obj = "text_completion"
        return {"id": ctx["id"], "object": obj, "created": ctx["created"],
                "model": ctx["model"], "choices": [choice],
                "usage": self._usage(ctx, len(tokens))}


async def _sleep_until(loop, deadline):
    d = deadline - loop.time()
    if d > 0:
        await asyncio.sleep(d)


# --- standalone ---------------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(description="One fake OpenAI-compatible inference instance.")
    d = InstanceConfig()
    ap.add_argument("--name", default=d.name)
    ap.add_argument("--host", default=d.host, help="a loopback address")
    ap.add_argument("--port", type=int, default=8001, help="0: ephemeral (printed)")
    ap.add_argument("--admin-port", type=int, default=None,
                    help="extra listener for /admin/ only (stays up under 'refuse')")
    ap.add_argument("--models", default=",".join(d.models), help="comma-separated")
    ap.add_argument("--speed", type=float, default=d.speed)
    ap.add_argument("--prefill-ms-per-block", type=float, default=d.prefill_ms_per_block)
    ap.add_argument("--decode-ms-per-token", type=float, default=d.decode_ms_per_token)
    ap.add_argument("--base-ms", type=float, default=d.base_ms)
    ap.add_argument("--cache-blocks", type=int, default=d.cache_blocks)
    ap.add_argument("--block-chars", type=int, default=d.block_chars)
    ap.add_argument("--max-running", type=int, default=d.max_running)
    ap.add_argument("--header-mode", choices=HEADER_MODES, default=d.header_mode)
    ap.add_argument("--default-max-tokens", type=int, default=d.default_max_tokens)
    ap.add_argument("--batch-slowdown", type=float, default=d.batch_slowdown)
    a = ap.parse_args(argv)
    try:
        cfg = InstanceConfig(
            name=a.name, host=a.host, port=a.port, admin_port=a.admin_port,
            models=[m for m in a.models.split(",") if m], speed=a.speed,
            prefill_ms_per_block=a.prefill_ms_per_block,
            decode_ms_per_token=a.decode_ms_per_token, base_ms=a.base_ms,
            cache_blocks=a.cache_blocks, block_chars=a.block_chars,
            max_running=a.max_running, header_mode=a.header_mode,
            default_max_tokens=a.default_max_tokens, batch_slowdown=a.batch_slowdown)
        cfg.validate("fakellm")
    except ValueError as e:
        print(f"fakellm: {e}", file=sys.stderr)
        return 2

    async def run():
        inst = await Instance(cfg).start()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for s in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(s, stop.set)
        print(json.dumps(inst.info()), flush=True)
        await stop.wait()
        await inst.stop()

    asyncio.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
