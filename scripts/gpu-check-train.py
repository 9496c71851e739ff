#!/usr/bin/env python3
"""A small real PyTorch training run for scripts/gpu-check: an MLP on random data on the GPU.

    gpu-check-train.py [--mem-gib G] [--seconds S] [--epochs N] [--hidden H] [--batch B]

Holds about G GiB of GPU memory (the model, its optimizer state and ballast standing in for a
larger model's activations, taken 256 MiB at a time as activations grow, so a memory limit stops
it where the limit is and PyTorch's out-of-memory error says how much it held), trains for about
S seconds split into N epochs, prints one line per epoch with its step rate (which drops when
another task shares the GPU) and exits 0. Exits 2 when PyTorch or a CUDA GPU is missing; an
out-of-memory error ends it with PyTorch's traceback (exit 1).
"""

import argparse
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mem-gib", type=float, default=4.0, help="GPU memory to hold (GiB)")
    p.add_argument("--seconds", type=float, default=30.0, help="training time (s)")
    p.add_argument("--epochs", type=int, default=6, help="epochs (progress lines)")
    p.add_argument("--hidden", type=int, default=2048, help="hidden layer width")
    p.add_argument("--batch", type=int, default=512, help="batch size")
    return p.parse_args()


def main():
    args = parse_args()
    try:
        import torch
        import torch.nn.functional as F
    except ImportError as e:
        print(f"gpu-check-train: PyTorch is not installed: {e}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("gpu-check-train: PyTorch sees no CUDA GPU (torch.cuda.is_available() is False)",
              file=sys.stderr)
        return 2
    device = torch.device("cuda")
    torch.manual_seed(0)
    features, classes = 1024, 10
    model = torch.nn.Sequential(
        torch.nn.Linear(features, args.hidden), torch.nn.ReLU(),
        torch.nn.Linear(args.hidden, args.hidden), torch.nn.ReLU(),
        torch.nn.Linear(args.hidden, classes)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(args.batch, features, device=device)
    y = torch.randint(0, classes, (args.batch,), device=device)

    # One step first, so the optimizer state and the activations are counted in what is held.
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    torch.cuda.synchronize()
    target = int(args.mem_gib * 2**30)
    chunk = 256 * 2**20
    ballast = []
    while torch.cuda.memory_reserved() < target:
        piece = torch.empty(min(chunk, target - torch.cuda.memory_reserved()), dtype=torch.uint8,
                            device=device)
        piece.fill_(1)  # touched, so the memory is really backed
        ballast.append(piece)
    name = torch.cuda.get_device_name(device)
    print(f"gpu-check-train: {name}: holding {torch.cuda.memory_reserved() / 2**30:.2f} GiB, "
          f"training for {args.seconds:.0f} s in {args.epochs} epochs", flush=True)

    per_epoch = args.seconds / max(1, args.epochs)
    for epoch in range(1, args.epochs + 1):
        start = time.monotonic()
        steps = 0
        while time.monotonic() - start < per_epoch:
            optimizer.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            steps += 1
            if steps % 20 == 0:
                torch.cuda.synchronize()  # the host must not run ahead of the GPU's work
        torch.cuda.synchronize()
        took = time.monotonic() - start
        print(f"epoch {epoch}/{args.epochs} loss {loss.item():.4f} steps {steps} "
              f"({steps / took:.1f} steps/s) memory {torch.cuda.memory_reserved() / 2**30:.2f} GiB",
              flush=True)
    del ballast
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
