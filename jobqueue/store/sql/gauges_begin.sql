-- gauges_begin: no JIT for the rest of this transaction (the metrics' gauge statements).
-- Their recursive walks are priced far above jit_above_cost (the planner cannot know a walk
-- stops after a few hundred probes), and compiling them took 2 s where running them takes ms.
SELECT set_config('jit', 'off', true)
