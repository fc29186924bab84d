#!/usr/bin/env python3
"""Times one training step of the paper's official PyTorch code, the way `htm bench` times its own.

    python3 bench/official/time_official.py --device cuda --batch 64 --steps 10

The official code (`hierarchical_transformer.py` of CognitiveComputingLab/Hierarchical-Transformers,
commit cd62cda) is a notebook export: it cannot be imported (a `%pip` line, then data loading, a
wandb login and a training run at the top level). This harness parses it with `ast` and executes
only its top-level imports, function definitions and class definitions, unchanged, then builds its
`Model` with the arguments of its `train()` and calls the official `Model.on_train_batch_start`
and `Model.training_step` once per step. Nothing of the model's maths is copied here. What stands
in for the libraries the step does not need:

  * pytorch_lightning: `Model` subclasses `L.LightningModule` and, in `training_step`, calls
    `self.optimizers()`, `self.manual_backward(loss)`, `self.log(...)`, and in `__init__`
    `self.save_hyperparameters(...)`. A small stand-in base class (`_LightningModule` below)
    provides those for one device in fp32 with manual optimisation (what `train()` sets up):
    the optimiser is the one `Model.configure_optimizers` returns, `manual_backward` is
    `loss.backward()`, `log` does nothing.
  * einops: used by the classes (`Rearrange`, `rearrange`, `repeat`): needed (pip's einops, or
    Debian's python3-einops); without it the harness says so and stops.
  * torchvision, wandb: imported if present; only the data module and the image logging use
    them, and neither runs here.

On `--device cpu` the string constant 'cuda' (hard-coded in the official code: the timing
signals, the merging block's masks and sampler) is rewritten to 'cpu' in the parsed tree; on
cuda the tree is executed as it is.

Input: one batch of uniform noise images in [-1, 1] (B x 3 x 32 x 32, the range of the official
CIFAR-10 transform) and random labels, made once on the device and reused every step.
Merging schedule: the full one, [128, 64, ..., 1], at every step: `rho` is set to 1, the value
`train()` reaches at epoch 95 (RHO_0 = 0.05 plus RHO_STEP = 0.01 an epoch, capped at 1), so the
official `adjust_merging_schedule` always draws the whole schedule (`--rho` changes that).

The last line printed is
    official B=<batch> median_ms=<x> min_ms=<x> peak_alloc_mib=<x|n/a> steps=<n> device=<dev>
             torch=<version> source_sha1=<12 hex> peak_requested_mib=<x|n/a>
"""
import argparse
import ast
import hashlib
import inspect
import math
import os
import statistics
import sys
import time
import types

OFFICIAL_URL = "https://github.com/CognitiveComputingLab/Hierarchical-Transformers"
OFFICIAL_COMMIT = "cd62cda"

# The names the official `train()` assigns and passes to `Model(...)`; their values are read from
# its text (literals), so an edit of the file's hyperparameters is followed.
TRAIN_NAMES = ("LR", "RHO_0", "RHO_STEP", "COMPLETE_MERGING_SCHEDULE", "MODEL_KWARGS")


