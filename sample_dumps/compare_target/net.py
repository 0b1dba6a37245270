import numpy as np
import mindspore as ms
from mindspore import nn, ops

ms.set_context(mode=ms.GRAPH_MODE, device_target="Ascend", jit_config={"jit_level": "O0"})


class Net(nn.Cell):
    def __init__(self, eps=1e-5):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, pad_mode='same', has_bias=False)
        self.bn1 = nn.BatchNorm2d(4, eps=eps, use_batch_statistics=False)
        self.relu = nn.ReLU()
        self.pool = nn.MaxPool2d(2, 2)
        self.flatten = nn.Flatten()
        self.fc1 = nn.Dense(36, 16)
        self.fc2 = nn.Dense(16, 10, dtype=ms.bfloat16)

    def construct(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.flatten(self.pool(x))
        x = self.fc1(x)
        x = ops.cast(x, ms.float16)
        e = ops.exp(x)
        x = e / e.sum(axis=1, keepdims=True)
        x = ops.cast(x, ms.bfloat16)
        return self.fc2(x)


net = Net(eps=0.1)
net.set_train(False)
for step in range(2):
    x = np.random.default_rng(11 + step).standard_normal((2, 3, 6, 6)).astype(np.float32)
    if step == 1:
        x = x * 6  # makes the float16 Exp overflow
    print(step, net(ms.Tensor(x)))
