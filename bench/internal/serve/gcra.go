package serve

import "github.com/redis/go-redis/v9"

// GCRALua is a GCRA limiter in one Lua script, with redis-cell's
// CL.THROTTLE arguments and reply, for Redis without the module: KEYS[1]
// the key, ARGV max_burst, count, period (seconds) and quantity; it
// returns {limited, max_burst+1, remaining, retry_after, reset_after} in
// seconds (rounded up), storing the theoretical arrival time, in
// microseconds from the Redis clock (TIME), with an expiry at it.
const GCRALua = `local burst = tonumber(ARGV[1]) + 1
local interval = tonumber(ARGV[3]) * 1e6 / tonumber(ARGV[2])
local quantity = tonumber(ARGV[4])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1e6 + tonumber(t[2])
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then tat = now end
local tau = interval * burst
local new_tat = tat + interval * quantity
local allow_at = new_tat - tau
if now < allow_at then
  local retry = -1
  if quantity <= burst then retry = math.ceil((allow_at - now) / 1e6) end
  return {1, burst, math.max(0, math.floor((tau - (tat - now)) / interval)), retry, math.ceil((tat - now) / 1e6)}
end
local ttl = new_tat - now
if ttl > 0 then
  redis.call('SET', KEYS[1], string.format('%.0f', new_tat), 'PX', math.ceil(ttl / 1e3))
end
return {0, burst, math.max(0, math.floor((tau - ttl) / interval)), -1, math.ceil(ttl / 1e6)}`

// GCRA is GCRALua as a go-redis Script.
var GCRA = redis.NewScript(GCRALua)