def parse_args():
    p = argparse.ArgumentParser(description="Time the official Hierarchical Transformers training step.")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=10, help="timed steps")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    p.add_argument("--source", default=os.environ.get("HTM_OFFICIAL_SOURCE",
                                                       os.path.join(".official", "hierarchical_transformer.py")),
                   help="the official hierarchical_transformer.py (default: $HTM_OFFICIAL_SOURCE, "
                        "else .official/hierarchical_transformer.py)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None, help="CPU threads (default: torch's)")
    p.add_argument("--rho", type=float, default=1.0,
                   help="the Model's rho: 1 = the full schedule every step (default); 0.05 = train()'s first epoch")
    p.add_argument("--check", action="store_true",
                   help="also check that the policies get gradients and the optimiser changes the parameters")
    return p.parse_args()


# ----------------------------------------------------------------------------------------------
# Stand-ins for the libraries the official file imports but the training step does not need.

def make_lightning_stub(nn):
    """A module object to bind as the official file's `L` (pytorch_lightning)."""

    class _LightningModule(nn.Module):
        """The members of LightningModule that the official `Model` uses, for manual optimisation
        on one device in fp32 (Lightning's own `manual_backward` is `loss.backward()` there)."""

        def save_hyperparameters(self, *names):
            # Lightning reads the named arguments from the caller's frame (Model.__init__).
            caller = sys._getframe(1).f_locals
            self.hparams = types.SimpleNamespace(**{n: caller[n] for n in names})

        def optimizers(self):
            return self._harness_optimizer

        def manual_backward(self, loss):
            loss.backward()

        def log(self, *args, **kwargs):
            pass

    class _LightningDataModule:
        def __init__(self, *args, **kwargs):
            pass

    stub = types.ModuleType("pytorch_lightning (harness stand-in)")
    stub.LightningModule = _LightningModule
    stub.LightningDataModule = _LightningDataModule
    return stub


# ----------------------------------------------------------------------------------------------
# Loading the official file's definitions.

def parse_notebook_export(text, path):
    """ast.parse, blanking the IPython lines (`%pip ...`, `!...`) that make the export invalid
    Python; only lines the parser rejects are touched, so line numbers stay the file's."""
    lines = text.split("\n")
    for _ in range(len(lines)):
        try:
            return ast.parse("\n".join(lines), filename=path), lines
        except SyntaxError as e:
            i = (e.lineno or 0) - 1
            if 0 <= i < len(lines) and lines[i].lstrip()[:1] in ("%", "!"):
                lines[i] = "# (IPython line blanked by the harness) " + lines[i]
                continue
            raise
    raise SyntaxError(f"{path}: cannot be parsed")


class _CudaToDevice(ast.NodeTransformer):
    """Rewrites the string constant 'cuda' to another device (for --device cpu)."""

    def __init__(self, device):
        self.device, self.count = device, 0

    def visit_Constant(self, node):
        if node.value == "cuda":
            self.count += 1
            return ast.copy_location(ast.Constant(value=self.device), node)
        return node


def load_official(path, device, nn):
    """Executes the official file's top-level imports, functions and classes into a namespace.
    Returns (namespace, the arguments of its train(), notes)."""
    text = open(path, encoding="utf-8").read()
    tree, _ = parse_notebook_export(text, path)
    train_args = read_train_arguments(tree, path)
    notes = []
    ns = {"__name__": "hierarchical_transformer", "__file__": path}
    lightning_stub = make_lightning_stub(nn)
    missing = []

    def run(node):
        code = compile(ast.Module(body=[node], type_ignores=[]), path, "exec")
        exec(code, ns)

    # One pass over the top-level statements, in the file's order: imports, definitions, and plain
    # constant assignments (the file has none today; a later edit might hoist its hyperparameters).
    # Calls, loops and other expressions (data loading, wandb, train()) are not run. A module that is
    # missing is noted: only the data module and the image logging use torchvision and wandb; the
    # classes need einops.
    rewrite = _CudaToDevice(device) if device != "cuda" else None
    skipped = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                root = alias.name.split(".")[0]
                if root in ("pytorch_lightning", "lightning"):
                    ns[alias.asname or root] = lightning_stub  # never the real one (it needs a Trainer)
                    continue
                try:
                    run(ast.copy_location(ast.Import(names=[alias]), node))
                except ImportError:
                    missing.append(alias.name)
        elif isinstance(node, ast.ImportFrom):
            root = (node.module or "").split(".")[0]
            if root in ("pytorch_lightning", "lightning"):
                continue  # Trainer, callbacks, loggers: used by train() only
            try:
                run(node)
            except ImportError:
                missing.append(node.module)
        elif (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or
              (isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets) and
               _is_literal(node.value))):
            if rewrite is not None:
                node = ast.fix_missing_locations(rewrite.visit(node))
            try:
                run(node)
            except NameError as e:  # e.g. a base class from a missing module (checked below)
                skipped.append(f"{getattr(node, 'name', '?')} ({e})")

    if any(m.startswith("einops") for m in missing):
        raise RuntimeError("the official code's classes need einops: pip install einops, or Debian's python3-einops")
    notes.append("einops: " + getattr(sys.modules.get("einops"), "__version__", "?"))
    others_missing = sorted(set(m for m in missing if not m.startswith("einops")))
    if others_missing:
        notes.append("not installed (the step does not use them): " + ", ".join(others_missing))
    if rewrite is not None:
        notes.append(f"source: {rewrite.count} 'cuda' constants rewritten to {device!r}")
    if skipped:
        notes.append("definitions not run: " + "; ".join(skipped))
    for name in ("Model", "EncoderArchitecture", "DecoderArchitecture"):
        if name not in ns:
            raise RuntimeError(f"{path}: no top-level {name} (is this the official hierarchical_transformer.py?)")
    return ns, train_args, notes


def read_train_arguments(tree, path):
    """The literal values that the official `train()` assigns to TRAIN_NAMES (its hyperparameters)."""
    train = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "train"), None)
    if train is None:
        raise RuntimeError(f"{path}: no top-level train() to read the hyperparameters from")
    values = {}
    for node in ast.walk(train):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id in TRAIN_NAMES and _is_literal(node.value):
                values[node.targets[0].id] = ast.literal_eval(node.value)
    absent = [n for n in TRAIN_NAMES if n not in values]
    if absent:
        raise RuntimeError(f"{path}: train() assigns no literal {', '.join(absent)}")
    return values


