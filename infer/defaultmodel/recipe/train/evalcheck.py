"""Grading of the default model's evaluation, without PyTorch: the Python
twins of package evalset's Question.Check, ParseToolCall and
ToolRequest.Check, and the JSON-answer check. test_evalcheck.py tests them
with the cases of the Go tests.
"""

import json
import re


def check(q, reply):
    """Python twin of evalset.Question.Check."""
    if q["match"] == "number":
        nums = [n.lstrip("0") or "0" for n in re.findall(r"[0-9]+", reply)]
        return bool(nums) and nums[-1] == q["want"]
    if q["match"] == "word":
        return q["want"].lower() in [w.lower() for w in re.findall(r"(?:[^\W_]|-)+", reply)]
    if q["match"] == "text":
        return q["want"] in " ".join(reply.split())
    return False


def parse_tool_call(reply):
    """Python twin of evalset.ParseToolCall: the first <tool_call> block's
    JSON object, as (name, arguments), or None."""
    i = reply.find("<tool_call>")
    if i < 0:
        return None
    body = reply[i + len("<tool_call>"):]
    j = body.find("</tool_call>")
    if j < 0:
        return None
    try:
        c = json.loads(body[:j])
    except ValueError:
        return None
    if not isinstance(c, dict) or not isinstance(c.get("name"), str) or not isinstance(c.get("arguments"), dict):
        return None
    return c["name"], c["arguments"]


def check_tool(q, reply):
    """Python twin of evalset.ToolRequest.Check: the first call names the
    wanted function with arguments equal to the wanted ones as JSON values."""
    c = parse_tool_call(reply)
    if c is None or c[0] != q["name"]:
        return False
    return _json_equal(c[1], q["arguments"])


def _json_equal(a, b):
    # JSON values: numbers compare by value (3 == 3.0), but a bool is not a
    # number and a string is not a number.
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return float(a) == float(b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def is_json_object(reply):
    try:
        return isinstance(json.loads(reply), dict)
    except ValueError:
        return False
