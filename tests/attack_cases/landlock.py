"""Attacks aimed at the Landlock layer (no namespaces: the worker sees the host's files, processes and
network, and only Landlock, seccomp, its uid and its monitor stand in the way). Run by
tests/sandbox/test_container.py under the container launcher; not part of `ATTACKS` (the namespace
layer's suite), since several aim at things only this layer shares with the host.

Code is a `string.Template` with the fields of `ContainerHost.fields` (test_container.py): $CONFIG
(the user's rlmx config with a key), $PRIVATE (a 0600 file of the host's user), $OTHER_TRACE (another
run's trace under XDG_STATE_HOME), $SLEEP_PID (a host process with a secret in its environment),
$PORT / $UDP (TCP and UDP listeners on 127.0.0.1), $ABSTRACT / $UNIXPATH (unix sockets, the second in a
world-writable directory), $TARGET (a host file, mode 0666, in a world-writable directory), $WWDIR
(that directory), $TOKEN, $TMP, $REPO, $HOME. `check(host, outcome)`, in the host, judges the host.
"""

from __future__ import annotations

from attack_cases.base import PRELUDE, Attack

LANDLOCK_ATTACKS: list[Attack] = []


def attack(id_: str, title: str, code: str, **kw: object) -> None:
    LANDLOCK_ATTACKS.append(Attack(id_, title, PRELUDE + code, **kw))  # type: ignore[arg-type]


