#!/usr/bin/env python3
"""client: load driver and library for the fake fleet, through HAProxy or not
(stdlib only).

Library:
  c = Client("http://127.0.0.1:8080", model="fake-model", api_key="k1")
  r = c.chat(messages, session="s-1", stream=True)   # -> Result
  conv = Conversation(c, session="s-1", seed=1); conv.turn(); conv.turn()
  results = run_load(url, conversations=4, turns=5, anonymous=8, seed=1)
  print(format_table(summarize(results)))
A Result has: kind, session, turn, status (0: no HTTP answer), served_by
(x-served-by), reason (x-warmlane-reason), warmlane_server
(x-warmlane-server), latency_ms, ttfb_ms (headers), ttft_ms (first token;
streamed only), hit_blocks, prompt_blocks (x-cache-hit-blocks,
x-prompt-blocks), retry_after, done ([DONE] seen / body complete), chunks,
content, error.

Conversations share a system prompt; each has its own context, and each
turn appends the server's answer and a new question, so every prompt extends
the previous one. Texts depend only on the seed (answers are deterministic in
the prompt), so a run is the same whichever server answers.

CLI:
  client.py --url URL [--conversations 4] [--turns 5] [--anonymous 8]
            [--seed 1] [--concurrency 4] [--model M] [--api-keys k1,k2]
            [--stream] [--no-session] [--model-header] [--max-tokens 8]
            [--system-chars 1024] [--context-chars 1024] [--question-chars 200]
            [--think-ms 0] [--timeout 30] [--json FILE] [--fleet READY_FILE]
prints a per-server table (requests, answers by status, hit rate, reasons);
--fleet also prints each instance's own /admin/stats. Exit 0 when at least
one request got a 2xx, else 1.
"""

import argparse
import concurrent.futures
import dataclasses
import http.client
import json
import random
import sys
import threading
import time
import urllib.parse

WORDS = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima "
    "mike november oscar papa quebec romeo sierra tango uniform victor whiskey "
    "xray yankee zulu cache prefix block route warm lane fleet model token"
).split()


@dataclasses.dataclass
class Result:
    kind: str = "chat"
    session: str = None
    turn: int = 0
    status: int = 0
    served_by: str = None
    reason: str = None
    warmlane_server: str = None
    latency_ms: float = 0.0
    ttfb_ms: float = None
    ttft_ms: float = None
    hit_blocks: int = None
    prompt_blocks: int = None
    retry_after: str = None
    done: bool = False
    chunks: int = 0
    content: str = ""
    error: str = None
    headers: dict = dataclasses.field(default_factory=dict)

    @property
    def ok(self):
        return 200 <= self.status < 300


def text_of(rng, n):
    """About n characters of words from rng."""
    out, size = [], 0
    for _ in range(max(1, n)):
        if size >= n:
            break
        w = rng.choice(WORDS)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)[:max(1, n)]


def _int(v):
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


