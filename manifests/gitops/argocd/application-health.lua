-- An Application's health is the health Argo CD computed for it: what lets an app of
-- apps wait for one sync wave (the operator and its CRD) before the next (the queries).
local hs = {status = "Progressing", message = ""}
if obj.status ~= nil and obj.status.health ~= nil then
  hs.status = obj.status.health.status
  if obj.status.health.message ~= nil then
    hs.message = obj.status.health.message
  end
end
return hs
