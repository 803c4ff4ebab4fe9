"""Tests of evalcheck.py (the Python twins of package evalset's grading) and
of ggufw.py's writer with the keys the export adds. Runs without PyTorch:

    python3 -m unittest test_evalcheck   # numpy needed for ggufw
"""

import os
import tempfile
import unittest

import evalcheck


def call(s):
    return "<tool_call>\n" + s + "\n</tool_call>"


class ToolCheck(unittest.TestCase):
    # The cases of TestToolRequestCheck in infer/defaultmodel/evalset.
    q = {"name": "convert_units", "arguments": {"value": 3, "from_unit": "kilometres", "to_unit": "metres"}}
    cases = [
        (call('{"name": "convert_units", "arguments": {"value": 3, "from_unit": "kilometres", "to_unit": "metres"}}'), True),
        (call('{"name":"convert_units","arguments":{"to_unit":"metres","value":3.0,"from_unit":"kilometres"}}'), True),
        (call('{"name": "convert_units", "arguments": {"value": "3", "from_unit": "kilometres", "to_unit": "metres"}}'), False),
        (call('{"name": "convert_units", "arguments": {"value": 3, "from_unit": "kilometres"}}'), False),
        (call('{"name": "convert_units", "arguments": {"value": 3, "from_unit": "kilometres", "to_unit": "metres", "x": 1}}'), False),
        (call('{"name": "convert_unit", "arguments": {"value": 3, "from_unit": "kilometres", "to_unit": "metres"}}'), False),
        (call('{"name": "convert_units", "arguments": {"value": 3, "from_unit": "Kilometres", "to_unit": "metres"}}'), False),
        (call('{"name": "convert_units", "arguments": {"value": true, "from_unit": "kilometres", "to_unit": "metres"}}'), False),
        ("3 kilometres is 3000 metres.", False),
        ("", False),
        ("<tool_call>\n" + '{"name": "convert_units", "arguments": {}}', False),
    ]

    def test_check_tool(self):
        for reply, want in self.cases:
            with self.subTest(reply=reply):
                self.assertEqual(evalcheck.check_tool(self.q, reply), want)

    def test_parse_tool_call(self):
        cases = [
            ('Sure. <tool_call>{"arguments":{},"name":"f"}</tool_call> <tool_call>{"name": "g", "arguments": {}}</tool_call>', ("f", {})),
            ("<tool_call>not json</tool_call>", None),
            ('<tool_call>{"arguments": {}}</tool_call>', None),
            ('<tool_call>{"name": 3, "arguments": {}}</tool_call>', None),
            ('<tool_call>{"name": "f", "arguments": "{}"}</tool_call>', None),
            ('<tool_call>{"name": "f", "arguments": {}} {}</tool_call>', None),
        ]
        for reply, want in cases:
            with self.subTest(reply=reply):
                self.assertEqual(evalcheck.parse_tool_call(reply), want)


class QuestionCheck(unittest.TestCase):
    # A subset of TestCheck in infer/defaultmodel/evalset.
    def test_check(self):
        num = {"want": "7", "match": "number"}
        word = {"want": "Paris", "match": "word"}
        text = {"want": "3, 4, 5, 6, 7", "match": "text"}
        cases = [
            (num, "3 plus 4 is 7.", True), (num, "3 plus 4 is 07.", True), (num, "7 is not it, 3 plus 4 is 17.", False),
            (word, "paris", True), (word, "The capital of France is Parisian.", False),
            (text, "3,  4, 5,\n6, 7.", True), (text, "3, 4, 5, 7.", False),
            ({"want": "x", "match": "nope"}, "x", False),
        ]
        for q, reply, want in cases:
            with self.subTest(reply=reply):
                self.assertEqual(evalcheck.check(q, reply), want)

    def test_is_json_object(self):
        self.assertTrue(evalcheck.is_json_object('{"animal": "cat", "legs": 4}'))
        self.assertTrue(evalcheck.is_json_object('{\n  "animal": "cat"\n}'))
        self.assertFalse(evalcheck.is_json_object('["cat"]'))
        self.assertFalse(evalcheck.is_json_object('A cat has 4 legs.'))


class GGUFKeys(unittest.TestCase):
    def test_pooling_and_template_round_trip(self):
        import numpy as np

        import ggufw

        tmpl = "{%- if tools %}x{%- endif %}\u00e9"
        w = ggufw.Writer()
        w.string("general.architecture", "llama")
        w.u32("llama.pooling_type", 1)
        w.string("tokenizer.chat_template", tmpl)
        w.tensor("t", np.arange(6, dtype=np.float32).reshape(2, 3))
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "m.gguf")
            w.write(path)
            meta, ts = ggufw.read(path)
        self.assertEqual(meta["llama.pooling_type"], 1)
        self.assertEqual(meta["tokenizer.chat_template"], tmpl)
        self.assertEqual(ts["t"][1], [3, 2])
        self.assertTrue(np.array_equal(ts["t"][2], np.arange(6, dtype=np.float32).reshape(2, 3)))

    def test_quantized_tensors_read(self):
        """Q8_0 and Q4_K tensors read back as the values their blocks
        encode (computed here one value at a time from the layout)."""
        import struct

        import numpy as np

        import ggufw

        q8 = np.arange(-16, 16, dtype=np.int8)
        q8_bytes = struct.pack("<e", 0.5) + q8.tobytes()
        want_q8 = q8.astype(np.float32) * 0.5

        scales = bytearray(12)
        for j in range(4):
            scales[j] = j + 1          # scale of sub-block j
            scales[j + 4] = j          # min of sub-block j
        for j in range(4, 8):
            scales[j + 4] = (j + 1) | (j << 4)  # low bits of sub-block j's scale and min
        scales[0] |= 1 << 6            # adds 16 to sub-block 4's scale
        scales[5] |= 2 << 6            # adds 32 to sub-block 5's min
        qs = bytes(((l % 16) | ((15 - l % 16) << 4)) for _ in range(4) for l in range(32))
        q4_bytes = struct.pack("<ee", 1.0, 0.5) + bytes(scales) + qs

        def scale_min(j):
            if j < 4:
                return scales[j] & 63, scales[j + 4] & 63
            return (scales[j + 4] & 15) | ((scales[j - 4] >> 6) << 4), (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4)

        want_q4 = []
        for j in range(8):
            sc, mn = scale_min(j)
            for l in range(32):
                b = qs[(j // 2) * 32 + l]
                q = b & 15 if j % 2 == 0 else b >> 4
                want_q4.append(1.0 * sc * q - 0.5 * mn)
        self.assertEqual(scale_min(4)[0], 5 | 16)
        self.assertEqual(scale_min(5)[1], 5 | 32)

        w = ggufw.Writer()
        w.string("general.architecture", "llama")
        w.tensors.append(("q8", [32, 1], ggufw.GGML_Q8_0, q8_bytes))
        w.tensors.append(("q4", [256, 1], ggufw.GGML_Q4_K, q4_bytes))
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "q.gguf")
            w.write(path)
            _, ts = ggufw.read(path)
        self.assertTrue(np.array_equal(ts["q8"][2], want_q8.reshape(1, 32)))
        self.assertTrue(np.array_equal(ts["q4"][2], np.array(want_q4, dtype=np.float32).reshape(1, 256)))


if __name__ == "__main__":
    unittest.main()
