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


if __name__ == "__main__":
    unittest.main()
