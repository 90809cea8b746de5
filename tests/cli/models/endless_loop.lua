-- A model file whose loop never ends: the instruction budget stops it, naming this line.
while true do end
