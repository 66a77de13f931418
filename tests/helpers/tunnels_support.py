"""Real tunnels in front of the front door, run as children of a test: Debian's OpenSSH server on
loopback with a throwaway key and its own configuration (and `ssh -L` through it), and nginx as a
TLS reverse proxy with a certificate made by openssl at test time. Each waits on the program's
own word that it is ready, never on a timer."""

from __future__ import annotations

import getpass
import os
import subprocess
import threading

from helpers.inbox_support import free_port
from helpers.support import WAIT

SSHD = "/usr/sbin/sshd"
NGINX = "/usr/sbin/nginx"


class Child:
    """A program run for a test, its stderr lines kept, and a wait for one of them."""

    def __init__(self, argv, ready: str) -> None:
        self.lines: list = []
        self.arrived = threading.Condition()
        self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE)
        threading.Thread(target=self._read, daemon=True).start()
        with self.arrived:
            found = self.arrived.wait_for(
                lambda: any(ready in line for line in self.lines) or self.process.poll() is not None, WAIT)
        if not found or self.process.poll() is not None:
            self.close()
            raise AssertionError("%s did not start:\n%s" % (argv[0], "".join(self.lines)))

    def _read(self) -> None:
        for line in iter(self.process.stderr.readline, b""):
            with self.arrived:
                self.lines.append(line.decode("utf-8", "replace"))
                self.arrived.notify_all()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(WAIT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(WAIT)


def run(*argv) -> None:
    subprocess.run(argv, check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.PIPE, timeout=60)


class SshServer(Child):
    """sshd on 127.0.0.1:<free port>, letting in only this user with a key made for the test."""

    def __init__(self, folder) -> None:
        folder = str(folder)
        os.makedirs(folder, mode=0o700, exist_ok=True)
        self.key = os.path.join(folder, "client")
        run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", os.path.join(folder, "host"))
        run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", self.key)
        with open(self.key + ".pub") as public, open(os.path.join(folder, "authorized_keys"), "w") as allowed:
            allowed.write(public.read())
        self.port = free_port()
        config = os.path.join(folder, "sshd_config")
        with open(config, "w") as handle:
            handle.write("\n".join([
                "Port %d" % self.port, "ListenAddress 127.0.0.1",
                "HostKey %s" % os.path.join(folder, "host"),
                "AuthorizedKeysFile %s" % os.path.join(folder, "authorized_keys"),
                "PidFile %s" % os.path.join(folder, "sshd.pid"),
                "PasswordAuthentication no", "KbdInteractiveAuthentication no", "PubkeyAuthentication yes",
                "UsePAM no", "StrictModes no", "AllowTcpForwarding local", "PermitRootLogin prohibit-password",
                "",
            ]))
        if os.geteuid() == 0:
            os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege separation, as its service makes it
        super().__init__([SSHD, "-D", "-e", "-f", config], "Server listening on 127.0.0.1 port %d" % self.port)

    def forward(self, local_port: int, remote_port: int) -> Child:
        """`ssh -N -L <local>:localhost:<remote>` through this server, once the forward listens."""
        return Child(["ssh", "-v", "-N", "-L", "%d:localhost:%d" % (local_port, remote_port),
                      "-p", str(self.port), "-i", self.key, "-o", "BatchMode=yes",
                      "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                      "-o", "ExitOnForwardFailure=yes", "%s@127.0.0.1" % getpass.getuser()],
                     # Logged once the forward listens (the "Local connections to" line comes
                     # before its bind).
                     "Entering interactive session")


# How a way in passes the browser's requests on to the door (tests/README.md, "The threat
# model"): the Host header it gives the door, and the X-Forwarded-* it adds.
PROXY_SHAPES = {
    # Tailscale Serve and cloudflared (without httpHostHeader): the public Host kept.
    "keeps-host": "proxy_set_header Host $http_host; proxy_set_header X-Forwarded-Host $http_host; "
                  "proxy_set_header X-Forwarded-For $remote_addr; proxy_set_header X-Forwarded-Proto https;",
    # VS Code / Codespaces port forwarding: the request arrives as one to localhost:<the forwarded
    # port>, while the browser's Origin stays the public one.
    "rewrites-host": "proxy_set_header Host localhost:%(door)d; proxy_set_header X-Forwarded-Host $http_host; "
                     "proxy_set_header X-Forwarded-Proto https;",
}


class TlsProxy(Child):
    """nginx on 127.0.0.1:<free port> with TLS for `name` (a self-signed certificate), passing
    everything to the door as a tunnel would (`shape`: one of PROXY_SHAPES), streams
    unbuffered."""

    def __init__(self, folder, name: str, door_port: int, shape: str = "keeps-host") -> None:
        folder = str(folder)
        # Readable by nginx's workers, which run as another user when the test runs as root; the
        # key itself is read by the master only (0600).
        os.makedirs(folder, mode=0o755, exist_ok=True)
        self.port = free_port()
        certificate, key = os.path.join(folder, "cert.pem"), os.path.join(folder, "key.pem")
        run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-keyout", key,
            "-out", certificate, "-subj", "/CN=%s" % name, "-addext", "subjectAltName=DNS:%s" % name)
        temporary = " ".join("%s_temp_path %s;" % (kind, os.path.join(folder, kind))
                             for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        config = os.path.join(folder, "nginx.conf")
        with open(config, "w") as handle:
            handle.write("""daemon off; worker_processes 1;
pid %(folder)s/nginx.pid; error_log stderr notice;
events { worker_connections 64; }
http {
  access_log off; %(temporary)s
  server {
    listen 127.0.0.1:%(port)d ssl; server_name %(name)s;
    ssl_certificate %(certificate)s; ssl_certificate_key %(key)s;
    client_max_body_size 11m;
    location / {
      proxy_pass http://127.0.0.1:%(door)d;
      %(shape)s
      proxy_buffering off; proxy_request_buffering off; proxy_read_timeout 1h;
    }
  }
}
""" % {"folder": folder, "temporary": temporary, "port": self.port, "name": name,
       "certificate": certificate, "key": key, "door": door_port,
       "shape": PROXY_SHAPES[shape] % {"door": door_port}})
        super().__init__([NGINX, "-p", folder, "-e", "stderr", "-c", config], "start worker process")
