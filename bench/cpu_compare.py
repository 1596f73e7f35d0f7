#!/usr/bin/python3
"""Compare whole commands by CPU time on a loaded machine: each command runs
REPS times as a fresh process, the commands interleaved (every other round in
reverse order), and for each the medians of wall clock, user + system CPU,
user and system time (from wait4) are printed. On a shared machine wall clock
swings with other work; CPU time moves much less (issue 26).

  bench/cpu_compare.py REPS 'label=command' ...
  PRE='cat FILES > /dev/null' bench/cpu_compare.py 9 'old=old/ckpt restore P --strategy default' \\
      'new=build-bench/ckpt restore P --strategy default'

PRE, when set, is a shell command run untimed before every timed one (read the
inputs through, touch memory); SHOWERR=1 keeps the commands' stderr.
"""
import os
import statistics
import subprocess
import sys
import time


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    reps = int(sys.argv[1])
    rows = [a.split("=", 1) for a in sys.argv[2:]]
    res = {label: ([], [], [], []) for label, _ in rows}
    pre = os.environ.get("PRE")
    for r in range(reps):
        for label, cmd in (rows if r % 2 == 0 else rows[::-1]):
            if pre:
                subprocess.run(pre, shell=True)
            t0 = time.perf_counter()
            pid = os.fork()
            if pid == 0:
                fd = os.open(os.devnull, os.O_RDWR)
                os.dup2(fd, 1)
                if not os.environ.get("SHOWERR"):
                    os.dup2(fd, 2)
                os.execv("/bin/sh", ["/bin/sh", "-c", "exec " + cmd])
            _, status, ru = os.wait4(pid, 0)
            wall = time.perf_counter() - t0
            if status:
                print("cpu_compare: %s exited with status %d" % (label, status), file=sys.stderr)
            for lst, v in zip(res[label], (wall, ru.ru_utime + ru.ru_stime, ru.ru_utime, ru.ru_stime)):
                lst.append(v)
    for label, (w, c, u, s) in res.items():
        print("%-16s wall %.4f s [%.4f-%.4f]  cpu %.4f s [%.4f-%.4f]  user %.4f  sys %.4f" % (
            label, statistics.median(w), min(w), max(w), statistics.median(c), min(c), max(c),
            statistics.median(u), statistics.median(s)))
    print("load average", " ".join(open("/proc/loadavg").read().split()[:3]))


if __name__ == "__main__":
    main()
