#!/usr/bin/env python3
"""decide.py BASE_URL PROVISIONER_TOKEN REQUEST_ID approve|deny: decides a
request of provider.py through its operator endpoint."""

import json
import sys
import urllib.error
import urllib.request

base, token, request_id, decision = sys.argv[1:5]
req = urllib.request.Request(base.rstrip("/") + "/operator/decide/" + request_id, method="POST",
                             data=json.dumps({"decision": decision}).encode(),
                             headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
try:
    with urllib.request.urlopen(req) as resp:
        print(resp.status, resp.read().decode())
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode())
    sys.exit(1)