class Client:
    """One keep-alive connection per thread to `url` (http only)."""

    def __init__(self, url, model=None, api_key=None, timeout=30.0, stream=False,
                 max_tokens=8, model_header=False, headers=None):
        u = urllib.parse.urlsplit(url)
        if u.scheme != "http" or not u.hostname:
            raise ValueError(f"client: need an http:// URL, got {url!r}")
        self.host = u.hostname
        self.port = u.port or 80
        self.base = u.path.rstrip("/")
        self.model = model
        self.api_key = api_key
        self.timeout = timeout
        self.stream = stream
        self.max_tokens = max_tokens
        self.model_header = model_header
        self.headers = dict(headers or {})
        self._local = threading.local()
        self._all = []
        self._lock = threading.Lock()

    def _conn(self):
        c = getattr(self._local, "conn", None)
        if c is None:
            c = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            self._local.conn = c
            with self._lock:
                self._all.append(c)
        return c

    def _drop(self):
        c = getattr(self._local, "conn", None)
        if c is not None:
            c.close()
            self._local.conn = None

    def close(self):
        with self._lock:
            for c in self._all:
                c.close()
            self._all.clear()
        self._local = threading.local()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def chat(self, messages, session=None, model=None, api_key=None, stream=None,
             max_tokens=None, headers=None, kind="chat", turn=0):
        body = {"messages": messages}  # openai-python's order: model after messages
        return self._post("/v1/chat/completions", body, session, model, api_key, stream,
                          max_tokens, headers, kind, turn)

    def completion(self, prompt, session=None, model=None, api_key=None, stream=None,
                   max_tokens=None, headers=None, kind="completion", turn=0):
        body = {"prompt": prompt}
        return self._post("/v1/completions", body, session, model, api_key, stream,
                          max_tokens, headers, kind, turn)

    def _post(self, path, body, session, model, api_key, stream, max_tokens, headers,
              kind, turn):
        model = model or self.model
        stream = self.stream if stream is None else stream
        api_key = api_key or self.api_key
        if model:
            body["model"] = model
        body["max_tokens"] = max_tokens or self.max_tokens
        if stream:
            body["stream"] = True
        h = {"content-type": "application/json", "accept": "application/json"}
        h.update(self.headers)
        if session:
            h["x-session-id"] = session
        if api_key:
            h["authorization"] = api_key if api_key.startswith("Bearer ") else "Bearer " + api_key
        if model and self.model_header:
            h["x-model"] = model
        if headers:
            h.update(headers)
        data = json.dumps(body).encode()
        res = Result(kind=kind, session=session, turn=turn)
        t0 = time.monotonic()
        # one retry on a stale keep-alive connection (closed by the peer while idle)
        for attempt in range(2):
            conn = self._conn()
            fresh = conn.sock is None
            try:
                conn.request("POST", self.base + path, body=data, headers=h)
                resp = conn.getresponse()
                break
            except (ConnectionError, http.client.HTTPException, OSError) as e:
                self._drop()
                if attempt == 1 or fresh or isinstance(e, TimeoutError):
                    res.error = f"{type(e).__name__}: {e}"
                    res.latency_ms = (time.monotonic() - t0) * 1000
                    return res
                t0 = time.monotonic()
        res.ttfb_ms = (time.monotonic() - t0) * 1000
        res.status = resp.status
        res.headers = {k.lower(): v for k, v in resp.getheaders()}
        res.served_by = res.headers.get("x-served-by")
        res.reason = res.headers.get("x-warmlane-reason")
        res.warmlane_server = res.headers.get("x-warmlane-server")
        res.hit_blocks = _int(res.headers.get("x-cache-hit-blocks"))
        res.prompt_blocks = _int(res.headers.get("x-prompt-blocks"))
        res.retry_after = res.headers.get("retry-after")
        try:
            if stream and res.ok and "text/event-stream" in res.headers.get("content-type", ""):
                self._read_sse(resp, res, t0)
            else:
                raw = resp.read()
                res.done = True
                if res.ok:
                    try:
                        obj = json.loads(raw)
                        ch = obj["choices"][0]
                        res.content = ch["message"]["content"] if "message" in ch else ch.get("text", "")
                    except (ValueError, KeyError, IndexError, TypeError):
                        res.error = "unparsable body"
        except (http.client.IncompleteRead, ConnectionError, OSError) as e:
            res.error = f"{type(e).__name__}: {e}"
            res.done = False
            self._drop()
        if resp.will_close or not res.done:
            self._drop()
        res.latency_ms = (time.monotonic() - t0) * 1000
        return res

    @staticmethod
    def _read_sse(resp, res, t0):
        parts = []
        for _ in range(10_000_000):
            line = resp.readline()
            if not line:
                break
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                res.done = True
                break
            res.chunks += 1
            try:
                obj = json.loads(payload)
            except ValueError:
                continue
            for ch in obj.get("choices") or []:
                piece = (ch.get("delta") or {}).get("content") if "delta" in ch else ch.get("text")
                if piece:
                    if res.ttft_ms is None:
                        res.ttft_ms = (time.monotonic() - t0) * 1000
                    parts.append(piece)
        if res.done:
            resp.read()  # the last chunk, so the connection can be reused
        else:
            res.error = "stream ended without [DONE]"
        res.content = "".join(parts)


class Conversation:
    """A chat that grows turn after turn from a seeded random source."""

    def __init__(self, client, session=None, seed=1, index=0, system=None,
                 context_chars=1024, question_chars=200, api_key=None, model=None,
                 send_session=True):
        self.client = client
        self.session = session or f"sess-{seed}-{index}"
        self.send_session = send_session
        self.rng = random.Random(f"{seed}:conversation:{index}")
        self.api_key = api_key
        self.model = model
        self.question_chars = question_chars
        self.messages = []
        if system:
            self.messages.append({"role": "system", "content": system})
        self.messages.append({"role": "user", "content": "Context: " + text_of(self.rng, context_chars)})
        self.turns = 0

    def turn(self, question=None, **kw):
        q = question or "Question: " + text_of(self.rng, self.question_chars)
        if self.turns > 0 or len(self.messages) == 0 or self.messages[-1]["role"] != "user":
            self.messages.append({"role": "user", "content": q})
        else:
            self.messages[-1] = {"role": "user",
                                 "content": self.messages[-1]["content"] + "\n" + q}
        self.turns += 1
        r = self.client.chat(list(self.messages),
                             session=self.session if self.send_session else None,
                             api_key=self.api_key, model=self.model,
                             kind="chat", turn=self.turns, **kw)
        # the answer joins the history even after an error, as an empty one,
        # so the texts stay the same whatever happened
        self.messages.append({"role": "assistant", "content": r.content if r.ok else ""})
        return r


