-- overhead.lua - wrk script of tests/bench/overhead.sh: chat-completion POSTs with sessions.
--
-- Each request carries what HAProxy turns into a realistic `route` message:
-- x-session-id (one of SESSIONS), an Authorization header (one of 16 callers,
-- hashed by HAProxy), x-install-id, and a JSON body with "model" and a long
-- shared system prompt (over 1 KiB, so the first prefix key is computed;
-- GROUPS distinct prompts) before a per-session question. The requests are
-- built once per thread and cycled, so Lua costs wrk next to nothing.

local SESSIONS = tonumber(os.getenv("BENCH_SESSIONS") or "512")
local GROUPS = 8
local requests = {}
local n = 0
local i = 0
local counter = 0

function setup(thread)
  counter = counter + 1
  thread:set("thread_index", counter)
end

local function system_prompt(g)
  local words = {}
  for k = 1, 200 do
    words[#words + 1] = "rule" .. g .. "-" .. k
  end
  return "You are assistant " .. g .. ". " .. table.concat(words, " ")
end

function init(args)
  local prompts = {}
  for g = 1, GROUPS do
    prompts[g] = system_prompt(g)
  end
  for s = 1, SESSIONS do
    local g = (s % GROUPS) + 1
    local body = '{"messages":[{"role":"system","content":"' .. prompts[g] ..
      '"},{"role":"user","content":"question ' .. s .. ' about item ' ..
      (s * 7919 % 1000) .. '"}],"model":"m1","stream":false,"max_tokens":64}'
    local headers = {
      ["Content-Type"] = "application/json",
      ["Authorization"] = "Bearer client-key-" .. (s % 16),
      ["X-Session-Id"] = string.format("sess-%06d", s),
      ["X-Install-Id"] = "install-" .. (s % 64),
    }
    requests[s] = wrk.format("POST", "/v1/chat/completions", headers, body)
  end
  n = SESSIONS
  -- threads start at different places in the cycle
  i = ((thread_index or 1) * 7919) % n
end

function request()
  i = i + 1
  if i > n then
    i = 1
  end
  return requests[i]
end
