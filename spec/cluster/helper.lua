-- busted's --helper for the cluster specs: loads spec/cluster/support.lua
-- before the spec files are insulated, so that one cluster (started by the
-- first spec when REGOLITH_URL is unset, stopped when the suite ends)
-- serves them all.
require "cluster.support"
