"""Linux single-board computers (Raspberry Pi, Jetson, K230, or any host) reached over SSH.

Two backends per board: ``ssh`` (build on the board, or cross-build here, then run on the
board) and ``ssh_docker`` (the same, with the build and/or the run inside a container on
the board). ``targets`` registers them; ``base`` holds the lifecycle; the other modules
are its parts (remote layout, cross toolchains, the perf_run launcher, container commands).
"""
