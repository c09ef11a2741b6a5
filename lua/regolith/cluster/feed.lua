local F = {}
function F.install(M) end
return F
