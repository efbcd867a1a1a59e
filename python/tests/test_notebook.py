"""The example notebook runs top to bottom on a synthetic tree."""

import os
from pathlib import Path


NOTEBOOK = Path(__file__).resolve().parent.parent / "examples" / "notebook.ipynb"


def test_notebook_runs(experiment):
    # The test extras install these; a missing one is an error, not a skip.
    import ipykernel  # noqa: F401
    import nbclient
    import nbformat

    nb = nbformat.read(NOTEBOOK, as_version=4)
    os.environ["NFLAB_EXPERIMENT"] = str(experiment)
    try:
        nbclient.NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    finally:
        del os.environ["NFLAB_EXPERIMENT"]
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs), "no figure in the notebook output"
