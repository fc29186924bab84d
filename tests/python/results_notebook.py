"""Executes a notebook with nbclient, in the folder the command runs in (the kernel is this
python3, its environment inherited: HTM_DB, HTM_EXPERIMENT, PYTHONPATH). Fails on any error
and when a figure or the comparison table is missing from its outputs.
Usage: results_notebook.py NOTEBOOK"""

import os
import sys
import time

import nbformat
from nbclient import NotebookClient

path = sys.argv[1]
notebook = nbformat.read(path, as_version=4)
start = time.time()
NotebookClient(notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": os.getcwd()}}).execute()
outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
figures = sum("image/png" in o.get("data", {}) for o in outputs)
text = "".join(o.get("text", "") + o.get("data", {}).get("text/plain", "") for o in outputs)
if figures == 0:
    sys.exit("the notebook drew no figure")
if "p_adjusted" not in text:
    sys.exit("the notebook printed no comparison table")
print(f"{path}: {len(notebook.cells)} cells ran in {time.time() - start:.1f} s, {figures} figure(s)")
print("notebook ran clean")
