#!/usr/bin/env python3
"""Test-only HTTPS git server: `git http-backend` as CGI behind TLS and HTTP
Basic auth (user `git`, password from env PROXOPS_TEST_GIT_TOKEN).

Usage: https_git_server.py PORT PROJECT_ROOT CERT_PEM KEY_PEM
Binds 127.0.0.1:PORT, prints READY on stdout once listening.
"""
import base64
import http.server
import os
import ssl
import subprocess
import sys


def read_chunked(rfile):
    body = b""
    while True:
        line = rfile.readline().strip()
        size = int(line.split(b";")[0], 16)
        if size == 0:
            while rfile.readline().strip():
                pass
            return body
        body += rfile.read(size)
        rfile.readline()


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def authorized(self):
        expected = "Basic " + base64.b64encode(("git:" + TOKEN).encode()).decode()
        return self.headers.get("Authorization") == expected

    def handle_git(self):
        if not self.authorized():
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = read_chunked(self.rfile)
        else:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path, _, query = self.path.partition("?")
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": os.environ.get("PROXOPS_TEST_GIT_HOME", "/nonexistent"),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_PROJECT_ROOT": ROOT,
            "GIT_HTTP_EXPORT_ALL": "1",
            "GATEWAY_INTERFACE": "CGI/1.1",
            "REQUEST_METHOD": self.command,
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_USER": "git",
            "REMOTE_ADDR": "127.0.0.1",
        }
        if self.headers.get("Git-Protocol"):
            env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
        if self.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
        out = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True).stdout
        head, _, payload = out.partition(b"\r\n\r\n")
        if not _:
            head, _, payload = out.partition(b"\n\n")
        status = 200
        headers = []
        for line in head.decode("latin-1").splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.strip().split()[0])
            elif name:
                headers.append((name, value.strip()))
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = handle_git
    do_POST = handle_git


if __name__ == "__main__":
    port, ROOT, cert, key = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    TOKEN = os.environ["PROXOPS_TEST_GIT_TOKEN"]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    print("READY", flush=True)
    server.serve_forever()