attack(
    "ll-read-host-secrets",
    "read the user's rlmx config, a 0600 file of the same user, another run's trace, /etc/shadow",
    """
import os
for path in ['$CONFIG', '$PRIVATE', '$OTHER_TRACE', '/etc/shadow', '$HOME/.config/rlmx']:
    try:
        leak(path, open(path, 'rb').read() if not os.path.isdir(path) else os.listdir(path))
    except OSError as exc:
        print('refused', path, exc.strerror)
""",
    said=("Permission denied",),
)
attack(
    "ll-proc-environ",
    "read a host process's environment, memory map and command line through /proc",
    """
for what in ['environ', 'cmdline', 'maps', 'mem']:
    try:
        leak(what, open(f'/proc/$SLEEP_PID/{what}', 'rb').read(65536))
    except OSError as exc:
        print('refused', what, exc.strerror)
""",
)
attack(
    "ll-net-host-listeners",
    "TCP and UDP to the host's listeners on 127.0.0.1, its abstract and by-path unix sockets",
    """
import socket
tries = {
    'tcp': lambda: socket.create_connection(('127.0.0.1', $PORT), timeout=2).sendall(b'pwned'),
    'udp': lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'pwned', ('127.0.0.1', $UDP)),
    'abstract': lambda: socket.socket(socket.AF_UNIX).connect('\\0$ABSTRACT'),
    'unix-path': lambda: socket.socket(socket.AF_UNIX).connect('$UNIXPATH'),
    'unix-dgram': lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b'pwned', '$UNIXPATH'),
}
for name, call in tries.items():
    try:
        call()
        print('REACHED', name)
    except OSError as exc:
        print('refused', name, exc.strerror)
""",
    said=("Operation not permitted",),
)
attack(
    "ll-raw-sockets",
    "raw IP, packet and netlink sockets: a hand-built UDP datagram to the host's listener on lo",
    """
import socket, struct
udp = struct.pack('!HHHH', 40000, $UDP, 8 + 5, 0) + b'pwned'
def ip_packet():
    head = struct.pack('!BBHHHBBH4s4s', 0x45, 0, 20 + len(udp), 1, 0, 64, 17, 0,
                       socket.inet_aton('127.0.0.1'), socket.inet_aton('127.0.0.1'))
    words = struct.unpack('!10H', head)
    s = sum(words); s = (s & 0xffff) + (s >> 16); s = (s & 0xffff) + (s >> 16)
    return head[:10] + struct.pack('!H', ~s & 0xffff) + head[12:] + udp
tries = {
    'raw-udp': lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP).sendto(udp, ('127.0.0.1', 0)),
    'raw-icmp': lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP),
    'packet': lambda: socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(0x0800)).sendto(ip_packet(), ('lo', 0x0800)),
    'netlink-route': lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0).bind((0, 0)),
    'netlink-audit': lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 9),
    'icmp-dgram': lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP),
}
for name, call in tries.items():
    try:
        call()
        print('OPENED', name)
    except OSError as exc:
        print('refused', name, exc.strerror)
""",
    said=("Operation not permitted",),
)
attack(
    "ll-ptrace-and-signal-host",
    "ptrace(PTRACE_ATTACH) a host process, then SIGSTOP/SIGKILL it, the host, pid 1",
    """
import ctypes, os, signal
libc = ctypes.CDLL(None, use_errno=True)
for request, name in [(16, 'attach'), (0x4206, 'seize')]:
    rc = libc.ptrace(request, $SLEEP_PID, 0, 0)
    print('ptrace', name, rc, os.strerror(ctypes.get_errno()))
for pid in [$SLEEP_PID, $HOST_PID, 1]:
    for sig in [signal.SIGSTOP, signal.SIGKILL]:
        try:
            os.kill(pid, sig)
            print('SENT', pid, sig)
        except OSError as exc:
            print('refused', pid, sig, exc.strerror)
""",
)
attack(
    "ll-metadata",
    "chmod, chown and utime of a world-writable host file; truncate it; rename and link it",
    """
import os
calls = {
    'chmod': lambda: os.chmod('$TARGET', 0o4777),
    'chown': lambda: os.chown('$TARGET', os.getuid(), os.getgid()),
    'utime-now': lambda: os.utime('$TARGET', None),
    'utime-old': lambda: os.utime('$TARGET', (0, 0)),
    'truncate': lambda: os.truncate('$TARGET', 0),
    'open-write': lambda: open('$TARGET', 'w').write('pwned'),
    'rename': lambda: os.rename('$TARGET', '$TARGET.moved'),
    'link': lambda: os.link('$TARGET', '$WWDIR/hard-$TOKEN'),
    'symlink': lambda: os.symlink('$TARGET', '$WWDIR/soft-$TOKEN'),
}
for name, call in calls.items():
    try:
        call()
        print('DID', name)
    except OSError as exc:
        print('refused', name, exc.strerror)
""",
)
attack(
    "ll-mount",
    "mount a tmpfs (libc and the mount tool), umount, pivot_root, chroot",
    """
import ctypes, os, subprocess
libc = ctypes.CDLL(None, use_errno=True)
print('mount', libc.mount(b'rlmx-pwn', os.getcwd().encode(), b'tmpfs', 0, None), os.strerror(ctypes.get_errno()))
print('umount /proc', libc.umount2(b'/proc', 2), os.strerror(ctypes.get_errno()))
print('chroot', libc.chroot(b'.'), os.strerror(ctypes.get_errno()))
r = subprocess.run(['mount', '-t', 'tmpfs', 'rlmx-pwn', '.'], capture_output=True, text=True)
print('mount tool', r.returncode, r.stderr.strip()[:200])
""",
    said=("Operation not permitted",),
)
attack(
    "ll-write-outside",
    "create files outside the scratch directory: /tmp, a world-writable dir, /dev/shm, the repo, HOME",
    """
import os
for d in ['/tmp', '$WWDIR', '/var/tmp', '/dev/shm', '$REPO', '$HOME', '$HOME/.config/rlmx', '$TMP', '..']:
    path = os.path.join(d, 'pwned-$TOKEN')
    try:
        with open(path, 'w') as fh:
            fh.write('pwned')
        print('WROTE', path)
    except OSError as exc:
        print('refused', path, exc.strerror)
    try:
        os.mkdir(path + '.d')
        print('MKDIR', path)
    except OSError as exc:
        print('refused mkdir', path, exc.strerror)
""",
    said=("Permission denied",),
)
attack(
    "ll-scratch-cap",
    "write 64 MB into a 16 MB scratch directory, 1 MB a file",
    """
import time
for i in range(64):
    with open(f'chunk-$TOKEN-{i}', 'wb') as fh:
        fh.write(b'x' * (1 << 20))
    time.sleep(0.03)
print('wrote 64 MB')
""",
    settings={"scratch_mb": 16, "cell_timeout_s": 8.0},
)
attack(
    "ll-daemon",
    "a double-forked setsid daemon with a marker in its command line, and a new-session subprocess",
    """
import os, subprocess, time
subprocess.Popen(['/bin/sh', '-c', 'exec -a rlmx-daemon-$TOKEN sleep 300'], start_new_session=True)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv('/bin/sleep', ['rlmx-daemon-$TOKEN', '300'])
    os._exit(0)
time.sleep(0.3)
print('left daemons behind')
""",
    said=("left daemons behind",),
)
attack(
    "ll-memory-grab",
    "allocate memory until something breaks",
    "blocks = []\nwhile True:\n    blocks.append(bytearray(64 * 2**20))",
    said=("MemoryError",),
    settings={"memory_mb": 512, "cell_timeout_s": 20.0, "cell_cpu_s": 20},
)
attack(
    "ll-infinite-loop",
    "an infinite loop",
    "while True:\n    pass",
    said=("TimeoutError", "CPUTimeExceeded"),
)
attack(
    "ll-ctypes-syscalls",
    "raw syscalls through ctypes: socket+connect to the host, unshare, clone3 with new namespaces",
    """
import ctypes, os, socket, struct, time
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
fd = libc.syscall(41, 2, 1, 0)  # SYS_socket(AF_INET, SOCK_STREAM)
print('socket', fd, os.strerror(ctypes.get_errno()))
if fd >= 0:
    addr = struct.pack('<HH4s8x', 2, socket.htons($PORT), socket.inet_aton('127.0.0.1'))
    print('connect', libc.syscall(42, fd, addr, 16), os.strerror(ctypes.get_errno()))
print('unshare', libc.syscall(272, 0x10000000 | 0x40000000 | 0x20000), os.strerror(ctypes.get_errno()))
args = (ctypes.c_uint64 * 11)(0x10000000 | 0x40000000, 0, 0, 0, 17, 0, 0, 0, 0, 0, 0)
pid = libc.syscall(435, args, 88)  # clone3(CLONE_NEWUSER | CLONE_NEWNET)
if pid == 0:
    time.sleep(2)
    os._exit(0)
print('clone3', pid, os.strerror(ctypes.get_errno()))
llm_query('CHECK-NAMESPACES')
""",
)
