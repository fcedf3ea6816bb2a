-- Argo CD health of a StreamingQuery (resource.customizations.health.streamq.io_StreamingQuery).
-- It reads what kstatus reads (observedGeneration, Stalled), then Suspended, Degraded and Ready;
-- docs/gitops.md explains each state and a unit test runs this file against the operator's statuses.
local hs = {status = "Progressing", message = "Waiting for the operator to report"}
if obj.status == nil then
  return hs
end
local status = obj.status
local generation = obj.metadata and obj.metadata.generation
if generation ~= nil and (status.observedGeneration == nil or status.observedGeneration < generation) then
  hs.message = "Waiting for the operator to see generation " .. generation
  return hs
end
local function condition(kind)
  if status.conditions == nil then
    return nil
  end
  for _, c in ipairs(status.conditions) do
    if c.type == kind then
      return c
    end
  end
  return nil
end
local function is_true(kind)
  local c = condition(kind)
  return c ~= nil and c.status == "True"
end
local function say(kind, default)
  local c = condition(kind)
  if c ~= nil and c.message ~= nil and c.message ~= "" then
    return c.message
  end
  if status.message ~= nil and status.message ~= "" then
    return status.message
  end
  return default
end
-- Invalid, out of restarts, or a change the checkpoint refuses: nothing happens until the spec changes
if is_true("Stalled") then
  return {status = "Degraded", message = say("Stalled", "Stalled")}
end
if status.phase == "Suspended" then
  return {status = "Suspended", message = say("Ready", "suspend: true")}
end
-- a failure being retried, a driver that cannot start, a stall or silence the running driver reports
if is_true("Degraded") then
  return {status = "Degraded", message = say("Degraded", "Degraded")}
end
if is_true("Ready") then
  return {status = "Healthy", message = say("Ready", "Running")}
end
if status.phase == "Completed" then
  return {status = "Healthy", message = say("Ready", "Completed")}
end
hs.message = say("Reconciling", status.phase or hs.message)
return hs
