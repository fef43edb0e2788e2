"""The command lines that drive the research wing: `bench` (the simulator's benchmark and regime
map: runs from `experiments`, reports from `reporting`), above the wing's three rooms."""