def _is_literal(node):
    try:
        ast.literal_eval(node)
        return True
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False


# ----------------------------------------------------------------------------------------------

def main():
    args = parse_args()
    if not os.path.isfile(args.source):
        print(f"time_official.py: the official code is not at {args.source!r} ({os.path.abspath(args.source)}).\n"
              f"Get it (it is not part of this repository) with\n"
              f"    git clone {OFFICIAL_URL} && git -C Hierarchical-Transformers checkout {OFFICIAL_COMMIT}\n"
              f"then pass its hierarchical_transformer.py with --source PATH or HTM_OFFICIAL_SOURCE=PATH,\n"
              f"or copy it to .official/hierarchical_transformer.py under the current directory.",
              file=sys.stderr)
        sys.exit(2)
    with open(args.source, "rb") as f:
        source_sha1 = hashlib.sha1(f.read()).hexdigest()[:12]

    import numpy as np
    import torch
    import torch.nn as nn

    if args.device == "cuda" and not torch.cuda.is_available():
        print("time_official.py: --device cuda, but torch sees no CUDA device", file=sys.stderr)
        sys.exit(1)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)  # the official adjust_merging_schedule draws with np.random
    device = torch.device(args.device)

    try:
        ns, train_args, notes = load_official(args.source, args.device, nn)
    except RuntimeError as e:  # not the official file, or einops missing: one line, no traceback
        print(f"time_official.py: {e}", file=sys.stderr)
        sys.exit(2)
    for note in notes:
        print("info", note)
    print("info train():", ", ".join(f"{k}={train_args[k]!r}" for k in TRAIN_NAMES))

    model_kwargs = dict(train_args["MODEL_KWARGS"])
    schedule = list(train_args["COMPLETE_MERGING_SCHEDULE"])

    # As the official train() does: Model(MODEL_KWARGS, LR, COMPLETE_MERGING_SCHEDULE, RHO_0, RHO_STEP).
    model = ns["Model"](model_kwargs, train_args["LR"], schedule, train_args["RHO_0"],
                        train_args["RHO_STEP"]).to(device)
    model.train()  # Lightning's fit loop puts the module in training mode (dropout on)
    model.rho = args.rho
    # Model.configure_optimizers returns ([AdamW], [MultiStepLR]); under manual optimisation
    # Lightning never steps the scheduler itself, and training_step does not, so only the
    # optimiser takes part in a step.
    optimizers, _schedulers = model.configure_optimizers()
    model._harness_optimizer = optimizers[0]

    params = sum(p.numel() for p in model.parameters())
    print(f"info model: {params} parameters, schedule {schedule}, rho {args.rho}, "
          f"threads {torch.get_num_threads()}")

    # One batch of noise images in [-1, 1] (CIFAR-10's normalised range) and labels, on the device.
    # The channels: MODEL_KWARGS's, else the default of EncoderArchitecture's `channels` (3, CIFAR-10's).
    channels = model_kwargs.get("channels",
                                inspect.signature(ns["EncoderArchitecture"]).parameters["channels"].default)
    images = torch.rand(args.batch, channels, *model_kwargs["image_size"], device=device) * 2 - 1
    labels = torch.randint(0, 10, (args.batch,), device=device)
    batch = (images, labels)

    policy_params = {
        "merging qk_initial": list(model.encoder.merging_block.qk_initial.parameters()),
        "unmerging scoring_function": list(model.decoder.decomposition_block.scoring_function.parameters()),
    }
    grad_norms = []  # with --check: the gradients' norms seen as the optimiser steps
    if args.check:
        optimizer = model._harness_optimizer
        plain_step = optimizer.step

        def step_and_record(*a, **k):
            norms = {name: math.sqrt(sum(float(p.grad.pow(2).sum()) for p in ps if p.grad is not None))
                     for name, ps in policy_params.items()}
            norms["all"] = math.sqrt(sum(float(p.grad.pow(2).sum()) for p in model.parameters()
                                         if p.grad is not None))
            grad_norms.append(norms)
            return plain_step(*a, **k)

        optimizer.step = step_and_record
        before = {n: p.detach().clone() for n, p in model.named_parameters()}

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    losses, times = [], []
    for i in range(args.warmup + args.steps):
        if i == args.warmup and device.type == "cuda":
            torch.cuda.reset_peak_memory_stats()
        # Lightning's fit loop, per batch: the on_train_batch_start hook (the official
        # Model.on_train_batch_start -> adjust_merging_schedule), then training_step.
        model.on_train_batch_start(batch, i)
        sync()
        t0 = time.perf_counter()
        loss = model.training_step(batch, i)
        sync()
        t1 = time.perf_counter()
        losses.append(float(loss))
        if i >= args.warmup:
            times.append((t1 - t0) * 1e3)

    print("info losses:", " ".join(f"{x:.5f}" for x in losses))
    print("info step ms:", " ".join(f"{t:.1f}" for t in times))
    ok = all(math.isfinite(x) for x in losses)
    if args.check:
        unchanged = [n for n, p in model.named_parameters() if torch.equal(p.detach(), before[n])]
        total = sum(1 for _ in model.parameters())
        changed = total - len(unchanged)
        first = grad_norms[0] if grad_norms else {}
        print("info check: gradient norms at the first optimiser step (policies scaled by the loss): " +
              ", ".join(f"{k} {v:.4g}" for k, v in first.items()))
        print(f"info check: {changed} of {total} parameter tensors changed over the run; unchanged: "
              + (", ".join(unchanged) or "none"))
        policy_ok = all(g[k] > 0 for g in grad_norms for k in policy_params)
        print(f"info check: policy gradients non-zero at every step: {policy_ok}")
        ok = ok and policy_ok and changed > 0
    if not all(math.isfinite(x) for x in losses):
        print("time_official.py: a loss is not finite", file=sys.stderr)

    peak = f"{torch.cuda.max_memory_allocated() / 2**20:.1f}" if device.type == "cuda" else "n/a"
    # What the tensors asked for (torch 2.1 and later), beside htm bench's own `requested` line.
    requested = torch.cuda.memory_stats().get("requested_bytes.all.peak") if device.type == "cuda" else None
    requested = "n/a" if requested is None else f"{requested / 2**20:.1f}"
    median = statistics.median(times) if times else float("nan")
    least = min(times) if times else float("nan")
    print(f"official B={args.batch} median_ms={median:.1f} min_ms={least:.1f} peak_alloc_mib={peak} "
          f"steps={len(times)} device={args.device} torch={torch.__version__} source_sha1={source_sha1} "
          f"peak_requested_mib={requested}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
