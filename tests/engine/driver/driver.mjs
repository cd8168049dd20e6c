// tests/engine/driver/driver.mjs PLAN.json - conversations through HAProxy with
// the official OpenAI Node client, as users' programs send them.
//
// The client decides the JSON field order, the headers and the streaming
// framing; nothing here writes HTTP by hand. Each conversation sends the
// engine's real reply back in its next turn after a shared system prompt;
// some send a session id (x-session-id), the others none; some requests are
// streamed (with stream_options.include_usage), the others not.
//
// PLAN (JSON): baseURL, model, conversations, turns, concurrency,
//   system_chars, user_chars, max_tokens, session_share (0..1), stream_share,
//   seed, prefix (conversation names), out (JSONL file, one record per
//   request, written as each completes), state (optional: a JSON file the
//   conversations are read from and written back to, so that a later run
//   continues them), new_only (optional: only conversations not in state),
//   timeout_ms, open (optional: at most this many conversations under way
//   at once, a finished one replaced by the next, as users come and go; 0
//   or absent: every conversation from the start).
//
// A record: i, conv, turn, session, stream, t0 (ms since start), ttft_ms
// (first streamed content; the total for a non-streamed request), total_ms,
// status (HTTP status, 0 when no response headers came), headers (true once
// the response headers were in), cut (a stream that broke after its headers),
// error, served (x-served-by: the server HAProxy used, %s), reason and
// wserver (what warmlane decided), prompt_tokens, cached_tokens
// (usage.prompt_tokens_details), cache_n (llama.cpp's timings), and
// prev_prompt_tokens / prev_served of the conversation's previous success.
//
// The client never retries (maxRetries 0): every failure is HAProxy's or the
// engine's, and is recorded.
import fs from 'node:fs';
import OpenAI from 'openai';

const plan = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const P = {
  model: 'tiny', conversations: 8, turns: 3, concurrency: 4, system_chars: 700,
  user_chars: 200, max_tokens: 16, session_share: 0.5, stream_share: 0.5,
  seed: 1, prefix: 'c', timeout_ms: 60000, new_only: false, open: 0, ...plan,
};

// A small seeded generator (mulberry32): the same plan sends the same text.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const WORDS = ('the of and to in is that for it as was with be by on not he this are or his ' +
  'from at which but have an they you were her she there been one all we their cache ' +
  'prompt server token route model prefix engine warm cold request answer').split(' ');
function text(r, n) {
  let s = '';
  while (s.length < n) s += WORDS[Math.floor(r() * WORDS.length)] + ' ';
  return s.slice(0, n);
}

const rand = rng(P.seed);
const system = 'You are a helpful assistant. ' + text(rng(7), Math.max(0, P.system_chars - 29));

let convs = [];
if (P.state && fs.existsSync(P.state)) {
  convs = JSON.parse(fs.readFileSync(P.state, 'utf8'));
}
const had = new Set(convs.map((c) => c.name));
// new conversations: all of them without a state, up to `conversations`
// with one, or `conversations` more with new_only
const want = P.new_only ? P.conversations : Math.max(0, P.conversations - convs.length);
const made = [];
for (let k = 0; made.length < want; k++) {
  const name = `${P.prefix}${k}`;
  if (had.has(name)) continue;
  const c = {
    name,
    session: rand() < P.session_share ? `sess-${P.seed}-${name}` : null,
    messages: [{ role: 'system', content: system }],
    turns: 0, prev_prompt_tokens: null, prev_served: null, servers: [],
  };
  made.push(c);
  convs.push(c);
}
const active = P.new_only ? made : convs;

const client = new OpenAI({
  baseURL: P.baseURL, apiKey: 'sk-warmlane-test', maxRetries: 0, timeout: P.timeout_ms,
});
const out = fs.openSync(P.out, 'a');
const start = performance.now();
let seq = 0;

