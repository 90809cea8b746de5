-- A model file that reads outside its folder: the sandbox refuses.
local f = io.open("/etc/passwd")
return f
