-- A model file that returns a plain table.
return { name = "nothing" }
