"""Ctrl-C interrupts a long call and stops its work: SIGINT to a Python process inside a long
`culturelens` call raises KeyboardInterrupt there at once (the compiled work polls for signals
every 50 ms), the interrupted work stops at its next cancellation point (between bootstrap
resamples, between denoising steps: it uses no CPU after the exception), and the interpreter then exits normally, promptly."""

import signal
import subprocess
import sys
import time

import pytest

from conftest import ROOT

CODE = """
import time
import numpy as np
import pandas as pd
import culturelens

which = {which!r}
rng = np.random.default_rng(0)
if which == "vendi":
    x = rng.standard_normal((3000, 64)).astype(np.float32)
    # 20000 resamples, each a whole Vendi computation: minutes.
    call = lambda: culturelens.vendi(x, q=1, ci=0.9, bootstrap=20000, ci_method="percentile")
elif which == "generate":
    pipeline = culturelens.Pipeline.from_pretrained({sd1!r})
    # 900 denoising steps of four prompts: the Ctrl-C lands between two steps.
    call = lambda: pipeline.generate(["a street"] * 4, steps=900, height=16, width=16)
else:
    n = 2000
    x = rng.standard_normal((n, 64)).astype(np.float32)
    meta = pd.DataFrame({{
        "model": ["m"] * n,
        "language": (["en", "de"] * n)[:n],
        "culture": (["a", "b", "c", "d"] * n)[:n],
    }})
    # 20000 exact resamples, each recomputing the references and scores: minutes.
    call = lambda: culturelens.sos(x, meta, ci=0.9, bootstrap=20000, ci_method="percentile", ci_mode="exact")
print("ready", flush=True)
start = time.monotonic()
try:
    call()
    print("finished", flush=True)
except KeyboardInterrupt:
    interrupted = time.monotonic() - start
    # The work's CPU time in the second after the exception: ~0 once it stopped.
    cpu = time.process_time()
    time.sleep(1.0)
    print("interrupted", interrupted, time.process_time() - cpu, flush=True)
"""


@pytest.mark.parametrize("which", ["vendi", "sos", "generate"])
def test_sigint_raises_keyboard_interrupt_quickly_and_stops_the_work(which):
    proc = subprocess.Popen(
        [sys.executable, "-c", CODE.format(which=which, sd1=str(ROOT / "tests" / "fixtures" / "diffusion" / "tiny-sd1"))], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(1.0)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        # The process leaves by itself (no os._exit): the interpreter's exit would wait for work
        # that went on in the background.
        out, err = proc.communicate(timeout=30)
        ended = time.monotonic() - sent
    finally:
        proc.kill()
    print(f"{which}: {out.strip()}; the process ended {ended:.3f} s after SIGINT")
    assert out.startswith("interrupted"), (out, err)
    _, running, cpu = out.split()
    assert float(running) >= 1.0  # the call was still running when the signal came
    # One second of sleep after the exception: the cancelled work has stopped.
    assert float(cpu) < 0.25, f"{cpu} s of CPU in the second after the KeyboardInterrupt"
    # The second of sleep, then a prompt exit.
    assert ended < 4.0, ended
    assert proc.returncode == 0, (proc.returncode, err)
