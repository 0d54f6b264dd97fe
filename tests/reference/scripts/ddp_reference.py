"""PyTorch's own DDP on the same torch wheel, for scripts/bench/ddp_scaling: the tutorial's
train_ddp (BasicNet, AdamW 1e-3, batch 64, Gloo) with a DistributedSampler so each rank trains on
its share, timing the training loop only. Run under torchrun.

usage: torchrun --nproc_per_node N ddp_reference.py MAX_TRAIN_SAMPLES DATASET_DIR
"""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

from tutorial import BasicNet, read_idx


def train_ddp(n, directory):
    dist.init_process_group("gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    images = read_idx(f"{directory}/train-images-idx3-ubyte.gz")[:n]
    labels = read_idx(f"{directory}/train-labels-idx1-ubyte.gz")[:n].long()
    dataset = TensorDataset(images, labels)
    sampler = DistributedSampler(dataset, world_size, rank, shuffle=True, seed=42)
    loader = DataLoader(dataset, batch_size=64, sampler=sampler)
    torch.manual_seed(42)
    ddp_model = DDP(BasicNet())
    optimizer = torch.optim.AdamW(ddp_model.parameters(), lr=1e-3)
    ddp_model.train()
    start = time.perf_counter()
    seen = 0
    for data, target in loader:
        data = ((data.float() / 255.0 - 0.1307) / 0.3081).unsqueeze(1)
        loss = F.nll_loss(ddp_model(data), target)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        seen += len(target)
    elapsed = time.perf_counter() - start
    total = torch.tensor([float(seen)])
    dist.all_reduce(total)
    if rank == 0:
        print(f"Throughput: {total.item() / elapsed:.1f} samples/s ({world_size} ranks, {elapsed:.1f} s)")
    dist.destroy_process_group()


if __name__ == "__main__":
    train_ddp(int(sys.argv[1]), sys.argv[2])
