"""The README's serve --listen section runs as written: its shell blocks
(start the server, curl) and its tritonclient snippet, with the port
changed to a free one and `shapejit` taken from the build.

usage: server_readme.py SHAPEJIT SOURCE_DIR
"""
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

SJ, SRC = sys.argv[1:3]
text = open(os.path.join(SRC, "README.md")).read()
section = text[text.index("## Serving over HTTP"):]
section = section[: section.index("\n## ", 1)]
blocks = re.findall(r"```(sh|python)\n(.*?)```", section, re.S)
assert [b[0] for b in blocks] == ["sh", "sh", "python"], [b[0] for b in blocks]

with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = str(s.getsockname()[1])
start, curl, snippet = (b[1].replace("8000", port) for b in blocks)
start = start.strip()
assert start.endswith("&"), start
env = dict(os.environ, PATH=os.path.dirname(os.path.abspath(SJ)) + os.pathsep + os.environ["PATH"])
server = subprocess.Popen(["bash", "-c", "exec " + start[:-1]], cwd=SRC, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
watchdog = threading.Timer(120, server.kill)
watchdog.daemon = True
watchdog.start()
failures = []
try:
    for _ in range(600):
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/health/ready").status == 200:
                break
        except OSError:
            time.sleep(0.1)
    r = subprocess.run(["bash", "-ec", curl], cwd=SRC, env=env, capture_output=True, text=True, timeout=60)
    print(r.stdout)
    if r.returncode != 0 or '"name":"mlp"' not in r.stdout or '"model_name":"mlp"' not in r.stdout:
        failures.append(f"curl block: rc {r.returncode}: {r.stdout} {r.stderr}")
    r = subprocess.run([sys.executable, "-c", snippet], capture_output=True, text=True, timeout=60)
    print(r.stdout)
    if r.returncode != 0 or r.stdout.strip() != "(5, 10)":
        failures.append(f"python block: rc {r.returncode}: {r.stdout} {r.stderr}")
finally:
    server.send_signal(signal.SIGTERM)
    try:
        rc = server.wait(30)
    except subprocess.TimeoutExpired:
        server.kill()
        rc = "killed"
    if rc != 0:
        failures.append(f"server exit status {rc}: {server.stderr.read()}")
for f in failures:
    print("FAIL:", f)
print(f"{len(failures)} failures")
sys.exit(1 if failures else 0)
