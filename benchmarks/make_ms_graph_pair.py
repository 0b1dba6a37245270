"""A MindSpore graph-mode pair bigger than the tests' real dumps, to time compare where every op is joined
to a kernel graph (graph details, Load parameters: ``core/query/graph_lookup.py``).  Run by hand with a
throwaway MindSpore (``pip install mindspore``, CPU), never by the benchmarks or the tests:

    python make_ms_graph_pair.py OUT/golden golden 150    # then: OUT/lr lr 150

MindSpore 2.10 (CPU, graph mode, synchronous e2e dump) trains a residual MLP of BLOCKS blocks (Dense,
LayerNorm, GELU, a skip add) for two steps and dumps the first (``iteration: "0"``).  VARIANT ``lr``
trains with the learning rate x1.1: the honest first divergence is the first ApplyMomentum, caused by
its learning-rate input.  150 blocks: 12,800 files a tree, 3,467 ops (1,209 parameters), every op
joined to ``kernel_graph0``; about 25 s each on 2 cores.
"""
import json
import os
import sys

import numpy as np

out, variant = sys.argv[1], sys.argv[2]
blocks = int(sys.argv[3]) if len(sys.argv) > 3 else 100
cfg = {
    "common_dump_settings": {"dump_mode": 0, "path": os.path.abspath(out), "net_name": "Net", "iteration": "0",
                             "input_output": 0, "kernels": [], "support_device": [0, 1, 2, 3, 4, 5, 6, 7],
                             "saved_data": "tensor"},
    "e2e_dump_settings": {"enable": True, "trans_flag": True},
}
os.makedirs(out, exist_ok=True)
with open(out + ".json", "w") as fh:
    json.dump(cfg, fh)
os.environ["MINDSPORE_DUMP_CONFIG"] = os.path.abspath(out + ".json")

import mindspore as ms  # noqa: E402
from mindspore import nn  # noqa: E402

ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")
ms.set_seed(0)


class Block(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc = nn.Dense(16, 16)
        self.norm = nn.LayerNorm((16,))
        self.act = nn.GELU()

    def construct(self, x):
        return x + self.act(self.norm(self.fc(x)))


class Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.blocks = nn.SequentialCell([Block() for _ in range(blocks)])
        self.head = nn.Dense(16, 3)

    def construct(self, x):
        return self.head(self.blocks(x))


net = Net()
lr = 0.011 if variant == "lr" else 0.01
opt = nn.Momentum(net.trainable_params(), learning_rate=lr, momentum=0.9)
train = nn.TrainOneStepCell(nn.WithLossCell(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")), opt)
rng = np.random.default_rng(0)
x = ms.Tensor(rng.standard_normal((4, 16)).astype(np.float32))
y = ms.Tensor(np.array([0, 2, 1, 0], np.int32))
for i in range(2):
    print(i, train(x, y).asnumpy())
