"""A real Troubleshooter 1.0.18 torch api_dump whose run goes NaN: python make_ts_nan.py OUT

(torch 2.13 CPU).  torch.sqrt of a negative tensor is the first API with a NaN output; every
row of the info file also has a NaN third summary value (mean is not in Troubleshooter's
default statistic_category, and unused statistics are written as NaN).
"""

import sys

import torch
import torch.nn as nn
from troubleshooter.migrator import api_dump_init, api_dump_start, api_dump_stop


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = torch.relu(self.fc(x))
        h = torch.sub(h, 10.0)      # all negative
        h = torch.sqrt(h)           # NaN: the origin
        return torch.add(h, 1.0)


torch.manual_seed(0)
net = Net().eval()
x = torch.randn(2, 4)
api_dump_init(net, sys.argv[1])
api_dump_start()
with torch.no_grad():
    y = net(x)
api_dump_stop()
print(y)
