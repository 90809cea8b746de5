-- A model file that runs a program: the sandbox has no os.execute.
os.execute("true")
