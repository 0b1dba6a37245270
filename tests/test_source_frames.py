"""Source frames: every ``.ir`` source style MindSpore writes, and the user's own frame."""

from __future__ import annotations

import pytest

from dumpscope.core.graphs.ms_ir import parse_ir
from dumpscope.core.graphs.source_frames import first_user_frame, is_user_file, mark_frames, parse_frame

SITE = "/usr/local/lib/python3.9/site-packages/mindspore/nn/layer/conv.py"


@pytest.mark.parametrize("text, file, line, code", [
    ("# In file train.py(34)/        a = self.sub(x, 1)/", "train.py", 34, "a = self.sub(x, 1)"),
    ("# In file /home/u/net.py:15/    def construct(self, x, y):/", "/home/u/net.py", 15, "def construct(self, x, y):"),
    ("# inlined:In file /home/u/net.py:55/        x = self.relu(x)/", "/home/u/net.py", 55, "x = self.relu(x)"),
    ("# In file /home/u/net.py:16~18, 12~25/        a = ops.sub(x, 1)/", "/home/u/net.py", 16, "a = ops.sub(x, 1)"),
    ("# /home/u/net.py:16, 12~25/        a = ops.sub(x, 1)/", "/home/u/net.py", 16, "a = ops.sub(x, 1)"),
    ("# In file /home/u/net.py:7, 8~20/  y = x + 1/<~~This line of code can be shared by multiple nodes, and may be "
     "duplicated./", "/home/u/net.py", 7, "y = x + 1"),
])
def test_every_source_style_gives_file_line_and_code(text, file, line, code):
    f = parse_frame(text)
    assert f is not None
    assert (f["file"], f["line"], f["code"]) == (file, line, code)
    assert f["user"] is True


@pytest.mark.parametrize("text", ["# Fullname with scope: (Default/Conv2D-op0)", "# Corresponding code candidate:",
                                  "# Scope: (Default)", "#   1: @kernel_graph0", "# Total params: 3"])
def test_other_comments_are_not_frames(text):
    assert parse_frame(text) is None


@pytest.mark.parametrize("path, user", [
    (SITE, False),
    ("/opt/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", False),
    ("/usr/lib/python3.11/contextlib.py", False),
    ("<frozen importlib._bootstrap>", False),
    ("/home/u/msprobe/core/hook.py", False),
    ("C:\\Python39\\Lib\\site-packages\\mindspore\\ops\\x.py", False),
    ("/home/u/proj/net.py", True),
    ("net.py", True),
    ("/home/u/mindspore_models/net.py", True),  # a folder named like the framework only when it is the framework
])
def test_user_files_are_those_outside_the_framework(path, user):
    assert is_user_file(path) is user


def test_first_user_frame_is_the_user_line_nearest_the_op():
    frames = mark_frames([
        {"file": "/x/site-packages/mindspore/nn/wrap/cell_wrapper.py", "line": 423, "code": "def construct"},
        {"file": "/home/u/net.py", "line": 42, "code": "def construct(self, x):"},
        {"file": "/home/u/net.py", "line": 43, "code": "a = self.act(self.stem(x))"},
        {"file": SITE, "line": 373, "code": "output = self.conv2d(x, self.weight)"},
    ])
    assert [f["user"] for f in frames] == [False, True, True, False]
    assert first_user_frame(frames)["line"] == 43
    assert first_user_frame(frames[:1]) is None
    assert first_user_frame([]) is None


IR_20 = """# IR entry: @kernel_graph0
# Total subgraphs: 1

subgraph @kernel_graph0() {
  %1(x) = Conv2D(%para1_x, %para2_w) primitive_attrs: {pad_mode: I64(2)}
      : (<Tensor[Float32], (1, 1, 4, 4)>, <Tensor[Float32], (2, 1, 3, 3)>) -> (<Tensor[Float32], (1, 2, 4, 4)>)
      # Fullname with scope: (Default/stem-Conv2d/Conv2D-op0)
      # In file /home/u/net.py:43/        a = self.act(self.stem(x))/
      # inlined:In file /usr/local/lib/python3.9/site-packages/mindspore/nn/layer/conv.py:286/    def construct(self, x):/
      # inlined:In file /usr/local/lib/python3.9/site-packages/mindspore/nn/layer/conv.py:287/        output = self.conv2d(x, self.weight)/
  Return(%1)
      : (<Tensor[Float32], (1, 2, 4, 4)>)
}
"""


def test_ms_ir_reads_inlined_frames_as_the_rest_of_the_stack():
    g = parse_ir(IR_20)
    node = g.nodes["Default/stem-Conv2d/Conv2D-op0"]
    assert [(s.file.rsplit("/", 1)[-1], s.line) for s in node.source] == [("net.py", 43), ("conv.py", 286),
                                                                           ("conv.py", 287)]
    frames = mark_frames({"file": s.file, "line": s.line, "code": s.code} for s in node.source)
    assert first_user_frame(frames)["code"] == "a = self.act(self.stem(x))"
