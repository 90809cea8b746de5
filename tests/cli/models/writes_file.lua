-- A model file that writes a file: the sandbox refuses.
local f = io.open("written.txt", "w")
return f
