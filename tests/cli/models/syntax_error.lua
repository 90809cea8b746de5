-- A model file with a syntax error on line 3.
local plait = require "plait"
local x = = 1
