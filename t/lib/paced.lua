-- wrk script: each connection waits WRK_DELAY_MS (default 1) after every answer before its
-- next request. A load at full speed saturates this 2-core machine, and its offer then swings
-- with the scheduler from one second to the next (a third and more); paced, a connection
-- offers about 1000 / (delay + latency) requests a second whatever else runs, so a rate over
-- a window measures the zone, not the machine (t/410-rate-fleet.t).
local delay_ms = tonumber(os.getenv("WRK_DELAY_MS") or "") or 1

function delay()
  return delay_ms
end
