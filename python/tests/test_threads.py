"""Two models on two threads at once, and the GIL released while the engine computes."""
import threading
import time

import tessera
from conftest import THREADS

PROMPTS = ["The capital of France is", "Once upon a time"]


def test_two_models_two_threads(real_path, tiny_chat_path):
    paths = [real_path, tiny_chat_path]
    models = [tessera.Model(p, n_threads=1, n_ctx=512) for p in paths]
    try:
        want = [m.generate(p, max_tokens=24, temperature=0) for m, p in zip(models, PROMPTS)]
        got = [None, None]
        spans = [None, None]
        errors = []
        go = threading.Barrier(2)

        def work(i):
            try:
                go.wait()
                t0 = time.monotonic()
                out = []
                for _ in range(3):
                    out.append(models[i].generate(PROMPTS[i], max_tokens=24, temperature=0))
                spans[i] = (t0, time.monotonic())
                got[i] = out
            except BaseException as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        assert not errors, errors
        for i in range(2):
            assert got[i] == [want[i]] * 3
        # They ran at the same time.
        assert spans[0][0] < spans[1][1] and spans[1][0] < spans[0][1]
    finally:
        for m in models:
            m.close()


def test_gil_released_during_compute(real_path):
    """While one thread is inside a long engine call (a prompt of ~480 tokens computed in one
    step), another Python thread keeps running: the longest pause it sees is far shorter
    than the call."""
    with tessera.Model(real_path, n_threads=THREADS, n_ctx=1024) as m:
        prompt = " ".join(["apple banana cherry"] * 120)
        ids = m.tokenize(prompt)
        assert 300 < len(ids) <= 512
        m.generate("warm up", max_tokens=1, temperature=0)
        stop = threading.Event()
        ticks = []

        def tick():
            while not stop.is_set():
                ticks.append(time.monotonic())
                for _ in range(200):
                    pass

        t = threading.Thread(target=tick)
        t.start()
        try:
            time.sleep(0.05)
            t0 = time.monotonic()
            m.generate(prompt, max_tokens=1, temperature=0)
            t1 = time.monotonic()
        finally:
            stop.set()
            t.join()
        inside = [x for x in ticks if t0 <= x <= t1]
        gaps = [b - a for a, b in zip(inside, inside[1:])]
        assert t1 - t0 > 0.1, "the call was too short to judge"
        assert len(inside) > 10
        assert max(gaps) < 0.5 * (t1 - t0), (max(gaps), t1 - t0)