def one_shot(client, rng, question_chars=400, api_key=None, model=None, index=0, **kw):
    """An anonymous request: no session, a prompt of its own."""
    msgs = [{"role": "user", "content": f"One-shot {index}: " + text_of(rng, question_chars)}]
    return client.chat(msgs, api_key=api_key, model=model, kind="oneshot", **kw)


def system_prompt(seed, chars):
    if chars <= 0:
        return None
    return "System: " + text_of(random.Random(f"{seed}:system"), chars)


def run_load(url, conversations=4, turns=5, anonymous=8, seed=1, concurrency=4,
             stream=False, model=None, api_keys=None, send_session=True, max_tokens=8,
             system_chars=1024, context_chars=1024, question_chars=200, think_ms=0.0,
             timeout=30.0, model_header=False, deadline_s=600.0):
    """Runs the conversations (turns in order within each) and the anonymous
    one-shots on `concurrency` threads; returns the Results in a stable order
    (conversation by conversation, turn by turn, then one-shots)."""
    api_keys = list(api_keys or [])
    client = Client(url, model=model, timeout=timeout, stream=stream,
                    max_tokens=max_tokens, model_header=model_header)
    system = system_prompt(seed, system_chars)
    stop_at = time.monotonic() + deadline_s

    def conv_job(i):
        key = api_keys[i % len(api_keys)] if api_keys else None
        conv = Conversation(client, seed=seed, index=i, system=system,
                            context_chars=context_chars, question_chars=question_chars,
                            api_key=key, send_session=send_session)
        out = []
        for _ in range(turns):
            if time.monotonic() > stop_at:
                break
            out.append(conv.turn())
            if think_ms > 0:
                time.sleep(think_ms / 1000)
        return out

    def anon_job(j):
        rng = random.Random(f"{seed}:oneshot:{j}")
        key = api_keys[j % len(api_keys)] if api_keys else None
        if time.monotonic() > stop_at:
            return []
        return [one_shot(client, rng, question_chars=question_chars * 2, api_key=key, index=j)]

    try:
        with concurrent.futures.ThreadPoolExecutor(max(1, concurrency)) as ex:
            futs = [ex.submit(conv_job, i) for i in range(conversations)]
            futs += [ex.submit(anon_job, j) for j in range(anonymous)]
            results = []
            for f in futs:
                results += f.result(timeout=max(1.0, stop_at - time.monotonic() + timeout))
    finally:
        client.close()
    return results


