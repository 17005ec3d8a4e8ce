#!/bin/sh
# Runs a command with jemalloc as the process's malloc when the system has it (Debian and
# Ubuntu: apt install libjemalloc2) and nothing else is preloaded; otherwise runs it as is.
# Why: thread workers load and free a model and a context on every restart, and glibc's
# malloc keeps most of what they free in its per-thread arenas, so the server's RSS climbs
# restart after restart on some machines and loads (README, "Memory of thread workers", has
# the soak figures); with jemalloc it stayed flat in every soak that was not overloaded.
# RADIXGATE_NO_JEMALLOC=1 turns this off.
if [ -z "${RADIXGATE_NO_JEMALLOC:-}" ] && [ -z "${LD_PRELOAD:-}" ]; then
  for lib in "/usr/lib/$(uname -m)-linux-gnu/libjemalloc.so.2" /usr/lib64/libjemalloc.so.2 /usr/lib/libjemalloc.so.2; do
    if [ -r "$lib" ]; then
      LD_PRELOAD="$lib"
      export LD_PRELOAD
      break
    fi
  done
fi
exec "$@"