async function turn(c) {
  const stream = rand() < P.stream_share;
  c.messages.push({ role: 'user', content: text(rand, P.user_chars) });
  const rec = {
    i: seq++, conv: c.name, turn: c.turns + 1, session: c.session !== null, stream,
    t0: performance.now() - start, ttft_ms: null, total_ms: null, status: 0, headers: false,
    cut: false, error: null, served: null, reason: null, wserver: null, prompt_tokens: null,
    cached_tokens: null, cache_n: null, prev_prompt_tokens: c.prev_prompt_tokens,
    prev_served: c.prev_served,
  };
  const opts = c.session ? { headers: { 'x-session-id': c.session } } : {};
  // the body as users write it: model first, then messages, then options
  const body = { model: P.model, messages: c.messages, max_tokens: P.max_tokens };
  if (stream) {
    body.stream = true;
    body.stream_options = { include_usage: true };
  }
  const t0 = performance.now();
  let reply = '';
  try {
    const { data, response } = await client.chat.completions.create(body, opts).withResponse();
    rec.headers = true;
    rec.status = response.status;
    rec.served = response.headers.get('x-served-by');
    rec.reason = response.headers.get('x-warmlane-reason') || null;
    rec.wserver = response.headers.get('x-warmlane-server') || null;
    let usage = null;
    let timings = null;
    if (stream) {
      try {
        for await (const chunk of data) {
          const d = chunk.choices?.[0]?.delta?.content;
          if (d) {
            if (rec.ttft_ms === null) rec.ttft_ms = performance.now() - t0;
            reply += d;
          }
          if (chunk.usage) usage = chunk.usage;
          if (chunk.timings) timings = chunk.timings;
        }
      } catch (e) {
        rec.cut = true;
        throw e;
      }
    } else {
      reply = data.choices?.[0]?.message?.content ?? '';
      usage = data.usage;
      timings = data.timings;
      rec.ttft_ms = performance.now() - t0;
    }
    rec.total_ms = performance.now() - t0;
    if (rec.ttft_ms === null) rec.ttft_ms = rec.total_ms;
    rec.prompt_tokens = usage?.prompt_tokens ?? null;
    rec.cached_tokens = usage?.prompt_tokens_details?.cached_tokens ?? null;
    rec.cache_n = timings?.cache_n ?? null;
  } catch (e) {
    rec.total_ms = performance.now() - t0;
    if (e instanceof OpenAI.APIError && e.status) {
      rec.status = e.status;
      rec.headers = true;
      rec.served = e.headers?.get?.('x-served-by') ?? null;
    }
    rec.error = `${e.constructor?.name ?? 'Error'}: ${String(e.message).slice(0, 200)}`;
  }
  if (rec.error === null) {
    c.messages.push({ role: 'assistant', content: reply });
    c.turns += 1;
    c.prev_prompt_tokens = rec.prompt_tokens;
    c.prev_served = rec.served;
    c.servers.push(rec.served);
  } else {
    c.messages.pop(); // the turn is lost; the next one asks anew
  }
  fs.writeSync(out, JSON.stringify(rec) + '\n');
  return rec;
}

// Round by round over the conversations under way (at most `open`, all
// without it; a finished one replaced by the next): the one with the
// fewest turns sent that has none in flight goes next, the earliest
// first, so every turn 1, then every turn 2, ...; at most `concurrency`
// requests in flight and never two of one conversation.
const open = P.open > 0 ? P.open : active.length;
const pending = [...active];
const under = [];
const sent = new Map();
const busy = new Set();
const recs = [];
function take() {
  let best = null;
  for (const c of under) {
    if (!busy.has(c.name) && (best === null || sent.get(c.name) < sent.get(best.name))) best = c;
  }
  // a conversation not begun has sent none: it goes before any that has
  if (under.length < open && pending.length > 0 && (best === null || sent.get(best.name) > 0)) {
    best = pending.shift();
    under.push(best);
    sent.set(best.name, 0);
  }
  return best;
}
async function worker() {
  for (;;) {
    const c = take();
    if (c === null) {
      if (under.length === 0 && pending.length === 0) return;
      await new Promise((res) => setTimeout(res, 5)); // a conversation is busy
      continue;
    }
    busy.add(c.name);
    sent.set(c.name, sent.get(c.name) + 1);
    try {
      recs.push(await turn(c));
    } finally {
      busy.delete(c.name);
      if (sent.get(c.name) >= P.turns) under.splice(under.indexOf(c), 1);
    }
  }
}
await Promise.all(Array.from({ length: Math.max(1, P.concurrency) }, worker));
fs.closeSync(out);
if (P.state) {
  fs.writeFileSync(P.state + '.tmp', JSON.stringify(convs));
  fs.renameSync(P.state + '.tmp', P.state);
}
const ok = recs.filter((r) => r.error === null).length;
console.log(JSON.stringify({ requests: recs.length, ok, failed: recs.length - ok,
  seconds: (performance.now() - start) / 1000 }));
