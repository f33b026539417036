"""The README's example runs as written and prints what the README says."""
import os
import pathlib
import re
import subprocess
import sys

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"


def test_readme_example_runs():
    text = README.read_text()
    example = re.search(r"```python\n(.*?)```", text[text.index("## Example"):], re.S).group(1)
    assert len(example.strip().splitlines()) <= 10
    # A fresh interpreter, with this one's environment (PYTHONPATH, MOONCAKE_SOCKET).
    run = subprocess.run([sys.executable, "-c", example], env=dict(os.environ),
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["b'hello, mooncake'", "1048576 True"]
