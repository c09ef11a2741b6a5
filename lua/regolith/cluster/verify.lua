local V = {}
function V.install(M) end
return V