def summarize(results):
    """Per server (x-served-by, or "-" without an answer): requests, statuses,
    hit and prompt blocks, hit rate, reasons, latency; plus "total"."""
    rows = {}

    def row(name):
        return rows.setdefault(name, {"requests": 0, "ok": 0, "status": {}, "hit_blocks": 0,
                                      "prompt_blocks": 0, "reasons": {}, "latency_ms": []})

    for r in results:
        for name in (r.served_by or "-", "total"):
            x = row(name)
            x["requests"] += 1
            x["ok"] += 1 if r.ok else 0
            st = str(r.status) if r.status else "error"
            x["status"][st] = x["status"].get(st, 0) + 1
            if r.ok and r.hit_blocks is not None and r.prompt_blocks:
                x["hit_blocks"] += r.hit_blocks
                x["prompt_blocks"] += r.prompt_blocks
            reason = r.reason or "-"
            x["reasons"][reason] = x["reasons"].get(reason, 0) + 1
            x["latency_ms"].append(r.latency_ms)
    for x in rows.values():
        x["hit_rate"] = x["hit_blocks"] / x["prompt_blocks"] if x["prompt_blocks"] else 0.0
        lat = sorted(x.pop("latency_ms"))
        x["p50_ms"] = lat[len(lat) // 2] if lat else 0.0
        x["p90_ms"] = lat[min(len(lat) - 1, int(len(lat) * 0.9))] if lat else 0.0
    return rows


def format_table(summary):
    names = sorted(n for n in summary if n != "total") + (["total"] if "total" in summary else [])
    head = ("server", "requests", "ok", "status", "hit_blocks", "prompt_blocks",
            "hit_rate", "p50_ms", "p90_ms", "reasons")
    lines = [head]
    for n in names:
        x = summary[n]
        lines.append((n, str(x["requests"]), str(x["ok"]),
                      " ".join(f"{k}={v}" for k, v in sorted(x["status"].items())),
                      str(x["hit_blocks"]), str(x["prompt_blocks"]),
                      f"{100 * x['hit_rate']:.1f}%", f"{x['p50_ms']:.0f}", f"{x['p90_ms']:.0f}",
                      " ".join(f"{k}={v}" for k, v in sorted(x["reasons"].items()))))
    widths = [max(len(r[i]) for r in lines) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in lines)


def fleet_stats(ready_file, timeout=5.0):
    """/admin/stats of every instance in a fleet ready file (admin port when
    it has one); an instance that does not answer gets {"error": ...}."""
    with open(ready_file, encoding="utf-8") as f:
        insts = json.load(f)
    out = {}
    for i in insts:
        port = i.get("admin_port") or i["port"]
        c = http.client.HTTPConnection(i.get("host", "127.0.0.1"), port, timeout=timeout)
        try:
            c.request("GET", "/admin/stats")
            out[i["name"]] = json.loads(c.getresponse().read())
        except (OSError, ValueError, http.client.HTTPException) as e:
            out[i["name"]] = {"error": f"{type(e).__name__}: {e}"}
        finally:
            c.close()
    return out


def format_fleet_stats(stats):
    head = ("instance", "requests", "by_status", "hit_blocks", "prompt_blocks", "hit_rate",
            "max_concurrent", "max_queued")
    lines = [head]
    for name in sorted(stats):
        s = stats[name]
        if "error" in s:
            lines.append((name, s["error"], "", "", "", "", "", ""))
            continue
        lines.append((name, str(s["requests"]),
                      " ".join(f"{k}={v}" for k, v in s["by_status"].items()),
                      str(s["cache_hit_blocks"]), str(s["prompt_blocks"]),
                      f"{100 * s['hit_rate']:.1f}%", str(s["max_concurrent"]),
                      str(s["max_queued"])))
    widths = [max(len(r[i]) for r in lines) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description="Drive chat load through a URL and tabulate it.")
    ap.add_argument("--url", required=True, help="e.g. the HAProxy frontend, http://127.0.0.1:8080")
    ap.add_argument("--conversations", type=int, default=4)
    ap.add_argument("--turns", type=int, default=5)
    ap.add_argument("--anonymous", type=int, default=8, help="one-shot requests without a session")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--model", default=None)
    ap.add_argument("--api-keys", default="", help="comma-separated; one per conversation, in turn")
    ap.add_argument("--stream", action="store_true")
    ap.add_argument("--no-session", action="store_true", help="send no x-session-id")
    ap.add_argument("--model-header", action="store_true", help="also send x-model")
    ap.add_argument("--max-tokens", type=int, default=8)
    ap.add_argument("--system-chars", type=int, default=1024, help="shared system prompt (0: none)")
    ap.add_argument("--context-chars", type=int, default=1024)
    ap.add_argument("--question-chars", type=int, default=200)
    ap.add_argument("--think-ms", type=float, default=0.0)
    ap.add_argument("--timeout", type=float, default=30.0, help="per request, seconds")
    ap.add_argument("--json", help="write every result here")
    ap.add_argument("--fleet", help="fleet ready file: also print each instance's stats")
    a = ap.parse_args(argv)
    for k in ("conversations", "turns", "anonymous", "concurrency", "max_tokens"):
        if getattr(a, k) < (1 if k in ("concurrency", "max_tokens") else 0):
            ap.error(f"--{k.replace('_', '-')} out of range")
    try:
        results = run_load(a.url, a.conversations, a.turns, a.anonymous, a.seed, a.concurrency,
                           a.stream, a.model, [k for k in a.api_keys.split(",") if k],
                           not a.no_session, a.max_tokens, a.system_chars, a.context_chars,
                           a.question_chars, a.think_ms, a.timeout, a.model_header)
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    print(f"seed {a.seed}: {len(results)} requests to {a.url}")
    print(format_table(summarize(results)))
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump([dataclasses.asdict(r) for r in results], f, indent=1)
    if a.fleet:
        print()
        print(format_fleet_stats(fleet_stats(a.fleet)))
    return 0 if any(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
